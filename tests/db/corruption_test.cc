// Corruption of a closed database, page by page: random bit flips and torn pages (the first part
// of a page new, the rest old, cut at a 512-byte boundary) in random pages of every type. A tear
// the doublewrite area holds a good copy for is repaired at open and reported by Validate, with
// every row intact; damage with no good copy (a flip, a tear with the protection off or of a page
// written fresh) is DataLoss naming the page: Open refuses the file when it needs the page
// itself, Validate lists it, every read that needs it fails, and every read that does not
// returns exactly what it returned before the damage. Nothing may crash (run under ASan too).
// A table's pointer pages are read by Open, but their damage makes only that table unusable:
// Open succeeds, Validate names the page, every read path of that table (its scan, Gets,
// lookups and ranges through its indexes, its BLOBs) fails with DataLoss naming it, and every
// other path returns what it did before.
//
// What "needs the page" means is measured, not guessed: the undamaged file is opened once over a
// file that records the pages read, and each read path runs with an empty cache, so each path
// (a table scan, an index scan, a Get, a Lookup, a point range, a BLOB read) knows its pages.
//
// Environment: EMBER_CORRUPT_ROUNDS (rounds, default 150), EMBER_CRASH_SEED (replays a run; its
// seed is printed), EMBER_CRASH_VERBOSE=1 (a line per page type and kind of damage).
#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/cache/buffer_cache.h"
#include "engine/cache/doublewrite.h"
#include "engine/db/database_impl.h"
#include "engine/db/garbage_collector.h"
#include "engine/page/blob_page.h"
#include "engine/page/doublewrite_page.h"
#include "engine/page/page.h"
#include "engine/page/pointer_page.h"
#include "engine/util/coding.h"
#include "tests/support/crash_util.h"
#include "tests/support/db_util.h"
#include "tests/support/pass_through_file.h"

namespace ember {
namespace {

constexpr uint32_t kPs = 4096;

db::DatabaseImpl* Impl(Database* db) { return static_cast<db::DatabaseImpl*>(db); }

// Records the pages read through it (reads only: writes do not tell what a path needs).
class TracingFile : public testing::PassThroughFile {
 public:
  using PassThroughFile::PassThroughFile;
  absl::Status Read(uint64_t offset, void* buf, size_t len) override {
    Note(offset, len);
    return PassThroughFile::Read(offset, buf, len);
  }
  absl::Status ReadBlocks(uint64_t offset, size_t block, std::span<uint8_t* const> bufs) override {
    Note(offset, block * bufs.size());
    return PassThroughFile::ReadBlocks(offset, block, bufs);
  }

  std::set<uint32_t> Take() {
    std::lock_guard<std::mutex> g(mu_);
    std::set<uint32_t> out;
    out.swap(pages_);
    return out;
  }

