// What a valid database holds, its backup restores: zero-length BLOBs (and backups an earlier
// build wrote with them), inactive indexes over data their definition would refuse (a unique
// index over duplicates, a key longer than the maximum), indexes that cannot be built at the
// restore's page size (left inactive with a warning, or the failure RestoreOptions::strict
// asks for), RestoreOptions::deactivate_indexes; duplicate-key errors that print the key as
// column values; and sort_memory_limit held by a build on several workers together.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/db/database_impl.h"
#include "tests/support/blob_db_util.h"
#include "tests/support/db_util.h"

namespace ember::testing {
namespace {

// Rows of table `name` by their first column (an int64 id), each BLOB as its bytes.
std::map<int64_t, std::vector<std::string>> RowsById(Database* db, const std::string& name) {
  auto txn = VALUE_OR_FAIL(db->Begin());
  Table t = VALUE_OR_FAIL(db->GetTable(name));
  std::map<int64_t, std::vector<std::string>> out;
  for (auto& [rid, row] : VALUE_OR_FAIL(ScanAll(txn.get(), t))) {
    std::vector<std::string>& vals = out[std::get<int64_t>(row[0])];
    for (const Value& v : row) {
      const BlobId* b = std::get_if<BlobId>(&v);
      vals.push_back(b ? "blob:" + ReadAll(txn.get(), *b) : ValueText(v));
    }
  }
  REQUIRE_OK(txn->Commit());
  return out;
}

Options Reopen(Options o) {
  o.create_if_missing = false;
  return o;
}

TEST_CASE("a BLOB of zero bytes is the empty BLOB: stored, read, swept, backed up, restored",
          "[backup][blob]") {
  TempDb tmp;
  auto db = OpenOrFail(tmp.path(), CreateOptions());
  Table t = VALUE_OR_FAIL(db->CreateTable({"docs",
                                           {{"id", ColumnType::kInt64, false},
                                            {"body", ColumnType::kBlob},
                                            {"zbody", ColumnType::kBlob, true, 3}}}));
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    // Five ways to a BLOB of no bytes: a writer never written to, an empty write into a
    // compressed column's writer, an empty write into a plain one, Concat of two empty
    // BLOBs and an Append of nothing to the empty BLOB.
    auto w0 = VALUE_OR_FAIL(txn->CreateBlob());
    REQUIRE_OK(txn->Insert(t, {int64_t{0}, w0->id(), Value{}}));
    auto w1 = VALUE_OR_FAIL(txn->CreateBlob(t, "zbody"));
    REQUIRE_OK(w1->Write(""));
    auto w1b = VALUE_OR_FAIL(txn->CreateBlob());
    REQUIRE_OK(w1b->Write("x"));
    REQUIRE_OK(txn->Insert(t, {int64_t{1}, w1b->id(), w1->id()}));
    auto w2 = VALUE_OR_FAIL(txn->CreateBlob());
    REQUIRE_OK(w2->Write(std::string()));
    REQUIRE_OK(txn->Insert(t, {int64_t{2}, Value{}, w2->id()}));
    BlobId c = VALUE_OR_FAIL(txn->Concat(BlobId{}, BlobId{}));
    BlobId a{};
    REQUIRE_OK(txn->Append(&a, ""));
    REQUIRE_OK(txn->Insert(t, {int64_t{3}, c, a}));
    REQUIRE_OK(txn->Commit());
  }
  // Every one reads back as the empty BLOB, id 0: nothing stored for it.
  auto check_rows = [&](Database* d) {
    auto txn = VALUE_OR_FAIL(d->Begin());
    Table dt = VALUE_OR_FAIL(d->GetTable("docs"));
    auto rows = VALUE_OR_FAIL(ScanAll(txn.get(), dt));
    REQUIRE(rows.size() == 4);
    for (auto& [rid, row] : rows) {
      const int64_t id = std::get<int64_t>(row[0]);
      INFO("row " << id);
      for (size_t c = 1; c < 3; ++c) {
        if (const BlobId* b = std::get_if<BlobId>(&row[c])) {
          if (id == 1 && c == 1) {
            CHECK(ReadAll(txn.get(), *b) == "x");
          } else {
            CHECK(b->value == 0);
            CHECK(ReadAll(txn.get(), *b).empty());
          }
        }
      }
    }
    REQUIRE_OK(txn->Commit());
  };
  check_rows(db.get());
  RequireValid(db.get(), "after the inserts");
  const std::string bak = tmp.File("docs.ebk");
  BackupResult br = VALUE_OR_FAIL(db->Backup(bak));
  CHECK(br.blobs == 1);  // only "x": the empty BLOB is not a BLOB value
  CHECK(br.blob_bytes == 1);
  const std::string restored = tmp.File("restored.edb");
  RestoreResult rr = VALUE_OR_FAIL(Restore(bak, restored, CreateOptions()));
  CHECK(rr.blobs == 1);
  CHECK(rr.blob_bytes == 1);
  auto r = OpenOrFail(restored, Reopen(CreateOptions()));
  check_rows(r.get());
  CHECK(RowsById(r.get(), "docs") == RowsById(db.get(), "docs"));
  RequireValid(r.get(), "restored");
  REQUIRE_OK(r->Close());
  // Updated and deleted, then swept: nothing is left behind.
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    auto rows = VALUE_OR_FAIL(ScanAll(txn.get(), t));
    for (auto& [rid, row] : rows) {
      auto w = VALUE_OR_FAIL(txn->CreateBlob());
      REQUIRE_OK(txn->Update(t, rid, {row[0], w->id(), Value{}}));
    }
    REQUIRE_OK(txn->Delete(t, rows[0].first));
    REQUIRE_OK(txn->Commit());
  }
  VALUE_OR_FAIL(db->Sweep());
  ValidationReport rep = RequireValid(db.get(), "after the sweep");
  CHECK(rep.orphan_blobs.empty());
  CHECK(rep.unreachable_pages.empty());
  REQUIRE_OK(db->Close());
}

