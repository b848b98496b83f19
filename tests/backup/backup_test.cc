// Backup and restore (include/ember/backup.h): round trips of every column type, NULLs, BLOBs
// of every size, long strings, empty tables and several page sizes; a backup taken while
// writers run holds exactly one snapshot; damaged and truncated backup files are refused with
// an error naming the frame, and a failed restore leaves nothing at the database's path.
#include <atomic>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "engine/backup/backup_format.h"
#include "engine/blob/blob_codec.h"
#include "engine/page/blob_page.h"
#include "tests/support/blob_db_util.h"
#include "tests/support/db_util.h"

namespace ember::testing {
namespace {

// A table's rows in a form independent of record ids and BLOB ids (BLOBs by their bytes),
// sorted, for comparing two databases.
std::vector<std::string> Content(Database* db, const std::string& table) {
  auto txn = VALUE_OR_FAIL(db->Begin());
  Table t = VALUE_OR_FAIL(db->GetTable(table));
  auto rows = VALUE_OR_FAIL(ScanAll(txn.get(), t));
  std::vector<std::string> out;
  for (auto& [id, row] : rows) {
    std::string s;
    for (size_t c = 0; c < row.size(); ++c) {
      if (const BlobId* b = std::get_if<BlobId>(&row[c])) {
        const std::string bytes = ReadAll(txn.get(), *b);
        s += "blob:" + std::to_string(bytes.size()) + ":" +
             std::to_string(std::hash<std::string>()(bytes));
      } else if (const std::string* str = std::get_if<std::string>(&row[c])) {
        s += "s:" + std::to_string(str->size()) + ":" +
             std::to_string(std::hash<std::string>()(*str));
      } else {
        s += ValueText(row[c]);
      }
      s += "|";
    }
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end());
  REQUIRE_OK(txn->Commit());
  return out;
}

std::string Bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

BlobId StoreBlob(Transaction* txn, const std::string& bytes) {
  auto w = VALUE_OR_FAIL(txn->CreateBlob());
  // Several segments, so a BLOB's pages are made the way applications make them.
  for (size_t at = 0; at < bytes.size(); at += 100000) {
    REQUIRE_OK(w->Write(std::string_view(bytes).substr(at, 100000)));
  }
  return w->id();
}

// BLOB sizes at every storage boundary of a database of `ps`-byte pages, each plus and minus
// one: held in the header record (up to ps / 4), one data page, the page list in the header
// record (up to ps / 8 pages) or in list pages; the backup's frame size (held in the row, or
// sent in pieces); and 0, 1 and 3 MB.
std::vector<size_t> BlobSizes(uint32_t ps) {
  const size_t cap = page::BlobPageCapacity(ps);
  const size_t listed = ps / 8 * cap;  // the most bytes whose page list fits the header
  std::vector<size_t> out{0, 1};
  for (size_t edge : {size_t{ps / 4}, cap, listed, size_t{backup::kFrameTarget}}) {
    out.insert(out.end(), {edge - 1, edge, edge + 1});
  }
  out.push_back(3u << 20);
  return out;
}

// Sizes for a compressed BLOB column: 0, 1, around the frame size, several frames.
std::vector<size_t> CompressedBlobSizes() {
  const size_t f = blob::kFrameBytes;
  return {0, 1, 100, f - 1, f, f + 1, 3 * f + 17};
}

constexpr uint32_t kFillPageSize = 4096;

// Every column type, NULLs, long strings (stored out of line), BLOBs of every size in
// BlobSizes(kFillPageSize) and CompressedBlobSizes(), an empty table, and indexes of each kind:
// unique (t_id), inactive (t_s), inactive unique over duplicate keys (t_b: rows with an empty
// b), inactive over keys longer than max_key_size (t_long over s, which holds 5,000-byte
// strings).
void Fill(Database* db) {
  Table t = VALUE_OR_FAIL(db->CreateTable({"t",
                                           {{"id", ColumnType::kInt64, false},
                                            {"d", ColumnType::kDouble},
                                            {"s", ColumnType::kString},
                                            {"b", ColumnType::kBytes},
                                            {"blob", ColumnType::kBlob},
                                            {"zblob", ColumnType::kBlob, true, 3}}}));
  VALUE_OR_FAIL(db->CreateTable({"empty", {{"x", ColumnType::kInt64}}}));
  // Made while the table is empty, deactivated before the rows they would refuse go in.
  REQUIRE_OK(db->CreateIndex({"t_b", "t", {"b"}, true}));
  REQUIRE_OK(db->CreateIndex({"t_long", "t", {"s"}, false}));
  REQUIRE_OK(db->SetIndexActive("t_b", false));
  REQUIRE_OK(db->SetIndexActive("t_long", false));
  auto txn = VALUE_OR_FAIL(db->Begin());
  const std::vector<size_t> sizes = BlobSizes(kFillPageSize);
  const std::vector<size_t> zsizes = CompressedBlobSizes();
  for (int64_t i = 0; i < 400; ++i) {
    Row r{i,
          i % 7 == 0 ? Value{} : Value{i * 0.5 - 3.25},
          i % 5 == 0 ? Value{} : Value{std::string(i % 3 == 0 ? 5000 : 10, 'a' + i % 26)},
          i % 11 == 0 ? Value{} : Value{Bytes(static_cast<size_t>(i % 40), i)},
          Value{},
          Value{}};
    // Each size once, then small ones.
    const size_t k = static_cast<size_t>(i / 4);
    if (i % 4 == 0) {
      r[4] = StoreBlob(txn.get(), Bytes(k < sizes.size() ? sizes[k] : k % 300, i + 1000));
    }
    if (i % 6 == 0) {
      const size_t n =
          static_cast<size_t>(i / 6) < zsizes.size() ? zsizes[i / 6] : static_cast<size_t>(i) * 300;
      auto w = VALUE_OR_FAIL(txn->CreateBlob(t, "zblob"));
      // Half random (stored about as long), half repeated (compressed small).
      REQUIRE_OK(w->Write(Bytes(n / 2, i)));
      REQUIRE_OK(w->Write(std::string(n - n / 2, 'z')));
      r[5] = w->id();
    }
    REQUIRE_OK(txn->Insert(t, r));
  }
  // Extremes.
  REQUIRE_OK(txn->Insert(t, {INT64_MIN, -0.0, std::string(), std::string(), Value{}, Value{}}));
  REQUIRE_OK(txn->Insert(
      t, {INT64_MAX, 1e308, std::string("\0x\0", 3), std::string("\xff"), Value{}, Value{}}));
  REQUIRE_OK(txn->Commit());
  REQUIRE_OK(db->CreateIndex({"t_id", "t", {"id"}, true}));
  REQUIRE_OK(db->CreateIndex({"t_s", "t", {"d", "id"}, false}));
  REQUIRE_OK(db->SetIndexActive("t_s", false));
}

// A database at tmp.path() made by Fill, closed, and its backup (the returned path).
std::string FilledBackup(const TempDb& tmp) {
  auto db = OpenOrFail(tmp.path(), CreateOptions());
  Fill(db.get());
  const std::string bak = tmp.File("t.ebk");
  REQUIRE_OK(db->Backup(bak));
  REQUIRE_OK(db->Close());
  return bak;
}

// Compares table `name` of `a` and `b` row by row (paired by the first column, unique in
// every table compared) and BLOB by BLOB, byte for byte.
void RequireSameRows(Database* a, Database* b, const std::string& name) {
  auto ta = VALUE_OR_FAIL(a->Begin());
  auto tb = VALUE_OR_FAIL(b->Begin());
  auto rows_of = [&](Database* db, Transaction* txn) {
    std::map<std::string, Row> out;
    for (auto& [id, row] : VALUE_OR_FAIL(ScanAll(txn, VALUE_OR_FAIL(db->GetTable(name))))) {
      REQUIRE(out.emplace(ValueText(row[0]), row).second);
    }
    return out;
  };
  const std::map<std::string, Row> ra = rows_of(a, ta.get()), rb = rows_of(b, tb.get());
  REQUIRE(ra.size() == rb.size());
  std::string x, y;
  for (const auto& [key, row] : ra) {
    INFO("row " << key);
    auto it = rb.find(key);
    REQUIRE(it != rb.end());
    const Row& other = it->second;
    REQUIRE(other.size() == row.size());
    for (size_t c = 0; c < row.size(); ++c) {
      INFO("column " << c);
      const BlobId* ba = std::get_if<BlobId>(&row[c]);
      const BlobId* bb = std::get_if<BlobId>(&other[c]);
      if (!ba || !bb) {
        CHECK(SameValue(row[c], other[c]));
        continue;
      }
      x = ReadAll(ta.get(), *ba);
      y = ReadAll(tb.get(), *bb);
      CHECK(x.size() == y.size());
      CHECK(x == y);
      CHECK((ba->value == 0) == (bb->value == 0));  // the empty BLOB stays id 0
    }
  }
  REQUIRE_OK(ta->Commit());
  REQUIRE_OK(tb->Commit());
}

void RequireSame(Database* a, Database* b) {
  REQUIRE(b->TableNames() == a->TableNames());
  for (const std::string& name : a->TableNames()) {
    INFO("table " << name);
    RequireSameRows(a, b, name);
  }
}

TEST_CASE("backup and restore round trip every column type, BLOBs and page sizes", "[backup]") {
  TempDb tmp;
  auto db = OpenOrFail(tmp.path(), CreateOptions(kFillPageSize, 512));
  Fill(db.get());
  RequireValid(db.get(), "filled");
  // What the backup must count: every BLOB value of at least one byte.
  uint64_t blobs = 0, blob_bytes = 0;
  for (size_t n : BlobSizes(kFillPageSize)) {
    blobs += n > 0;
    blob_bytes += n;
  }
  const std::string bak = tmp.File("t.ebk");
  for (int workers : {1, 3}) {
    BackupOptions bo;
    bo.workers = workers;
    BackupResult br = VALUE_OR_FAIL(db->Backup(bak, bo));
    CHECK(br.tables == 2);
    CHECK(br.indexes == 4);
    CHECK(br.rows == 402);
    CHECK(br.blobs >= blobs);  // and the small ones after them
    CHECK(br.blob_bytes >= blob_bytes);
    CHECK(br.bytes == std::filesystem::file_size(bak));
    // Every page size on one worker; the parallel restore into the default page size.
    for (uint32_t ps :
         workers == 1 ? std::vector<uint32_t>{4096, 8192, 32768} : std::vector<uint32_t>{8192}) {
      INFO("workers " << workers << " page size " << ps);
      const std::string path = tmp.File("r" + std::to_string(ps) + "-" + std::to_string(workers));
      Options o = CreateOptions(ps, 256);
      o.max_parallel_workers = 4;
      RestoreOptions ro;
      ro.workers = workers;
      RestoreResult rr = VALUE_OR_FAIL(Restore(bak, path, o, ro));
      CHECK(rr.rows == 402);
      CHECK(rr.tables == 2);
      CHECK(rr.indexes == 4);
      CHECK(rr.indexes_built == 1);  // t_id; the others were inactive
      CHECK(rr.warnings.empty());
      CHECK(rr.blobs == br.blobs);
      CHECK(rr.blob_bytes == br.blob_bytes);
      CHECK_FALSE(std::filesystem::exists(path + ".restoring"));
      Options ro_open = o;
      ro_open.create_if_missing = false;
      auto r = OpenOrFail(path, ro_open);
      RequireSame(db.get(), r.get());
      RequireValid(r.get(), "restored");
      // The indexes are back: the unique one works and checks, the inactive one stays so.
      Index ix = VALUE_OR_FAIL(r->GetIndex("t_id"));
      Table t = VALUE_OR_FAIL(r->GetTable("t"));
      auto txn = VALUE_OR_FAIL(r->Begin());
      auto hit = VALUE_OR_FAIL(txn->Lookup(ix, {int64_t{17}}));
      REQUIRE(hit.has_value());
      CHECK(std::get<int64_t>(hit->second[0]) == 17);
      CHECK(IsError(
          txn->Insert(t, {int64_t{17}, Value{}, Value{}, Value{}, Value{}, Value{}}).status(),
          absl::StatusCode::kAlreadyExists));
      for (const char* name : {"t_s", "t_b", "t_long"}) {
        INFO("index " << name);
        Index inactive = VALUE_OR_FAIL(r->GetIndex(name));
        CHECK(IsError(txn->IndexScan(inactive, {}, {}).status(),
                      absl::StatusCode::kFailedPrecondition));
      }
      REQUIRE_OK(txn->Rollback());
      // t_s builds once asked; t_b still meets its duplicates.
      REQUIRE_OK(r->SetIndexActive("t_s", true));
      CHECK(IsError(r->SetIndexActive("t_b", true), absl::StatusCode::kAlreadyExists, "(b)=(x'')"));
      REQUIRE_OK(r->Close());
    }
  }
  REQUIRE_OK(db->Close());
}

TEST_CASE("restore refuses an existing database and replaces it when asked", "[backup]") {
  TempDb tmp;
  const std::string bak = FilledBackup(tmp);
  CHECK(IsError(Restore(bak, tmp.path(), CreateOptions()).status(),
                absl::StatusCode::kAlreadyExists, tmp.path()));
  CHECK(IsError(Restore(tmp.File("none.ebk"), tmp.File("x"), CreateOptions()).status(),
                absl::StatusCode::kNotFound, "none.ebk"));
  CHECK(IsError(Restore(tmp.path(), tmp.File("x"), CreateOptions()).status(),
                absl::StatusCode::kInvalidArgument, "not an EmberDB backup"));
  RestoreOptions ro;
  ro.replace = true;
  REQUIRE_OK(Restore(bak, tmp.path(), CreateOptions(4096), ro));
  auto r = OpenOrFail(tmp.path(), CreateOptions());
  CHECK(Content(r.get(), "t").size() == 402);
  REQUIRE_OK(r->Close());
}

// Every damage to the file: a restore fails with DataLoss naming the frame (or the file
// header), and leaves no database at the path. Single-threaded restores one after the other:
// [exhaustive], so the TSan run leaves it to the other presets.
TEST_CASE("a truncated or damaged backup is refused and leaves no database",
          "[backup][exhaustive]") {
  TempDb tmp;
  const std::string bak = FilledBackup(tmp);
  const std::string good = ReadFileBytes(bak);
  const std::string bad = tmp.File("bad.ebk");
  const std::string out = tmp.File("out.edb");
  auto expect_refused = [&](const std::string& bytes, const std::string& what) {
    INFO(what);
    WriteFileBytes(bad, bytes);
    absl::Status s = Restore(bad, out, CreateOptions()).status();
    INFO(s.ToString());
    CHECK(!s.ok());
    CHECK((s.code() == absl::StatusCode::kDataLoss ||
           s.code() == absl::StatusCode::kInvalidArgument));
    CHECK(s.message().find("bad.ebk") != std::string_view::npos);
    CHECK_FALSE(std::filesystem::exists(out));
    CHECK_FALSE(std::filesystem::exists(out + ".restoring"));
  };
  // Cut anywhere: in the file header, in a frame header, in a payload, before the end frame.
  std::mt19937_64 rng(7);
  for (size_t cut :
       {size_t{0}, size_t{10}, size_t{40}, good.size() / 2, good.size() - 1, good.size() - 40}) {
    expect_refused(good.substr(0, cut), "cut at " + std::to_string(cut));
  }
  for (int i = 0; i < 12; ++i) {
    std::string b = good;
    const size_t at = rng() % b.size();
    b[at] = static_cast<char>(b[at] ^ (1 << (rng() % 8)));
    expect_refused(b, "bit flipped at " + std::to_string(at));
  }
  // A whole frame left out: the sequence numbers tell.
  {
    const size_t first_frame = 32;  // the file header's size
    const uint32_t stored =
        static_cast<uint32_t>(static_cast<uint8_t>(good[first_frame + 16])) |
        static_cast<uint32_t>(static_cast<uint8_t>(good[first_frame + 17])) << 8 |
        static_cast<uint32_t>(static_cast<uint8_t>(good[first_frame + 18])) << 16;
    const size_t second = first_frame + 32 + stored;
    const uint32_t stored2 = static_cast<uint32_t>(static_cast<uint8_t>(good[second + 16])) |
                             static_cast<uint32_t>(static_cast<uint8_t>(good[second + 17])) << 8 |
                             static_cast<uint32_t>(static_cast<uint8_t>(good[second + 18])) << 16;
    std::string b = good.substr(0, second) + good.substr(second + 32 + stored2);
    expect_refused(b, "second frame left out");
  }
  // The intact file still restores.
  REQUIRE_OK(Restore(bak, out, CreateOptions()));
}

// Writers rewrite every row to one generation per transaction while backups run: each backup
// must hold one generation whole (one snapshot), whatever the workers.
TEST_CASE("a backup under concurrent writers holds exactly one snapshot", "[backup]") {
  TempDb tmp;
  Options o = CreateOptions(4096, 512);
  o.max_parallel_workers = 4;
  auto db = OpenOrFail(tmp.path(), o);
  Table t = VALUE_OR_FAIL(db->CreateTable({"g",
                                           {{"id", ColumnType::kInt64, false},
                                            {"gen", ColumnType::kInt64},
                                            {"pad", ColumnType::kString}}}));
  constexpr int kRows = 3000;
  std::vector<RecordId> ids;
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    for (int64_t i = 0; i < kRows; ++i) {
      ids.push_back(VALUE_OR_FAIL(txn->Insert(t, {i, int64_t{0}, std::string(40, 'p')})));
    }
    REQUIRE_OK(txn->Commit());
  }
  std::atomic<bool> stop{false};
  std::atomic<int64_t> committed{0};
  std::string writer_error;  // the writer's, read once it is joined
  std::atomic<bool> writer_failed{false};
  std::thread writer([&] {
    for (int64_t gen = 1; !stop.load(); ++gen) {
      auto txn = db->Begin();
      if (!txn.ok()) {
        writer_error = txn.status().ToString();
        writer_failed = true;
        return;
      }
      for (int64_t i = 0; i < kRows; ++i) {
        absl::Status s = (*txn)->Update(t, ids[static_cast<size_t>(i)],
                                        {i, gen, std::string(40 + gen % 7, 'p')});
        if (!s.ok()) {
          writer_error = s.ToString();
          writer_failed = true;
          return;
        }
      }
      if (absl::Status s = (*txn)->Commit(); !s.ok()) {
        writer_error = s.ToString();
        writer_failed = true;
        return;
      }
      committed.store(gen);
    }
  });
  struct StopWriter {  // also when a REQUIRE below ends the test early
    std::atomic<bool>* stop;
    std::thread* t;
    ~StopWriter() {
      stop->store(true);
      if (t->joinable()) t->join();
    }
  } stop_writer{&stop, &writer};
  int64_t last_gen = -1;
  for (int round = 0; round < 6; ++round) {
    // Each backup starts after a commit the previous one did not see, while the writer is
    // in the middle of its next transaction.
    const int64_t floor = committed.load();
    while (committed.load() == floor && !writer_failed.load()) std::this_thread::yield();
    if (writer_failed.load()) break;  // reported once the writer is joined
    const int64_t at_start = committed.load();
    const std::string bak = tmp.File("g" + std::to_string(round) + ".ebk");
    BackupOptions bo;
    bo.workers = 1 + round % 3;
    REQUIRE_OK(db->Backup(bak, bo));
    const std::string path = tmp.File("g" + std::to_string(round) + ".edb");
    REQUIRE_OK(Restore(bak, path, CreateOptions(8192)));
    auto r = OpenOrFail(path, CreateOptions(8192));
    auto rows = Content(r.get(), "g");
    REQUIRE(rows.size() == static_cast<size_t>(kRows));
    std::map<std::string, int> gens;
    auto txn = VALUE_OR_FAIL(r->Begin());
    auto all = VALUE_OR_FAIL(ScanAll(txn.get(), VALUE_OR_FAIL(r->GetTable("g"))));
    for (auto& [id, row] : all) gens[ValueText(row[1])]++;
    INFO("round " << round << " generations seen: " << gens.size());
    REQUIRE(gens.size() == 1);
    const int64_t gen = std::stoll(gens.begin()->first);
    CHECK(gen >= at_start);
    CHECK(gen > last_gen);
    last_gen = gen;
    REQUIRE_OK(txn->Commit());
    REQUIRE_OK(r->Close());
  }
  stop.store(true);
  writer.join();
  INFO(writer_error);
  CHECK(writer_error.empty());
  CHECK(committed.load() > 0);
  REQUIRE_OK(db->Close());
}

TEST_CASE("backup errors: bad options, an unwritable path, a closed database", "[backup]") {
  TempDb tmp;
  auto db = OpenOrFail(tmp.path(), CreateOptions());
  Fill(db.get());
  BackupOptions bo;
  bo.zstd_level = 0;
  CHECK(IsError(db->Backup(tmp.File("x.ebk"), bo).status(), absl::StatusCode::kInvalidArgument));
  CHECK(IsError(db->Backup(tmp.File("no/such/dir/x.ebk")).status(), absl::StatusCode::kNotFound,
                "no/such/dir"));
  CHECK_FALSE(std::filesystem::exists(tmp.File("x.ebk")));
  REQUIRE_OK(db->Close());
  CHECK(IsError(db->Backup(tmp.File("y.ebk")).status(), absl::StatusCode::kFailedPrecondition));
}

}  // namespace
}  // namespace ember::testing