 private:
  void Note(uint64_t offset, size_t len) {
    std::lock_guard<std::mutex> g(mu_);
    for (uint64_t p = offset / kPs; p * kPs < offset + len; ++p) {
      pages_.insert(static_cast<uint32_t>(p));
    }
  }
  std::mutex mu_;
  std::set<uint32_t> pages_;
};

// ---------------------------------------------------------------- the database and its model

// Deterministic bytes: compressible text or noise.
std::string Bytes(uint64_t salt, size_t n, bool noise = false) {
  std::mt19937_64 r(salt * 0x9E3779B97F4A7C15ull + n);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) {
    s[i] = noise ? static_cast<char>(r()) : static_cast<char>('a' + (i / 7 + r() % 3) % 26);
  }
  return s;
}

// The test's expectation of every table: id -> row, a BLOB given by its bytes.
struct MValue {
  bool blob = false;
  Value v;  // the value, or the BLOB's bytes as a string (blob), NULL for no BLOB
};
using MRow = std::vector<MValue>;
using Model = std::map<std::string, std::map<int64_t, MRow>>;

MValue Plain(Value v) { return MValue{false, std::move(v)}; }

// Writes a model row: BLOB values are created in `tx` (through the column for compressed ones).
Row Store(Transaction* tx, const Table& t, const std::string& zcol, const MRow& m) {
  Row row;
  for (size_t i = 0; i < m.size(); ++i) {
    if (!m[i].blob || IsNull(m[i].v)) {
      row.push_back(m[i].v);
      continue;
    }
    std::unique_ptr<BlobWriter> w = VALUE_OR_FAIL(
        i + 1 == m.size() && !zcol.empty() ? tx->CreateBlob(t, zcol) : tx->CreateBlob());
    REQUIRE_OK(w->Write(std::get<std::string>(m[i].v)));
    row.push_back(w->id());
  }
  return row;
}

MRow AcctRow(int64_t i, int gen) {
  const std::string name =
      absl::StrCat("name-", (i + gen * 37) % 150, "-", std::string(30 + (i * 7 + gen) % 40, 'x'));
  std::string note = absl::StrCat("note ", i, " ", gen);
  if (i % 20 == 0) note = Bytes(i * 10 + gen, 1500);  // out of line (a quarter page and more)
  if (i % 7 == 0) note = Bytes(i * 10 + gen, 300);
  return {Plain(i), Plain(int64_t{i % 17 + gen * 100}), Plain(name), Plain(note)};
}

MRow DocRow(int64_t i, int gen) {
  MValue body{true, std::monostate{}};
  static const size_t kSizes[] = {0, 100, 3000, 20000, 9000, 600};
  if (const size_t n = kSizes[i % 6]; n > 0) body.v = Bytes(i * 100 + gen, n);
  // Past what a one-level page list holds (level 2, list pages), and incompressible.
  if (i == 7) body.v = Bytes(7, 2'200'000, /*noise=*/true);
  MValue z{true, std::monostate{}};
  if (i % 10 == 0) z.v = Bytes(i + 5000 + gen, 200'000);  // several compressed frames
  return {Plain(i), Plain(absl::StrCat("title ", i % 9, " ", gen)), body, z};
}

MRow WideRow(int64_t i, int gen) {
  MRow r{Plain(i)};
  for (int c = 0; c < 5; ++c) r.push_back(Plain(Bytes(i * 10 + c + gen * 1000, 900)));
  return r;  // about 4.5 KB: longer than a page, so in fragments
}

struct Schema {
  Table acct, docs, wide;
};

Schema Create(Database* db) {
  Schema s;
  s.acct = VALUE_OR_FAIL(db->CreateTable({"acct",
                                          {{"id", ColumnType::kInt64, false},
                                           {"k", ColumnType::kInt64},
                                           {"name", ColumnType::kString},
                                           {"note", ColumnType::kString}}}));
  VALUE_OR_FAIL(db->CreateIndex({"acct_id", "acct", {"id"}, true}));
  VALUE_OR_FAIL(db->CreateIndex({"acct_k", "acct", {"k"}, false}));
  VALUE_OR_FAIL(db->CreateIndex({"acct_name", "acct", {"name"}, false}));  // several levels
  s.docs = VALUE_OR_FAIL(db->CreateTable({"docs",
                                          {{"id", ColumnType::kInt64, false},
                                           {"title", ColumnType::kString},
                                           {"body", ColumnType::kBlob},
                                           {"z", ColumnType::kBlob, true, 3}}}));
  VALUE_OR_FAIL(db->CreateIndex({"docs_id", "docs", {"id"}, true}));
  VALUE_OR_FAIL(db->CreateIndex({"docs_title", "docs", {"title"}, false}));
  s.wide = VALUE_OR_FAIL(db->CreateTable({"wide",
                                          {{"id", ColumnType::kInt64, false},
                                           {"a", ColumnType::kString},
                                           {"b", ColumnType::kString},
                                           {"c", ColumnType::kString},
                                           {"d", ColumnType::kString},
                                           {"e", ColumnType::kString}}}));
  VALUE_OR_FAIL(db->CreateIndex({"wide_id", "wide", {"id"}, true}));
  return s;
}

Schema Tables(Database* db) {
  return {VALUE_OR_FAIL(db->GetTable("acct")), VALUE_OR_FAIL(db->GetTable("docs")),
          VALUE_OR_FAIL(db->GetTable("wide"))};
}

// Record ids by table and id, as the writes returned them.
using Rids = std::map<std::string, std::map<int64_t, RecordId>>;

struct Writer {
  Transaction* tx;
  Schema* s;
  Model* m;
  Rids* rids;
  const Table& T(const std::string& name) {
    return name == "acct" ? s->acct : name == "docs" ? s->docs : s->wide;
  }
  void Insert(const std::string& t, int64_t id, MRow row) {
    (*rids)[t][id] = VALUE_OR_FAIL(tx->Insert(T(t), Store(tx, T(t), t == "docs" ? "z" : "", row)));
    (*m)[t][id] = std::move(row);
  }
  void Update(const std::string& t, int64_t id, MRow row) {
    REQUIRE_OK(tx->Update(T(t), (*rids)[t].at(id), Store(tx, T(t), t == "docs" ? "z" : "", row)));
    (*m)[t][id] = std::move(row);
  }
  void Delete(const std::string& t, int64_t id) {
    REQUIRE_OK(tx->Delete(T(t), (*rids)[t].at(id)));
    (*m)[t].erase(id);
  }
};

Options DbOptions(bool doublewrite) {
  Options o = testing::CreateOptions(kPs, 2048);
  o.doublewrite = doublewrite;
  o.use_io_uring = false;
  // No reader collects garbage (the background collector is stopped right after each open), so
  // a read path reads the same pages every time and the back versions stay on disk.
  o.gc_policy = GcPolicy::kBackground;
  return o;
}

// The database before the last change: rows with back versions (two deep for some), delete
// stubs, out-of-line strings, fragments, BLOBs inline, on one page, on many, with list pages,
// compressed. Closed cleanly.
void MakeFirst(const std::string& path, Model* m, Rids* rids) {
  Options o = DbOptions(true);
  o.gc_policy = GcPolicy::kCooperative;  // nothing is read, so nothing is collected
  std::unique_ptr<Database> db = testing::OpenOrFail(path, o);
  Schema s = Create(db.get());
  {
    auto tx = VALUE_OR_FAIL(db->Begin());
    Writer w{tx.get(), &s, m, rids};
    for (int64_t i = 0; i < 200; ++i) w.Insert("acct", i, AcctRow(i, 0));
    for (int64_t i = 0; i < 30; ++i) w.Insert("docs", i, DocRow(i, 0));
    for (int64_t i = 0; i < 16; ++i) w.Insert("wide", i, WideRow(i, 0));
    REQUIRE_OK(tx->Commit());
  }
  {
    auto tx = VALUE_OR_FAIL(db->Begin());
    Writer w{tx.get(), &s, m, rids};
    for (int64_t i = 0; i < 200; i += 3) w.Update("acct", i, AcctRow(i, 1));
    for (int64_t i = 0; i < 16; i += 2) w.Update("wide", i, WideRow(i, 1));
    for (int64_t i = 1; i < 200; i += 11) w.Delete("acct", i);
    for (int64_t i = 4; i < 30; i += 9) w.Delete("docs", i);
    REQUIRE_OK(tx->Commit());
  }
  {
    auto tx = VALUE_OR_FAIL(db->Begin());
    Writer w{tx.get(), &s, m, rids};
    for (int64_t i = 0; i < 200; i += 6) {
      if (m->at("acct").contains(i)) w.Update("acct", i, AcctRow(i, 2));
    }
    REQUIRE_OK(tx->Commit());
  }
  REQUIRE_OK(db->Close());
}

// The last change, committed: every kind of page it touches gets a new version on disk.
void LastChange(Database* db, Model* m, Rids* rids) {
  Schema s = Tables(db);
  auto tx = VALUE_OR_FAIL(db->Begin());
  Writer w{tx.get(), &s, m, rids};
  for (int64_t i : {5, 50, 120, 180}) w.Update("acct", i, AcctRow(i, 3));
  w.Insert("acct", 1000, AcctRow(1000, 3));
  w.Update("docs", 3, DocRow(3, 3));
  w.Update("docs", 10, DocRow(10, 3));
  w.Update("wide", 1, WideRow(1, 3));
  REQUIRE_OK(tx->Commit());
}

// ---------------------------------------------------------------- read paths

std::string Canon(const Row& r) {
  std::string out;
  for (const Value& v : r) {
    if (IsNull(v)) {
      out += "N;";
    } else if (auto* i = std::get_if<int64_t>(&v)) {
      absl::StrAppend(&out, "I", *i, ";");
    } else if (auto* s = std::get_if<std::string>(&v)) {
      absl::StrAppend(&out, "S", s->size(), ":", *s, ";");
    } else if (auto* b = std::get_if<BlobId>(&v)) {
      absl::StrAppend(&out, "B", b->value, ";");
    } else {
      out += "?;";
    }
  }
  return out;
}

absl::StatusOr<std::string> CanonRows(absl::StatusOr<std::unique_ptr<Cursor>> c) {
  if (!c.ok()) return c.status();
  absl::StatusOr<std::vector<std::pair<RecordId, Row>>> rows = testing::Drain(c->get());
  if (!rows.ok()) return rows.status();
  std::string out;
  for (const auto& [id, row] : *rows) absl::StrAppend(&out, id.value, "=", Canon(row), "\n");
  return out;
}

absl::StatusOr<std::string> ReadBlob(Transaction* tx, BlobId id) {
  absl::StatusOr<std::unique_ptr<BlobReader>> r = tx->OpenBlob(id);
  if (!r.ok()) return r.status();
  std::string out((*r)->size(), '\0');
  size_t at = 0;
  while (at < out.size()) {
    absl::StatusOr<size_t> got =
        (*r)->Read(out.data() + at, std::min<size_t>(out.size() - at, 65536));
    if (!got.ok()) return got.status();
    if (*got == 0) return absl::InternalError("BLOB read short of its size");
    at += *got;
  }
  return out;
}

struct ReadPath {
  std::string name;
  std::string table;  // the table whose rows (or BLOBs) it reads
  std::function<absl::StatusOr<std::string>(Database*, Transaction*)> run;
  std::string expected;      // its result on the undamaged file
  std::set<uint32_t> pages;  // the pages it read there, from an empty cache
};

// Every read path over the model's rows: scans, full index scans, a Get and a Lookup per row,
// point ranges of the non-unique indexes, a read of every BLOB.
std::vector<ReadPath> MakePaths(const Model& m, const Rids& rids,
                                const std::map<std::string, std::vector<BlobId>>& blobs) {
  std::vector<ReadPath> out;
  std::string table;  // of the paths added next
  auto add = [&](std::string name, auto fn) {
    out.push_back({std::move(name), table, fn, {}, {}});
  };
  for (const std::string t : {"acct", "docs", "wide"}) {
    table = t;
    add("scan " + t, [t](Database* db, Transaction* tx) -> absl::StatusOr<std::string> {
      absl::StatusOr<Table> tab = db->GetTable(t);
      if (!tab.ok()) return tab.status();
      return CanonRows(tx->Scan(*tab));
    });
    for (const auto& [id, row] : m.at(t)) {
      const RecordId rid = rids.at(t).at(id);
      add(absl::StrCat("get ", t, " ", id),
          [t, rid](Database* db, Transaction* tx) -> absl::StatusOr<std::string> {
            absl::StatusOr<Table> tab = db->GetTable(t);
            if (!tab.ok()) return tab.status();
            absl::StatusOr<std::optional<Row>> r = tx->Get(*tab, rid);
            if (!r.ok()) return r.status();
            return r->has_value() ? Canon(**r) : std::string("none");
          });
      const int64_t key = id;
      add(absl::StrCat("lookup ", t, "_id ", id),
          [t, key](Database* db, Transaction* tx) -> absl::StatusOr<std::string> {
            absl::StatusOr<Index> ix = db->GetIndex(t + "_id");
            if (!ix.ok()) return ix.status();
            auto r = tx->Lookup(*ix, {key});
            if (!r.ok()) return r.status();
            return r->has_value() ? absl::StrCat((*r)->first.value, "=", Canon((*r)->second))
                                  : std::string("none");
          });
    }
  }
  for (const std::string ix :
       {"acct_id", "acct_k", "acct_name", "docs_id", "docs_title", "wide_id"}) {
    table = ix.substr(0, ix.find('_'));
    for (bool desc : {false, true}) {
      add(absl::StrCat("index scan ", ix, desc ? " descending" : ""),
          [ix, desc](Database* db, Transaction* tx) -> absl::StatusOr<std::string> {
            absl::StatusOr<Index> i = db->GetIndex(ix);
            if (!i.ok()) return i.status();
            return CanonRows(tx->IndexScan(*i, {}, {}, desc));
          });
    }
  }
  // Point ranges of the non-unique indexes: each reaches its leaves and the rows' pages.
  std::map<std::pair<std::string, std::string>, Value> keys;  // (index, key text) -> key
  auto key = [&](const std::string& ix, const Value& v) { keys[{ix, testing::ValueText(v)}] = v; };
  for (const auto& [id, row] : m.at("acct")) {
    key("acct_k", row[1].v);
    if (id % 5 == 0) key("acct_name", row[2].v);
  }
  for (const auto& [id, row] : m.at("docs")) key("docs_title", row[1].v);
  for (const auto& [ix_text, v] : keys) {
    const std::string ix = ix_text.first;
    const Value k = v;
    table = ix.substr(0, ix.find('_'));
    add(absl::StrCat("range ", ix, " ", ix_text.second),
        [ix, k](Database* db, Transaction* tx) -> absl::StatusOr<std::string> {
          absl::StatusOr<Index> i = db->GetIndex(ix);
          if (!i.ok()) return i.status();
          return CanonRows(tx->IndexScan(*i, {k}, {k}));
        });
  }
  for (const auto& [t, ids] : blobs) {
    table = t;
    for (const BlobId b : ids) {
      add(absl::StrCat("blob ", t, " ", b.value),
          [b](Database*, Transaction* tx) { return ReadBlob(tx, b); });
    }
  }
  return out;
}

// The model's rows as the database holds them, BLOBs read (the undamaged file must match).
void RequireModel(Database* db, Transaction* tx, const Model& m,
                  std::map<std::string, std::vector<BlobId>>* blobs) {
  for (const auto& [t, rows] : m) {
    Table tab = VALUE_OR_FAIL(db->GetTable(t));
    auto got = VALUE_OR_FAIL(testing::ScanAll(tx, tab));
    REQUIRE(got.size() == rows.size());
    for (const auto& [rid, row] : got) {
      const int64_t id = std::get<int64_t>(row[0]);
      INFO(t << " id " << id);
      REQUIRE(rows.contains(id));
      const MRow& want = rows.at(id);
      REQUIRE(row.size() == want.size());
      for (size_t c = 0; c < row.size(); ++c) {
        if (want[c].blob && !IsNull(want[c].v)) {
          const BlobId b = std::get<BlobId>(row[c]);
          (*blobs)[t].push_back(b);
          REQUIRE(VALUE_OR_FAIL(ReadBlob(tx, b)) == std::get<std::string>(want[c].v));
        } else {
          REQUIRE(testing::SameValue(row[c], want[c].v));
        }
      }
    }
  }
}

// ---------------------------------------------------------------- pages and what they are

bool InArea(uint32_t p) { return p >= page::kDoublewriteFirst && p < page::DoublewriteEnd(kPs); }

// A page's kind, from its bytes: the summary's rows, and what a round picks from.
std::string ClassOf(const std::string& file, uint32_t p) {
  if (InArea(p)) return "doublewrite area";
  const auto* d = reinterpret_cast<const uint8_t*>(file.data()) + size_t{p} * kPs;
  const uint32_t rel = util::Get32(d + 16);
  switch (page::GetType(d)) {
    case page::PageType::kFree: return "free";
    case page::PageType::kHeader: return "header";
    case page::PageType::kPip: return "PIP";
    case page::PageType::kTip: return "TIP";
    case page::PageType::kPointer: return rel == 0 ? "catalog pointer" : "pointer";
    case page::PageType::kData:
      if (rel == 0) return "catalog data";
      return (d[1] & page::kPpSecondary) ? "data secondary" : "data primary";
    case page::PageType::kBtree: return d[22] == 0 ? "btree leaf" : "btree internal";
    case page::PageType::kBlob: return (d[1] & page::kBlobListPage) ? "blob list" : "blob data";
    default: return absl::StrCat("type ", d[0]);
  }
}

// The records in the area's slots (slot, record), in sequence order, and the highest
// retired_through any valid record page or marker declares.
std::vector<std::pair<uint32_t, page::DwRecord>> AreaRecords(const std::string& file,
                                                             uint64_t* retired) {
  std::vector<std::pair<uint32_t, page::DwRecord>> recs;
  *retired = 0;
  for (uint32_t i = 0; i < page::DoublewriteSlots(kPs); ++i) {
    const auto* d =
        reinterpret_cast<const uint8_t*>(file.data()) + size_t{page::kDoublewriteFirst + i} * kPs;
    if (page::GetType(d) != page::PageType::kDoublewrite) continue;
    if (!page::VerifyPage(d, kPs, page::kDoublewriteFirst + i, nullptr).ok()) continue;
    absl::StatusOr<page::DwRecord> r = page::ReadDwRecord(d, kPs);
    if (!r.ok()) continue;
    *retired = std::max(*retired, r->retired_through);
    if (i >= page::kMarkerSlots) recs.emplace_back(i, std::move(*r));
  }
  std::sort(recs.begin(), recs.end(),
            [](const auto& a, const auto& b) { return a.second.seq < b.second.seq; });
  return recs;
}

// The area's pages that hold records recovery would walk (record pages and their images, of
// the records not yet declared void): the only durable copy of their pages until those are
// durable at home, so Open needs them.
std::set<uint32_t> LiveArea(const std::string& file) {
  uint64_t retired = 0;
  std::set<uint32_t> out;
  for (const auto& [slot, r] : AreaRecords(file, &retired)) {
    if (r.seq <= retired) continue;
    out.insert(page::kDoublewriteFirst + slot);
    for (const page::DwEntry& e : r.entries) {
      if (e.slot != page::kHomeSlot) out.insert(page::kDoublewriteFirst + e.slot);
    }
  }
  return out;
}

// Pages the doublewrite area holds a good copy of that recovery would apply: the newest entry
// of each page in the records not yet declared void, when its slot still holds that copy (its
// ring checksum right, its bytes those of the page at home but for the checksum field).
std::set<uint32_t> LiveCopies(const std::string& file) {
  uint64_t retired = 0;
  const std::vector<std::pair<uint32_t, page::DwRecord>> recs = AreaRecords(file, &retired);
  struct Newest {
    uint64_t seq;
    uint32_t index;
    page::DwEntry e;
  };
  std::map<uint32_t, Newest> newest;
  for (const auto& [slot, r] : recs) {
    if (r.seq <= retired) continue;
    for (uint32_t k = 0; k < r.entries.size(); ++k) {
      newest[r.entries[k].page_no] = {r.seq, k, r.entries[k]};
    }
  }
  std::set<uint32_t> out;
  constexpr size_t kSum = page::hdr::kChecksum;
  for (const auto& [p, n] : newest) {
    if (n.e.slot == page::kHomeSlot) continue;  // written home with its record: no image
    const size_t at = size_t{page::kDoublewriteFirst + n.e.slot} * kPs;
    const auto* copy = reinterpret_cast<const uint8_t*>(file.data()) + at;
    if (util::Get32(copy + kSum) != page::CopyChecksum(copy, kPs, n.seq, n.index)) continue;
    const size_t home = size_t{p} * kPs;
    if (file.compare(at, kSum, file, home, kSum) == 0 &&
        file.compare(at + kSum + 4, kPs - kSum - 4, file, home + kSum + 4, kPs - kSum - 4) == 0) {
      out.insert(p);
    }
  }
  return out;
}

using testing::NamesPage;

// ---------------------------------------------------------------- one undamaged file, measured

struct Base {
  std::string name;
  std::string bytes;  // the file the damage goes into
  std::string older;  // tears: the page versions before the last change ("" for flips)
  Options opts;
  std::set<uint32_t> open_pages;      // read by Open (beyond the doublewrite recovery)
  std::set<uint32_t> validate_pages;  // read by Validate from an empty cache
  std::vector<ReadPath> paths;
  std::map<uint32_t, std::string> table_of;  // relation id -> table name
  std::set<uint32_t> live_copies;
  std::set<uint32_t> live_area;                           // LiveArea
  std::map<std::string, std::vector<uint32_t>> by_class;  // the pages a round may pick
};

void Measure(const testing::ScratchDir& dir, Base* b, const Model& m, const Rids& rids) {
  const std::string path = dir.File("measure.edb");
  testing::WriteFileBytes(path, b->bytes);
  b->live_copies = LiveCopies(b->bytes);
  b->live_area = LiveArea(b->bytes);
  io::FileOptions fo;
  auto base = VALUE_OR_FAIL(io::OpenPosixFile(path, fo));
  // What a crash left in the area is applied (nothing differs: every home write completed) and
  // voided first, so the reads of Open below are its own.
  VALUE_OR_FAIL(cache::RecoverDoublewrite(base.get(), kPs));
  auto traced = std::make_unique<TracingFile>(std::move(base));
  TracingFile* trace = traced.get();
  Options o = b->opts;
  o.reclaim_after_crash = false;  // its walk reads every page; Validate below is that walk
  std::unique_ptr<db::DatabaseImpl> d =
      VALUE_OR_FAIL(db::DatabaseImpl::OpenFile(std::move(traced), o, /*create=*/false));
  d->gc()->Stop();
  Database* api = d.get();
  for (uint32_t p : trace->Take()) {
    if (!InArea(p)) b->open_pages.insert(p);
  }
  for (const auto& [t, rows] : m) {
    b->table_of[internal::TableState::From(VALUE_OR_FAIL(api->GetTable(t)))->id] = t;
  }
  auto tx = VALUE_OR_FAIL(api->Begin());
  std::map<std::string, std::vector<BlobId>> blobs;
  RequireModel(d.get(), tx.get(), m, &blobs);
  b->paths = MakePaths(m, rids, blobs);
  REQUIRE_OK(tx->Rollback());
  tx.reset();
  // A transaction per path: a transaction keeps what it read of BLOBs and long values, so a
  // path run after another in the same one would read less than it needs.
  for (ReadPath& rp : b->paths) {
    INFO(b->name << ": " << rp.name);
    auto ptx = VALUE_OR_FAIL(api->Begin());
    d->cache()->DiscardAll();
    trace->Take();
    rp.expected = VALUE_OR_FAIL(rp.run(d.get(), ptx.get()));
    rp.pages = trace->Take();
    REQUIRE_OK(ptx->Rollback());
  }
  d->cache()->DiscardAll();
  trace->Take();
  ValidationReport rep = VALUE_OR_FAIL(api->Validate());
  INFO(b->name << ": " << (rep.errors.empty() ? std::string() : rep.errors[0]));
  REQUIRE(rep.ok());
  REQUIRE(rep.unreachable_pages.empty());
  b->validate_pages = trace->Take();
  d->TEST_SimulateCrash();  // the copy is scratch: nothing more needs writing
  d.reset();

  const uint32_t pages = static_cast<uint32_t>(b->bytes.size() / kPs);
  for (uint32_t p = 0; p < pages; ++p) {
    const std::string cls = ClassOf(b->bytes, p);
    // Validate (or Open, for what it keeps in memory) reads every page in use: damage cannot
    // hide in a page nobody checks.
    if (cls != "free" && cls != "doublewrite area") {
      INFO(b->name << ": page " << p << " (" << cls << ")");
      CHECK((b->validate_pages.contains(p) || b->open_pages.contains(p)));
    }
    if (b->older.empty()) {
      b->by_class[cls].push_back(p);
      continue;
    }
    // A tear needs changed bytes on both sides of a 512-byte boundary (else it is one version
    // whole).
    const size_t off = size_t{p} * kPs;
    if (b->older.compare(off, kPs, b->bytes, off, kPs) == 0) continue;
    size_t first = 0, last = kPs - 1;
    while (b->older[off + first] == b->bytes[off + first]) ++first;
    while (b->older[off + last] == b->bytes[off + last]) --last;
    if (first / 512 + 1 <= last / 512) b->by_class[cls].push_back(p);
  }
}

// ---------------------------------------------------------------- one round

enum class Kind { kFlip, kTearProtected, kTearUnprotected };
const char* KindName(Kind k) {
  return k == Kind::kFlip            ? "flip"
         : k == Kind::kTearProtected ? "tear (doublewrite on)"
                                     : "tear (doublewrite off)";
}

struct Tally {
  uint64_t rounds = 0, detected = 0, repaired = 0, open_refused = 0, unread = 0, paths_failed = 0,
           paths_intact = 0;
};

// Damages one page of `b` and checks everything; problems go to `problems`.
void Round(const testing::ScratchDir& dir, const Base& b, Kind kind, std::mt19937_64& rng,
           std::string* cls_out, Tally* tally, std::vector<std::string>* problems) {
  // A page type first, then a page of it: every type gets its share however many pages it has.
  auto cls_it = b.by_class.begin();
  std::advance(cls_it, static_cast<long>(rng() % b.by_class.size()));
  const std::string& cls = cls_it->first;
  const uint32_t p = cls_it->second[rng() % cls_it->second.size()];
  *cls_out = cls;
  std::string file = b.bytes;
  const size_t off = size_t{p} * kPs;
  std::string what;
  if (kind == Kind::kFlip) {
    const int n = 1 + static_cast<int>(rng() % 8);
    std::set<uint32_t> bits;
    while (bits.size() < static_cast<size_t>(n))
      bits.insert(static_cast<uint32_t>(rng() % (kPs * 8)));
    for (uint32_t bit : bits)
      file[off + bit / 8] = static_cast<char>(file[off + bit / 8] ^ (1 << (bit % 8)));
    what = absl::StrCat(n, " bit(s) flipped");
  } else {
    size_t first = 0, last = kPs - 1;
    while (b.older[off + first] == b.bytes[off + first]) ++first;
    while (b.older[off + last] == b.bytes[off + last]) --last;
    const size_t lo = first / 512 + 1, hi = last / 512;
    const size_t cut = 512 * (lo + rng() % (hi - lo + 1));
    file.replace(off + cut, kPs - cut, b.older, off + cut, kPs - cut);  // new up to the cut
    what = absl::StrCat("torn at ", cut);
  }
  const bool repairable = kind == Kind::kTearProtected && b.live_copies.contains(p);
  const std::string where = absl::StrCat(b.name, ": page ", p, " (", cls, ") ", what, ": ");
  auto problem = [&](const std::string& s) { problems->push_back(where + s); };
  ++tally->rounds;
  // A pointer page of a user table: its damage is that table's alone (the undamaged bytes say
  // whose it is).
  std::string damaged_table;
  if (cls == "pointer") {
    const uint32_t rel = util::Get32(reinterpret_cast<const uint8_t*>(b.bytes.data()) + off + 16);
    if (auto it = b.table_of.find(rel); it != b.table_of.end()) damaged_table = it->second;
    if (damaged_table.empty()) problem("a pointer page of no table");
  }
  const bool table_damaged = !damaged_table.empty() && !repairable;

  const std::string path = dir.File("damaged.edb");
  testing::WriteFileBytes(path, file);
  absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(path, b.opts);
  if (!db.ok()) {
    ++tally->open_refused;
    ++tally->detected;
    if (repairable) problem("Open failed over a page with a good copy: " + db.status().ToString());
    // The header's first fields are read before its checksum, to learn the page size: damage
    // there gets the answers docs/format.md documents for them.
    const absl::string_view msg = db.status().message();
    const bool header_answer =
        p == 0 && ((absl::IsInvalidArgument(db.status()) &&
                    msg.find("not an EmberDB database") != absl::string_view::npos) ||
                   (absl::IsFailedPrecondition(db.status()) &&
                    msg.find("format version") != absl::string_view::npos) ||
                   (absl::IsDataLoss(db.status()) &&
                    msg.find("header holds invalid page size") != absl::string_view::npos));
    if (!header_answer && (!absl::IsDataLoss(db.status()) || !NamesPage(msg, p))) {
      problem("Open failed without DataLoss naming the page: " + db.status().ToString());
    }
    if (!b.open_pages.contains(p) && !b.live_area.contains(p)) {
      problem("Open refused the file for a page it does not need: " + db.status().ToString());
    }
    if (table_damaged) {
      problem("Open refused the file for a damaged pointer page of table " + damaged_table + ": " +
              db.status().ToString());
    }
    return;
  }
  if (Database* x = db->get(); Impl(x)->gc()) Impl(x)->gc()->Stop();
  bool detected = false;
  ValidationReport rep;
  if (absl::StatusOr<ValidationReport> r = (*db)->Validate(); r.ok()) {
    rep = std::move(*r);
  } else {
    problem("Validate failed instead of listing the damage: " + r.status().ToString());
  }
  const bool was_repaired = std::find(rep.repaired_pages.begin(), rep.repaired_pages.end(), p) !=
                            rep.repaired_pages.end();
  if (was_repaired) ++tally->repaired;
  if (repairable) {
    if (!was_repaired) problem("not repaired from its good copy");
    if (!rep.ok()) problem("Validate after the repair: " + rep.errors[0]);
  } else {
    if (was_repaired) problem("repaired without a good copy");
    // Errors that follow from the damage may name other pages (a B-tree level's chain ends at
    // a damaged page, so its parent's later children are not on it), next to the one naming it.
    bool named = false;
    for (const std::string& e : rep.errors) named |= NamesPage(e, p);
    if (!named && !rep.errors.empty()) {
      problem("Validate lists errors and none names the page: " + rep.errors[0]);
    }
    detected |= named;
    if ((b.validate_pages.contains(p) || table_damaged) && !named) {
      problem(rep.errors.empty() ? std::string("Validate lists nothing")
                                 : "Validate does not name the page: " + rep.errors[0]);
    }
    // (A table's damaged pointer page is noticed by Open and kept as that table's error.)
    if (b.open_pages.contains(p) && !table_damaged) {
      problem("Open read the page and did not notice the damage");
    }
  }
  bool any_reader = false;
  for (const ReadPath& rp : b.paths) {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = (*db)->Begin();
    if (!tx.ok()) {
      problem("Begin: " + tx.status().ToString());
      return;
    }
    absl::StatusOr<std::string> got = rp.run(db->get(), tx->get());
    (void)(*tx)->Rollback();
    // Every path of a table whose pointer page is damaged needs it (Open read it for them).
    const bool of_table = table_damaged && rp.table == damaged_table;
    const bool needs = (rp.pages.contains(p) || of_table) && !repairable;
    any_reader |= rp.pages.contains(p) || of_table;
    if (needs) {
      if (got.ok()) {
        problem(absl::StrCat(rp.name, ": reads the page and succeeds",
                             *got == rp.expected ? " (with the old result)" : " with wrong data"));
      } else if (!testing::LostAt(got.status(), p)) {
        problem(rp.name + ": not DataLoss naming the page: " + got.status().ToString());
      } else {
        detected = true;
        ++tally->paths_failed;
      }
    } else if (!got.ok()) {
      problem(rp.name + ": does not need the page but fails: " + got.status().ToString());
    } else if (*got != rp.expected) {
      problem(rp.name + ": does not need the page but returns different data");
    } else {
      ++tally->paths_intact;
    }
  }
  // Close may hand back what the reclamation after a crash found (a background error).
  if (absl::Status s = (*db)->Close(); !s.ok()) {
    if (!testing::LostAt(s, p)) problem("Close: " + s.ToString());
  }
  if (detected) ++tally->detected;
  if (!detected && !was_repaired) {
    ++tally->unread;
    // Only pages nothing reads may go unnoticed: the area's void slots, free pages.
    if (any_reader || b.validate_pages.contains(p) || b.open_pages.contains(p)) {
      problem("damage went unnoticed");
    }
  }
}

TEST_CASE(
    "corruption: bit flips and torn pages in every page type are repaired or DataLoss "
    "naming the page and the rest stays readable",
    "[crash][errors][doublewrite]") {
  const uint64_t seed = testing::AnnounceSeed("corruption", 0xc0447u);
  const uint64_t rounds = testing::EnvU64("EMBER_CORRUPT_ROUNDS", 150);
  testing::ScratchDir dir("ember-corrupt");
  REQUIRE(dir.ok());

  // The history: a first database closed cleanly (flips go into it), then one more committed
  // change made twice from it: with the protection on, ending in a crash right after the commit
  // and the lazy home writes of its records, and with it off, closed cleanly. Close voids every
  // copy in the doublewrite area (RetireAll: the pages are durable at home), so a cleanly closed
  // file holds no copy by design and a tear the area can repair is a tear left by a crash. Even
  // then only the pages of the records not yet declared void have a copy (LiveCopies); a tear
  // of any other page (or of a page written fresh, which gets no copy) is damage without a good
  // copy.
  Model first;
  Rids rids;
  const std::string path = dir.File("history.edb");
  MakeFirst(path, &first, &rids);
  const std::string first_bytes = testing::ReadFileBytes(path);

  std::vector<Base> bases;
  bases.push_back({"flip", first_bytes, "", DbOptions(true), {}, {}, {}, {}, {}, {}});
  std::vector<Model> models{first};
  std::vector<Rids> all_rids{rids};
  for (bool dw : {true, false}) {
    Model m = first;
    Rids r = rids;
    testing::WriteFileBytes(path, first_bytes);
    Options o = DbOptions(dw);
    o.gc_policy = GcPolicy::kCooperative;
    std::unique_ptr<Database> db = testing::OpenOrFail(path, o);
    std::string older = testing::ReadFileBytes(path);  // as Open left it
    LastChange(db.get(), &m, &r);
    if (dw) {
      // The crash comes as the lazy writer has written the records' pages home (unsynced).
      REQUIRE_OK(Impl(db.get())->cache()->WriteHomes());
      Impl(db.get())->TEST_SimulateCrash();
    } else {
      REQUIRE_OK(db->Close());
    }
    db.reset();
    std::string newer = testing::ReadFileBytes(path);
    // Pages the change added to the file were zeros before (never written): a tear of one is
    // its first write cut short.
    older.resize(newer.size(), '\0');
    bases.push_back({dw ? "tear, doublewrite on" : "tear, doublewrite off",
                     std::move(newer),
                     std::move(older),
                     DbOptions(dw),
                     {},
                     {},
                     {},
                     {},
                     {},
                     {}});
    models.push_back(m);
    all_rids.push_back(r);
  }
  for (size_t i = 0; i < bases.size(); ++i) Measure(dir, &bases[i], models[i], all_rids[i]);
  REQUIRE_FALSE(bases[1].live_copies.empty());

  std::map<std::pair<std::string, std::string>, Tally> tallies;  // (kind, page type)
  Tally total;
  uint64_t failed_rounds = 0;
  for (uint64_t round = 0; round < rounds; ++round) {
    std::mt19937_64 rng(seed + round);
    const Kind kind = static_cast<Kind>(rng() % 3);
    const Base& b = bases[static_cast<size_t>(kind)];
    std::string cls;
    std::vector<std::string> problems;
    Tally t;
    Round(dir, b, kind, rng, &cls, &t, &problems);
    Tally& k = tallies[{KindName(kind), cls}];
    for (Tally* x : {&k, &total}) {
      x->rounds += t.rounds;
      x->detected += t.detected;
      x->repaired += t.repaired;
      x->open_refused += t.open_refused;
      x->unread += t.unread;
      x->paths_failed += t.paths_failed;
      x->paths_intact += t.paths_intact;
    }
    if (!problems.empty() && ++failed_rounds <= 10) {
      std::string msg =
          absl::StrCat("seed ", seed, " round ", round, " (EMBER_CRASH_SEED=", seed + round,
                       " EMBER_CORRUPT_ROUNDS=1 replays it):");
      for (size_t i = 0; i < problems.size() && i < 8; ++i) msg += "\n  " + problems[i];
      if (problems.size() > 8) absl::StrAppend(&msg, "\n  ... ", problems.size() - 8, " more");
      FAIL_CHECK(msg);
    }
  }
  if (testing::Verbosity() >= 1) {
    for (const auto& [key, t] : tallies) {
      testing::Report("[corrupt] ", key.first, " / ", key.second, ": ", t.rounds, " rounds, ",
                      t.detected, " DataLoss, ", t.repaired, " repaired, ", t.open_refused,
                      " open refused, ", t.unread, " unread");
    }
  }
  testing::Report("[corrupt] ", rounds, " rounds (seed ", seed, "): ", total.detected,
                  " corruptions detected (DataLoss naming the page; ", total.open_refused,
                  " of them by Open), ", total.repaired, " torn pages repaired, ", total.unread,
                  " in pages nothing reads; ", total.paths_failed, " reads failed, ",
                  total.paths_intact, " intact; ", failed_rounds, " round(s) failed");
  CHECK(failed_rounds == 0);
}

}  // namespace
}  // namespace ember