// Builds before the empty BLOB was id 0 stored a BLOB of no bytes as a BLOB record; their
// databases hold such records, and this build reads, validates, sweeps, backs up and restores
// them as the empty BLOB.
TEST_CASE("zero-length BLOB records an earlier build stored read as the empty BLOB",
          "[backup][blob]") {
  TempDb tmp;
  auto db = OpenOrFail(tmp.path(), CreateOptions(4096));
  static_cast<db::DatabaseImpl*>(db.get())->TEST_store_empty_blobs = true;
  Table t = VALUE_OR_FAIL(db->CreateTable({"docs",
                                           {{"id", ColumnType::kInt64, false},
                                            {"body", ColumnType::kBlob},
                                            {"zbody", ColumnType::kBlob, true, 3}}}));
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    for (int64_t i = 0; i < 4; ++i) {
      auto w = VALUE_OR_FAIL(txn->CreateBlob());
      auto z = VALUE_OR_FAIL(txn->CreateBlob(t, "zbody"));
      REQUIRE_OK(z->Write(""));
      REQUIRE_OK(txn->Insert(t, {i, w->id(), z->id()}));
    }
    REQUIRE_OK(txn->Commit());
  }
  static_cast<db::DatabaseImpl*>(db.get())->TEST_store_empty_blobs = false;
  // Stored records of no bytes, as those builds left them.
  std::vector<std::pair<RecordId, Row>> rows;
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    rows = VALUE_OR_FAIL(ScanAll(txn.get(), t));
    REQUIRE(rows.size() == 4);
    for (auto& [rid, row] : rows) {
      for (size_t c = 1; c < 3; ++c) {
        const BlobId b = std::get<BlobId>(row[c]);
        CHECK(b.value != 0);
        CHECK(ReadAll(txn.get(), b).empty());
      }
    }
    REQUIRE_OK(txn->Commit());
  }
  ValidationReport rep = RequireValid(db.get(), "with zero-length BLOB records");
  CHECK(rep.orphan_blobs.empty());
  // Backed up as the empty BLOB, not counted; restored as id 0.
  const std::string bak = tmp.File("legacy.ebk");
  BackupResult br = VALUE_OR_FAIL(db->Backup(bak));
  CHECK(br.blobs == 0);
  CHECK(br.blob_bytes == 0);
  {
    const std::string path = tmp.File("r.edb");
    RestoreResult rr = VALUE_OR_FAIL(Restore(bak, path, CreateOptions()));
    CHECK(rr.blobs == 0);
    auto r = OpenOrFail(path, Reopen(CreateOptions()));
    auto txn = VALUE_OR_FAIL(r->Begin());
    for (auto& [rid, row] : VALUE_OR_FAIL(ScanAll(txn.get(), VALUE_OR_FAIL(r->GetTable("docs"))))) {
      CHECK(std::get<BlobId>(row[1]).value == 0);
      CHECK(std::get<BlobId>(row[2]).value == 0);
    }
    REQUIRE_OK(txn->Commit());
    REQUIRE_OK(r->Close());
  }
  // An update keeps a record it leaves in place; one copied from another row becomes id 0.
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    REQUIRE_OK(txn->Update(t, rows[0].first, {int64_t{0}, rows[0].second[1], rows[1].second[2]}));
    REQUIRE_OK(txn->Commit());
    txn = VALUE_OR_FAIL(db->Begin());
    Row now = VALUE_OR_FAIL(txn->Get(t, rows[0].first)).value();
    CHECK(std::get<BlobId>(now[1]) == std::get<BlobId>(rows[0].second[1]));
    CHECK(std::get<BlobId>(now[2]).value == 0);
    REQUIRE_OK(txn->Commit());
  }
  // Deleted and swept, every record and page goes.
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    for (auto& [rid, row] : rows) REQUIRE_OK(txn->Delete(t, rid));
    REQUIRE_OK(txn->Commit());
  }
  VALUE_OR_FAIL(db->Sweep());
  rep = RequireValid(db.get(), "after the sweep");
  CHECK(rep.orphan_blobs.empty());
  CHECK(rep.unreachable_pages.empty());
  REQUIRE_OK(db->Close());
}

// tests/backup/data/zero-length-blobs-v1.ebk was written by the build of commit ab958f0,
// which stored a BLOB of zero bytes as a BLOB record and counted it in the end frame: a table
// docs(id, body BLOB, zbody BLOB zstd 3) of six rows; rows 0 and 3 hold such a BLOB in body,
// rows 1 and 4 one in zbody and an 11- and 14-byte BLOB of 'x' in body; rows 2 and 5 hold the
// empty BLOB (id 0) in body and NULL in zbody.
TEST_CASE("a backup an earlier build wrote with zero-length BLOBs restores", "[backup][blob]") {
  TempDb tmp;
  const std::string bak =
      std::string(EMBER_TEST_SOURCE_DIR) + "/backup/data/zero-length-blobs-v1.ebk";
  const uint32_t ps = GENERATE(4096u, 8192u);
  const int workers = GENERATE(1, 2);
  INFO("page size " << ps << ", workers " << workers);
  Options o = CreateOptions(ps);
  o.max_parallel_workers = 2;
  RestoreOptions ro;
  ro.workers = workers;
  RestoreResult rr = VALUE_OR_FAIL(Restore(bak, tmp.path(), o, ro));
  CHECK(rr.rows == 6);
  CHECK(rr.blobs == 2);
  CHECK(rr.blob_bytes == 25);
  auto db = OpenOrFail(tmp.path(), Reopen(o));
  auto rows = RowsById(db.get(), "docs");
  REQUIRE(rows.size() == 6);
  for (int64_t i = 0; i < 6; ++i) {
    INFO("row " << i);
    const std::vector<std::string>& r = rows[i];
    CHECK(r[1] == (i % 3 == 1 ? "blob:" + std::string(10 + i, 'x') : "blob:"));
    CHECK(r[2] == (i % 3 == 1 ? "blob:" : "NULL"));
  }
  RequireValid(db.get(), "restored");
  REQUIRE_OK(db->Close());
}

// A table t(id, k, s) with an index of each kind inactive over data it would refuse: t_k
// unique over duplicate keys, t_s over a string longer than max_key_size(); t_id active and
// unique.
void FillRefusedKeys(Database* db) {
  Table t = VALUE_OR_FAIL(db->CreateTable({"t",
                                           {{"id", ColumnType::kInt64, false},
                                            {"k", ColumnType::kInt64},
                                            {"s", ColumnType::kString}}}));
  REQUIRE_OK(db->CreateIndex({"t_id", "t", {"id"}, true}));
  REQUIRE_OK(db->CreateIndex({"t_k", "t", {"k"}, true}));
  REQUIRE_OK(db->CreateIndex({"t_s", "t", {"s"}, false}));
  auto txn = VALUE_OR_FAIL(db->Begin());
  for (int64_t i = 0; i < 50; ++i) {
    REQUIRE_OK(txn->Insert(t, {i, i * 10, absl::StrCat("s", i)}));
  }
  REQUIRE_OK(txn->Commit());
  REQUIRE_OK(db->SetIndexActive("t_k", false));
  REQUIRE_OK(db->SetIndexActive("t_s", false));
  txn = VALUE_OR_FAIL(db->Begin());
  // Allowed: an inactive index checks nothing.
  REQUIRE_OK(txn->Insert(t, {int64_t{50}, int64_t{70}, std::string("dup")}));
  REQUIRE_OK(txn->Insert(t, {int64_t{51}, Value{}, std::string(db->max_key_size() + 100, 'L')}));
  REQUIRE_OK(txn->Commit());
}

bool Active(Database* db, const std::string& index) {
  Index ix = VALUE_OR_FAIL(db->GetIndex(index));
  auto txn = VALUE_OR_FAIL(db->Begin());
  absl::Status s = txn->IndexScan(ix, {}, {}).status();
  REQUIRE_OK(txn->Rollback());
  if (s.ok()) return true;
  REQUIRE(IsError(s, absl::StatusCode::kFailedPrecondition));
  return false;
}

TEST_CASE("an index inactive in the backup is restored inactive and not built", "[backup]") {
  TempDb tmp;
  auto db = OpenOrFail(tmp.path(), CreateOptions());
  FillRefusedKeys(db.get());
  const std::string bak = tmp.File("t.ebk");
  BackupResult br = VALUE_OR_FAIL(db->Backup(bak));
  CHECK(br.indexes == 3);
  const int workers = GENERATE(1, 3);
  INFO("workers " << workers);
  Options o = CreateOptions();
  o.max_parallel_workers = 3;
  RestoreOptions ro;
  ro.workers = workers;
  const std::string path = tmp.File("r.edb");
  RestoreResult rr = VALUE_OR_FAIL(Restore(bak, path, o, ro));
  CHECK(rr.rows == 52);
  CHECK(rr.indexes == 3);
  CHECK(rr.indexes_built == 1);
  CHECK(rr.warnings.empty());
  auto r = OpenOrFail(path, Reopen(o));
  CHECK(RowsById(r.get(), "t") == RowsById(db.get(), "t"));
  CHECK(Active(r.get(), "t_id"));
  CHECK_FALSE(Active(r.get(), "t_k"));
  CHECK_FALSE(Active(r.get(), "t_s"));
  // The definitions are kept: activating t_k meets the duplicates and names them.
  absl::Status act = r->SetIndexActive("t_k", true);
  INFO(act.ToString());
  CHECK(IsError(act, absl::StatusCode::kAlreadyExists, "(k)=(70)"));
  RequireValid(r.get(), "restored");
  REQUIRE_OK(r->Close());
  REQUIRE_OK(db->Close());
}

TEST_CASE("deactivate_indexes restores every index inactive", "[backup]") {
  TempDb tmp;
  auto db = OpenOrFail(tmp.path(), CreateOptions());
  FillRefusedKeys(db.get());
  const std::string bak = tmp.File("t.ebk");
  VALUE_OR_FAIL(db->Backup(bak));
  RestoreOptions ro;
  ro.deactivate_indexes = true;
  const std::string path = tmp.File("r.edb");
  RestoreResult rr = VALUE_OR_FAIL(Restore(bak, path, CreateOptions(), ro));
  CHECK(rr.indexes == 3);
  CHECK(rr.indexes_built == 0);
  CHECK(rr.warnings.empty());
  auto r = OpenOrFail(path, Reopen(CreateOptions()));
  for (const char* ix : {"t_id", "t_k", "t_s"}) CHECK_FALSE(Active(r.get(), ix));
  REQUIRE_OK(r->SetIndexActive("t_id", true));
  CHECK(Active(r.get(), "t_id"));
  CHECK(RowsById(r.get(), "t") == RowsById(db.get(), "t"));
  RequireValid(r.get(), "restored");
  REQUIRE_OK(r->Close());
  REQUIRE_OK(db->Close());
}

// A key that fits at 8 KB pages but not at 4 KB: the backup is good, the restore at 4 KB
// cannot build the index.
TEST_CASE(
    "an active index that cannot be built is left inactive with a warning, or fails "
    "under strict",
    "[backup]") {
  TempDb tmp;
  auto db = OpenOrFail(tmp.path(), CreateOptions(8192));
  Table t = VALUE_OR_FAIL(
      db->CreateTable({"t", {{"id", ColumnType::kInt64, false}, {"s", ColumnType::kString}}}));
  REQUIRE_OK(db->CreateIndex({"t_id", "t", {"id"}, true}));
  REQUIRE_OK(db->CreateIndex({"t_s", "t", {"s"}, false}));
  auto txn = VALUE_OR_FAIL(db->Begin());
  REQUIRE_OK(txn->Insert(t, {int64_t{1}, std::string(1000, 'w')}));
  REQUIRE_OK(txn->Insert(t, {int64_t{2}, std::string("short")}));
  REQUIRE_OK(txn->Commit());
  const std::string bak = tmp.File("t.ebk");
  VALUE_OR_FAIL(db->Backup(bak));
  REQUIRE_OK(db->Close());

  const std::string path = tmp.File("r.edb");
  RestoreResult rr = VALUE_OR_FAIL(Restore(bak, path, CreateOptions(4096)));
  CHECK(rr.rows == 2);
  CHECK(rr.indexes == 2);
  CHECK(rr.indexes_built == 1);
  REQUIRE(rr.warnings.size() == 1);
  INFO(rr.warnings[0]);
  CHECK(rr.warnings[0].find("t_s") != std::string::npos);
  CHECK(rr.warnings[0].find("inactive") != std::string::npos);
  CHECK(rr.warnings[0].find("longer than the maximum") != std::string::npos);
  {
    auto r = OpenOrFail(path, Reopen(CreateOptions(4096)));
    CHECK(Active(r.get(), "t_id"));
    CHECK_FALSE(Active(r.get(), "t_s"));
    RequireValid(r.get(), "restored");
    REQUIRE_OK(r->Close());
  }

  RestoreOptions strict;
  strict.strict = true;
  const std::string path2 = tmp.File("r2.edb");
  absl::Status s = Restore(bak, path2, CreateOptions(4096), strict).status();
  INFO(s.ToString());
  CHECK(IsError(s, absl::StatusCode::kInvalidArgument, "t_s"));
  CHECK(s.message().find("deactivate_indexes") != std::string_view::npos);
  CHECK_FALSE(std::filesystem::exists(path2));
  // The same backup at 8 KB builds both.
  RestoreResult ok = VALUE_OR_FAIL(Restore(bak, path2, CreateOptions(8192), strict));
  CHECK(ok.indexes_built == 2);
  CHECK(ok.warnings.empty());
}

TEST_CASE("duplicate-key errors print the key as column values", "[index][unique]") {
  TempDb tmp;
  auto db = OpenOrFail(tmp.path(), CreateOptions());
  Table t = VALUE_OR_FAIL(db->CreateTable({"p",
                                           {{"id", ColumnType::kInt64, false},
                                            {"u", ColumnType::kInt64},
                                            {"name", ColumnType::kString},
                                            {"d", ColumnType::kDouble},
                                            {"raw", ColumnType::kBytes}}}));
  const std::string long_name = std::string(100, 'n') + "\x01'\\";
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    REQUIRE_OK(txn->Insert(t, {int64_t{1}, int64_t{123456789}, std::string("alice"), 0.1,
                               std::string("\x00\xff", 2)}));
    REQUIRE_OK(txn->Insert(t, {int64_t{2}, int64_t{123456789}, std::string("alice"), 0.1,
                               std::string("\x00\xff", 2)}));
    REQUIRE_OK(txn->Insert(t, {int64_t{3}, int64_t{-5}, long_name, -2.5, Value{}}));
    REQUIRE_OK(txn->Insert(t, {int64_t{4}, int64_t{-6}, long_name, -2.5, Value{}}));
    REQUIRE_OK(txn->Commit());
  }
  auto create = [&](const std::string& name, std::vector<std::string> cols) {
    absl::Status s = db->CreateIndex({name, "p", std::move(cols), true}).status();
    REQUIRE(absl::IsAlreadyExists(s));
    return std::string(s.message());
  };
  const IndexBuildOptions by_inserts{.method = IndexBuildOptions::Method::kInsert};
  CHECK(create("p_u", {"u"}).find("(u)=(123456789)") != std::string::npos);
  CHECK(create("p_name", {"name"}).find("(name)=('alice')") != std::string::npos);
  CHECK(create("p_nd", {"name", "d"}).find("(name, d)=('alice', 0.1)") != std::string::npos);
  CHECK(create("p_raw", {"raw"}).find("(raw)=(x'00ff')") != std::string::npos);
  {
    // Cut at 64 bytes, the rest counted; control bytes, quotes and backslashes escaped.
    const std::string m = create("p_long", {"d", "name"});
    INFO(m);
    CHECK(m.find("(d, name)=(-2.5, '" + std::string(64, 'n') + "...' (103 bytes))") !=
          std::string::npos);
  }
  {
    absl::Status s = db->CreateIndex({"p_u2", "p", {"u"}, true}, by_inserts).status();
    INFO(s.ToString());
    CHECK(IsError(s, absl::StatusCode::kAlreadyExists, "(u)=(123456789)"));
  }
  // A short string keeps its escapes: the bytes after 64 are what is cut.
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    auto rows = VALUE_OR_FAIL(ScanAll(txn.get(), t));
    REQUIRE_OK(txn->Delete(t, rows[1].first));
    REQUIRE_OK(txn->Delete(t, rows[3].first));
    REQUIRE_OK(txn->Commit());
  }
  REQUIRE_OK(db->CreateIndex({"p_u", "p", {"u"}, true}));
  REQUIRE_OK(db->CreateIndex({"p_name", "p", {"name"}, true}));
  auto txn = VALUE_OR_FAIL(db->Begin());
  absl::Status ins =
      txn->Insert(t, {int64_t{9}, int64_t{-5}, std::string("bob"), 1.0, Value{}}).status();
  INFO(ins.ToString());
  CHECK(IsError(ins, absl::StatusCode::kAlreadyExists, "unique index p_u"));
  CHECK(IsError(ins, absl::StatusCode::kAlreadyExists, "(u)=(-5)"));
  const RecordId bob =
      VALUE_OR_FAIL(txn->Insert(t, {int64_t{9}, int64_t{9}, std::string("bob"), 1.0, Value{}}));
  absl::Status upd =
      txn->Update(t, bob, {int64_t{9}, int64_t{9}, std::string("it's \x01"), 1.0, Value{}});
  CHECK(upd.ok());
  upd = txn->Update(t, bob, {int64_t{9}, int64_t{9}, std::string("alice"), 1.0, Value{}});
  INFO(upd.ToString());
  CHECK(IsError(upd, absl::StatusCode::kAlreadyExists, "(name)=('alice')"));
  REQUIRE_OK(txn->Commit());
  // The escapes: a quote, a control byte.
  auto txn2 = VALUE_OR_FAIL(db->Begin());
  absl::Status esc =
      txn2->Insert(t, {int64_t{10}, int64_t{10}, std::string("it's \x01"), 1.0, Value{}}).status();
  INFO(esc.ToString());
  CHECK(IsError(esc, absl::StatusCode::kAlreadyExists, "(name)=('it\\'s \\001')"));
  REQUIRE_OK(txn2->Rollback());
  REQUIRE_OK(db->Close());
}

TEST_CASE("sort_memory_limit holds for a build on several workers together", "[index_build]") {
  const int workers = GENERATE(1, 2, 3, 4);
  const uint64_t limit = GENERATE(uint64_t{64} << 10, uint64_t{160} << 10);
  INFO(workers << " workers, limit " << limit);
  TempDb tmp;
  Options o = CreateOptions(4096, 256);
  o.sort_memory_limit = limit;
  o.max_parallel_workers = 4;
  auto db = OpenOrFail(tmp.path(), o);
  Table t = VALUE_OR_FAIL(
      db->CreateTable({"t", {{"id", ColumnType::kInt64, false}, {"s", ColumnType::kString}}}));
  auto txn = VALUE_OR_FAIL(db->Begin());
  for (int64_t i = 0; i < 20000; ++i) {
    REQUIRE_OK(txn->Insert(t, {i, absl::StrCat("key-", (i * 7919) % 20000, "-padding")}));
  }
  REQUIRE_OK(txn->Commit());
  IndexBuildOptions b;
  b.workers = workers;
  Index ix = VALUE_OR_FAIL(db->CreateIndex({"t_s", "t", {"s"}, true}, b));
  IndexStats st = VALUE_OR_FAIL(db->GetIndexStats(ix));
  CHECK(st.entries == 20000);
  CHECK(st.spill_bytes > 0);  // the limit was reached
  CHECK(st.sort_peak_memory <= limit);
  CHECK(st.workers >= 1);
  CHECK(st.workers <= workers);
  // Each worker that sorts has a share of at least 64 KB.
  CHECK(limit / static_cast<uint64_t>(st.workers) >= (uint64_t{64} << 10));
  RequireValid(db.get(), "after the build");
  REQUIRE_OK(db->Close());
}

}  // namespace
}  // namespace ember::testing
