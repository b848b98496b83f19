// Garbage collection: old versions stay while a snapshot needs them and go (with the index
// entries of keys no remaining version has) once none does, through CollectGarbage, through a
// cooperative table scan and through the background collector; deleted rows go entirely; dead
// versions of a no_savepoint rollback are backed out with the index entries kept right; a scan
// abandoned half-way frees what it unlinked (white-box: live lines counted on the pages); the
// room collection frees is used again; and a concurrent mix of writers, readers and the
// collector leaves a valid database with the right values (also meant for ThreadSanitizer).
// No assertion depends on speed: the background tests poll with a generous deadline.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ember/ember.h"
#include "engine/cache/buffer_cache.h"
#include "engine/db/database_impl.h"
#include "engine/db/garbage_collector.h"
#include "engine/page/data_page.h"
#include "engine/page/page.h"
#include "engine/record/record_format.h"
#include "tests/support/db_util.h"

namespace ember {
namespace {

using testing::ErrorLog;
using testing::IsError;
using testing::OpenOrFail;
using testing::RowText;
using testing::SameRow;
using testing::TempDb;

using Model = std::map<uint64_t, Row>;  // record number -> (id, k, v)

int64_t IdOf(const Row& r) { return std::get<int64_t>(r[0]); }
int64_t KOf(const Row& r) { return std::get<int64_t>(r[1]); }

// Table t(id int64 NOT NULL, k int64, v string), unique index on id, non-unique on k.
struct Fixture : testing::TableDb {
  explicit Fixture(GcPolicy policy, uint32_t page_size = 4096) : TableDb(Opts(policy, page_size)) {}
  explicit Fixture(const Options& o) : TableDb(o) {}
  static Options Opts(GcPolicy policy, uint32_t page_size) {
    Options o = testing::CreateOptions(page_size, 256);
    o.gc_policy = policy;
    o.forced_writes = false;
    return o;
  }
  std::unique_ptr<Transaction> Begin(TransactionOptions o = {}) {
    return VALUE_OR_FAIL(db->Begin(o));
  }

  // Rows (id, id % 10, "v0-<id>") for ids 1..n, committed.
  Model Seed(int64_t n, size_t vlen = 0) {
    auto txn = Begin();
    Model m;
    for (int64_t id = 1; id <= n; ++id) {
      Row r{id, id % 10, "v0-" + std::to_string(id) + std::string(vlen, 's')};
      m[VALUE_OR_FAIL(txn->Insert(t, r)).value] = r;
    }
    REQUIRE_OK(txn->Commit());
    return m;
  }

  // Rows fn((id, id % 10, "")) for ids 1..n, committed.
  template <typename Fn>
  Model SeedWith(int64_t n, Fn fn) {
    auto txn = Begin();
    Model m;
    for (int64_t id = 1; id <= n; ++id) {
      Row r = fn(Row{id, id % 10, std::string()});
      m[VALUE_OR_FAIL(txn->Insert(t, r)).value] = r;
    }
    REQUIRE_OK(txn->Commit());
    return m;
  }

  // One committed transaction rewriting every row of `m` with fn(row).
  template <typename Fn>
  void UpdateAll(Model& m, Fn fn) {
    auto txn = Begin();
    for (auto& [rec, r] : m) {
      Row n = fn(r);
      REQUIRE_OK(txn->Update(t, RecordId{rec}, n));
      r = n;
    }
    REQUIRE_OK(txn->Commit());
  }

  TableStats Stats() { return VALUE_OR_FAIL(db->GetTableStats(t)); }

  // What `txn` sees, through Get only (no scan: a scan may collect garbage cooperatively).
  void VerifyByGet(Transaction* txn, const Model& m, const std::string& step) {
    INFO("step: " << step);
    for (const auto& [rec, r] : m) {
      std::optional<Row> got = VALUE_OR_FAIL(txn->Get(t, RecordId{rec}));
      INFO("record " << rec << " want " << RowText(r));
      REQUIRE(got.has_value());
      INFO("got " << RowText(*got));
      REQUIRE(SameRow(*got, r));
    }
  }

  // Every way of reading: Get, scan, Lookup by id and k, full index scans.
  void Verify(Transaction* txn, const Model& m, const std::string& step) {
    VerifyByGet(txn, m, step);
    INFO("step: " << step);
    auto scan = VALUE_OR_FAIL(testing::ScanAll(txn, t));
    REQUIRE(scan.size() == m.size());
    size_t i = 0;
    for (const auto& [rec, r] : m) {
      REQUIRE(scan[i].first.value == rec);
      REQUIRE(SameRow(scan[i].second, r));
      ++i;
    }
    for (const auto& [rec, r] : m) {
      INFO("row " << RowText(r));
      auto hit = VALUE_OR_FAIL(txn->Lookup(by_id, {IdOf(r)}));
      REQUIRE(hit.has_value());
      REQUIRE(hit->first.value == rec);
      auto ks = VALUE_OR_FAIL(testing::IndexRange(txn, by_k, {KOf(r)}, {KOf(r)}));
      bool found = false;
      for (const auto& [rid, row] : ks) found |= rid.value == rec;
      REQUIRE(found);
    }
    auto ids = VALUE_OR_FAIL(testing::IndexRange(txn, by_id, {}, {}));
    REQUIRE(ids.size() == m.size());
    auto kall = VALUE_OR_FAIL(testing::IndexRange(txn, by_k, {}, {}));
    REQUIRE(kall.size() == m.size());
  }

  ValidationReport RequireValid() {
    ValidationReport rep = VALUE_OR_FAIL(db->Validate());
    for (const std::string& e : rep.errors) UNSCOPED_INFO(e);
    REQUIRE(rep.ok());
    return rep;
  }
};

// Polls `done` until it holds or 30 s pass (a deadline, not a speed requirement).
template <typename Fn>
bool WaitFor(Fn done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

TEST_CASE("gc: old versions stay while a snapshot needs them, then go with their index entries",
          "[gc]") {
  const std::string how = GENERATE(std::string("CollectGarbage"), std::string("cooperative scan"));
  INFO("collected by " << how);
  Fixture f(GcPolicy::kCooperative);
  Model m0 = f.Seed(100);
  auto snap0 = f.Begin();  // sees m0
  REQUIRE(VALUE_OR_FAIL(snap0->Get(f.t, RecordId{m0.begin()->first})).has_value());
  Model m = m0;
  // Version 1: ids and keys change.
  f.UpdateAll(m, [](const Row& r) { return Row{IdOf(r) + 1000, KOf(r) + 100, std::string("v1")}; });
  const Model m1 = m;
  auto snap1 = f.Begin();  // sees m1
  // Versions 2 and 3.
  f.UpdateAll(m, [](const Row& r) { return Row{IdOf(r) + 1000, KOf(r) + 100, std::string("v2")}; });
  f.UpdateAll(m, [](const Row& r) { return Row{IdOf(r) + 1000, KOf(r) + 100, std::string("v3")}; });
  const Model m3 = m;

  // Both snapshots still see their versions; nothing can be collected.
  f.VerifyByGet(snap0.get(), m0, "snapshot 0");
  f.VerifyByGet(snap1.get(), m1, "snapshot 1");
  CHECK(f.Stats().back_versions == 300);
  REQUIRE_OK(f.db->CollectGarbage());
  CHECK(f.Stats().back_versions == 300);
  f.Verify(snap0.get(), m0, "snapshot 0 after CollectGarbage");  // its scan collects nothing
  CHECK(f.Stats().back_versions == 300);
  CHECK(f.db->stats().gc_versions_removed == 0);

  // Snapshot 0 ends: only what snapshot 1 needs stays (version 0 of each row goes).
  REQUIRE_OK(snap0->Commit());
  REQUIRE_OK(f.db->CollectGarbage());
  CHECK(f.Stats().back_versions == 200);
  f.Verify(snap1.get(), m1, "snapshot 1 after partial collection");
  REQUIRE_OK(snap1->Commit());

  const DatabaseStats before = f.db->stats();
  if (how == "CollectGarbage") {
    REQUIRE_OK(f.db->CollectGarbage());
  } else {
    auto reader = f.Begin();
    auto rows = VALUE_OR_FAIL(testing::ScanAll(reader.get(), f.t));
    REQUIRE(rows.size() == 100);
    REQUIRE_OK(reader->Commit());
  }
  const TableStats st = f.Stats();
  CHECK(st.back_versions == 0);
  CHECK(st.back_version_bytes == 0);
  CHECK(st.records == 100);
  const DatabaseStats after = f.db->stats();
  CHECK(after.gc_versions_removed >= before.gc_versions_removed + 200);
  CHECK(after.gc_index_entries_removed > before.gc_index_entries_removed);

  auto r = f.Begin();
  // No entries for the old keys: ids 1..3100 except the current 3001..3100, k < 300.
  CHECK(
      VALUE_OR_FAIL(testing::IndexRange(r.get(), f.by_id, {int64_t{0}}, {int64_t{3000}})).empty());
  CHECK(VALUE_OR_FAIL(testing::IndexRange(r.get(), f.by_k, {int64_t{0}}, {int64_t{299}})).empty());
  f.Verify(r.get(), m3, "after collection");
  REQUIRE_OK(r->Commit());
  ValidationReport rep = f.RequireValid();
  CHECK(rep.index_entries == 200);  // exactly one entry per row and index: the old keys are gone
}

TEST_CASE("gc: deleted rows are removed entirely", "[gc]") {
  Fixture f(GcPolicy::kCooperative);
  Model m = f.Seed(50);
  auto snap = f.Begin();
  Model gone;
  {
    auto txn = f.Begin();
    for (auto it = m.begin(); it != m.end();) {
      if (IdOf(it->second) % 5 == 0) {
        REQUIRE_OK(txn->Delete(f.t, RecordId{it->first}));
        gone.insert(*it);
        it = m.erase(it);
      } else {
        ++it;
      }
    }
    REQUIRE_OK(txn->Commit());
  }
  REQUIRE(gone.size() == 10);
  CHECK(f.Stats().delete_stubs == 10);
  REQUIRE_OK(f.db->CollectGarbage());  // the snapshot still sees the deleted rows
  CHECK(f.Stats().records == 50);
  f.VerifyByGet(snap.get(), gone, "snapshot sees deleted rows");
  REQUIRE_OK(snap->Commit());

  const uint64_t removed_before = f.db->stats().gc_records_removed;
  REQUIRE_OK(f.db->CollectGarbage());
  const TableStats st = f.Stats();
  CHECK(st.records == 40);
  CHECK(st.delete_stubs == 0);
  CHECK(st.back_versions == 0);
  CHECK(f.db->stats().gc_records_removed == removed_before + 10);
  auto r = f.Begin();
  for (const auto& [rec, row] : gone) {
    CHECK_FALSE(VALUE_OR_FAIL(r->Get(f.t, RecordId{rec})).has_value());
    CHECK_FALSE(VALUE_OR_FAIL(r->Lookup(f.by_id, {IdOf(row)})).has_value());
  }
  f.Verify(r.get(), m, "after collection");
  REQUIRE_OK(r->Commit());
  ValidationReport rep = f.RequireValid();
  CHECK(rep.index_entries == 80);
}

TEST_CASE("gc: dead versions of a no_savepoint rollback are backed out, index entries kept",
          "[gc]") {
  const GcPolicy policy = GENERATE(GcPolicy::kCooperative, GcPolicy::kBackground);
  INFO("policy " << (policy == GcPolicy::kCooperative ? "cooperative (CollectGarbage)"
                                                      : "background"));
  Fixture f(policy);
  Model m = f.Seed(50);
  {
    TransactionOptions o;
    o.no_savepoint = true;
    auto txn = f.Begin(o);
    int n = 0;
    for (const auto& [rec, r] : m) {
      ++n;
      Row nr = r;
      if (n <= 20) nr[2] = std::string("value only");  // keys unchanged
      else if (n <= 30) nr[1] = int64_t{500 + n};      // k changed, id unchanged
      else if (n <= 35) nr = Row{IdOf(r) + 700, int64_t{600}, std::string("both")};
      else if (n <= 40) {
        REQUIRE_OK(txn->Delete(f.t, RecordId{rec}));
        continue;
      } else {
        continue;
      }
      REQUIRE_OK(txn->Update(f.t, RecordId{rec}, nr));
    }
    for (int64_t i = 0; i < 10; ++i) {
      REQUIRE_OK(txn->Insert(f.t, Row{int64_t{900} + i, int64_t{7}, std::string("new")}).status());
    }
    REQUIRE_OK(txn->Rollback());
  }
  if (policy == GcPolicy::kCooperative) {
    CHECK(f.Stats().dead_versions == 50);
    REQUIRE_OK(f.db->CollectGarbage());
  } else {
    // The rollback handed its pages to the collector: wait (generously) for it.
    REQUIRE(WaitFor(
        [&] { return f.Stats().dead_versions == 0 && f.db->stats().gc_pages_queued == 0; }));
  }
  const TableStats st = f.Stats();
  CHECK(st.dead_versions == 0);
  CHECK(st.back_versions == 0);
  CHECK(st.delete_stubs == 0);
  CHECK(st.records == 50);
  auto r = f.Begin();
  f.Verify(r.get(), m, "after backing out the dead versions");
  REQUIRE_OK(r->Commit());
  ValidationReport rep = f.RequireValid();
  CHECK(rep.index_entries == 100);
}

TEST_CASE("gc: a dead version overwritten by a later writer leaves no index entries behind",
          "[gc]") {
  // A no_savepoint rollback leaves a dead head with keys of its own in the indexes. A later
  // writer may overwrite the dead head in place (before any collection met it); then neither
  // the writer nor a later collection sees that version again, so whoever overwrites it must
  // drop the keys only it had.
  Fixture f(GcPolicy::kCooperative);
  Model m = f.Seed(10);
  const uint64_t rec = m.begin()->first;
  {
    TransactionOptions o;
    o.no_savepoint = true;
    auto txn = f.Begin(o);
    REQUIRE_OK(
        txn->Update(f.t, RecordId{rec}, Row{int64_t{555}, int64_t{77}, std::string("dead")}));
    REQUIRE_OK(txn->Rollback());
  }
  REQUIRE(f.Stats().dead_versions == 1);
  {
    auto txn = f.Begin();  // Get only: no scan, so nothing collects the dead version first
    Row r = m[rec];
    r[2] = std::string("over the dead one");
    REQUIRE_OK(txn->Update(f.t, RecordId{rec}, r));
    m[rec] = r;
    REQUIRE_OK(txn->Commit());
  }
  REQUIRE_OK(f.db->CollectGarbage());
  const TableStats st = f.Stats();
  CHECK(st.dead_versions == 0);
  CHECK(st.back_versions == 0);
  auto r = f.Begin();
  f.Verify(r.get(), m, "after collection");
  REQUIRE_OK(r->Commit());
  ValidationReport rep = f.RequireValid();
  CHECK(rep.index_entries == 2 * m.size());  // no entry left for id 555 or k 77
}

TEST_CASE("gc: the background collector collects after commit", "[gc]") {
  const GcPolicy policy = GENERATE(GcPolicy::kBackground, GcPolicy::kCombined);
  Fixture f(policy);
  Model m = f.Seed(100);
  f.UpdateAll(m, [](const Row& r) { return Row{IdOf(r), KOf(r) + 10, std::string("a")}; });
  f.UpdateAll(m, [](const Row& r) { return Row{IdOf(r) + 5000, KOf(r) + 10, std::string("b")}; });
  // No reader scans: only the collector thread can remove the 200 back versions.
  const bool collected = WaitFor([&] {
    const DatabaseStats s = f.db->stats();
    return s.gc_versions_removed >= 200 && s.gc_pages_queued == 0;
  });
  INFO("gc_versions_removed " << f.db->stats().gc_versions_removed << ", queued "
                              << f.db->stats().gc_pages_queued);
  REQUIRE(collected);
  CHECK(f.db->stats().gc_index_entries_removed > 0);
  const TableStats st = f.Stats();
  CHECK(st.back_versions == 0);
  CHECK(st.records == 100);
  auto r = f.Begin();
  f.Verify(r.get(), m, "after background collection");
  CHECK(
      VALUE_OR_FAIL(testing::IndexRange(r.get(), f.by_id, {int64_t{0}}, {int64_t{5000}})).empty());
  REQUIRE_OK(r->Commit());
  ValidationReport rep = f.RequireValid();
  CHECK(rep.index_entries == 200);
}

// Lines on the data pages of `t` (primary and secondary) that no record reaches: neither a
// record's head, nor a version or fragment its chains lead to. White-box: the pages are read
// through the cache. Counted separately: orphaned back versions and orphaned fragments.
struct Orphans {
  uint64_t lines = 0;          // every live line
  uint64_t back_versions = 0;  // orphaned lines flagged as back versions
  uint64_t fragments = 0;      // orphaned fragment lines
};
Orphans CountOrphans(Database* db, const Table& t) {
  auto* impl = static_cast<db::DatabaseImpl*>(db);
  record::Relation* rel = internal::TableState::From(t)->relation.get();
  const uint32_t ps = db->options().page_size;
  // Check lists every page of the relation (pointer pages, data pages, pages chains reach).
  std::vector<std::string> errors;
  std::vector<page::PageNo> pages;
  uint64_t versions = 0;
  REQUIRE(rel->Check(
                 &errors, &pages, [](uint64_t) {}, &versions, nullptr)
              .ok());
  REQUIRE(errors.empty());
  std::sort(pages.begin(), pages.end());
  pages.erase(std::unique(pages.begin(), pages.end()), pages.end());
  std::map<std::pair<page::PageNo, uint16_t>, std::string> lines;
  for (page::PageNo p : pages) {
    absl::StatusOr<cache::PageRef> r = impl->cache()->Fetch(p, cache::LatchMode::kShared);
    REQUIRE(r.ok());
    if (page::GetType(r->data()) != page::PageType::kData ||
        page::DpRelation(r->data()) != rel->id()) {
      continue;
    }
    for (uint16_t l = 0; l < page::DpLineCount(r->data()); ++l) {
      if (auto v = page::DpGet(r->data(), ps, l)) lines[{p, l}] = std::string(*v);
    }
  }
  std::set<std::pair<page::PageNo, uint16_t>> reached;
  auto header = [&](std::pair<page::PageNo, uint16_t> at, record::RecordHeader* h) {
    auto it = lines.find(at);
    REQUIRE(it != lines.end());
    REQUIRE(record::DecodeHeader(it->second, h));
  };
  for (const auto& [at, bytes] : lines) {
    record::RecordHeader h;
    REQUIRE(record::DecodeHeader(bytes, &h));
    if (h.flags & record::kRecNotPrimary) continue;
    std::pair<page::PageNo, uint16_t> v = at;
    for (int hops = 0; hops < 100000; ++hops) {
      reached.insert(v);
      record::RecordHeader vh;
      header(v, &vh);
      for (record::RecordHeader fh = vh; fh.flags & record::kRecFragmented;) {
        const std::pair<page::PageNo, uint16_t> f{fh.frag_page, fh.frag_line};
        reached.insert(f);
        header(f, &fh);
      }
      if (vh.back_page == page::kNoPage) break;
      v = {vh.back_page, vh.back_line};
    }
  }
  Orphans o;
  o.lines = lines.size();
  for (const auto& [at, bytes] : lines) {
    if (reached.contains(at)) continue;
    record::RecordHeader h;
    REQUIRE(record::DecodeHeader(bytes, &h));
    if (h.flags & record::kRecBackVersion) ++o.back_versions;
    if (h.flags & record::kRecFragment) ++o.fragments;
  }
  return o;
}

// A row of `len` random letters: under the spill threshold (a quarter page), so it stays in the
// record, and its compressed body is not much smaller (back versions are full-size).
Row LetterRow(const Row& r, size_t len, std::mt19937_64& rng) {
  std::string v(len, '\0');
  for (char& c : v) c = static_cast<char>('a' + rng() % 26);
  return Row{IdOf(r), KOf(r), v};
}

// About 650 bytes compressed: too big for a back version to fit beside its record on a 4 KB
// page, so back versions live on secondary pages. (It was 1400 letters, which since long values
// spill to BLOBs made a row of a few bytes, and its back versions stayed on the record's page.)
Row BigRow(const Row& r, std::mt19937_64& rng) { return LetterRow(r, 1000, rng); }

TEST_CASE("gc: a table scan abandoned half-way does not leak the lines it unlinked", "[gc]") {
  // Collecting a record whose back versions are on another page unlinks their lines; they are
  // freed in a batch once the page that pointed at them is on disk. A scan that collects its
  // first page and is then dropped must still free them (or nothing ever will: nothing points
  // at them any more).
  const bool abandon = GENERATE(false, true);
  INFO("scan dropped after its first row: " << abandon);
  Fixture f(GcPolicy::kCooperative);
  std::mt19937_64 rng(1);
  Model m = f.Seed(16);
  f.UpdateAll(m, [&](const Row& r) { return BigRow(r, rng); });
  REQUIRE_OK(f.db->CollectGarbage());
  for (int cycle = 0; cycle < 5; ++cycle) {
    INFO("cycle " << cycle);
    f.UpdateAll(m, [&](const Row& r) { return BigRow(r, rng); });
    REQUIRE(f.Stats().back_versions == 16);
    auto txn = f.Begin();
    auto c = VALUE_OR_FAIL(txn->Scan(f.t));
    REQUIRE(c->Valid());
    if (abandon) {
      c.reset();  // dropped after the first row: its first page was collected
    } else {
      REQUIRE(VALUE_OR_FAIL(testing::Drain(c.get())).size() == 16);
    }
    REQUIRE_OK(txn->Commit());
    REQUIRE_OK(f.db->CollectGarbage());  // the rest
    const TableStats st = f.Stats();
    REQUIRE(st.back_versions == 0);
    REQUIRE(st.records == 16);
    // No back version that nothing points at. (Orphaned fragment lines are not checked: the
    // record write path leaves some behind on its own, without any collection.)
    const Orphans o = CountOrphans(f.db.get(), f.t);
    INFO("lines " << o.lines << ", orphaned fragments " << o.fragments);
    CHECK(o.back_versions == 0);
  }
  auto r = f.Begin();
  f.Verify(r.get(), m, "final");
  REQUIRE_OK(r->Commit());
  f.RequireValid();
}

TEST_CASE("gc: space freed by collection is reused", "[gc]") {
  Fixture f(GcPolicy::kCooperative);
  std::mt19937_64 rng(2);
  SECTION("back versions: repeated update and collect stays bounded, across restarts too") {
    // 200 rows of 100 to 1000 bytes; each cycle rewrites all of them (the old versions go to
    // secondary pages: the primary pages have no room for them) and collects. At any moment 200
    // records and at most 200 back versions exist, so once collected, their room serves the next
    // round. The database is reopened every third cycle: the secondary pages collection emptied
    // must be found again from what is on disk (they were not: each restart added a full set of
    // secondary pages, 45 -> 441 data pages over 24 cycles).
    auto row = [&](const Row& r) { return LetterRow(r, 100 + rng() % 900, rng); };
    Model m = f.SeedWith(200, row);
    const uint64_t seeded = f.Stats().data_pages;
    std::vector<uint64_t> pages;
    for (int cycle = 0; cycle < 30; ++cycle) {
      INFO("cycle " << cycle);
      f.UpdateAll(m, row);
      REQUIRE(f.Stats().back_versions == m.size());
      REQUIRE_OK(f.db->CollectGarbage());
      REQUIRE(f.Stats().back_versions == 0);
      pages.push_back(f.Stats().data_pages);
      if (cycle % 3 == 2) f.Reopen();
    }
    std::string series;
    for (uint64_t p : pages) absl::StrAppend(&series, " ", p);
    INFO("data pages: " << seeded << " seeded, after each cycle:" << series);
    REQUIRE(pages[0] > seeded);  // the back versions did need secondary pages
    for (uint64_t p : pages) CHECK(p * 5 <= pages[0] * 6);  // within 1.2x of the first cycle
    auto r = f.Begin();
    f.Verify(r.get(), m, "after 30 cycles");
    REQUIRE_OK(r->Commit());
    f.RequireValid();
  }
  SECTION("deleted records: inserting again after they were collected") {
    Model m = f.Seed(300, 200);
    const uint64_t pages = f.Stats().data_pages;
    {
      auto txn = f.Begin();
      for (const auto& [rec, r] : m) REQUIRE_OK(txn->Delete(f.t, RecordId{rec}));
      REQUIRE_OK(txn->Commit());
    }
    REQUIRE_OK(f.db->CollectGarbage());
    REQUIRE(f.Stats().records == 0);
    {
      auto txn = f.Begin();
      for (int64_t id = 1000; id < 1300; ++id) {
        REQUIRE_OK(txn->Insert(f.t, Row{id, int64_t{1}, std::string(200, 'r')}).status());
      }
      REQUIRE_OK(txn->Commit());
    }
    INFO("data pages: " << pages << " for the first 300 rows, " << f.Stats().data_pages
                        << " after deleting, collecting and inserting 300 again");
    CHECK(f.Stats().data_pages <= pages + 1);
  }
}

TEST_CASE(
    "gc: the background collector writes no page early: a line goes once its pages are written",
    "[gc]") {
  // Freeing a collected back version must wait until the page that pointed at it is on disk
  // without the pointer. The background collector used to write that page at once, with a sync
  // of its own; now it keeps the line until the page is written anyway (the next commit or
  // eviction of it) and frees it in a later round. Same load as the test above: 200 rows of 100
  // to 1000 bytes rewritten whole each cycle, their old versions on secondary pages.
  Options o = Fixture::Opts(GcPolicy::kBackground, 4096);
  o.forced_writes = GENERATE(true, false);
  o.doublewrite = GENERATE(true, false);
  INFO("forced_writes " << o.forced_writes << ", doublewrite " << o.doublewrite);
  Fixture f(o);
  auto* impl = static_cast<db::DatabaseImpl*>(f.db.get());
  std::mt19937_64 rng(3);
  auto row = [&](const Row& r) { return LetterRow(r, 100 + rng() % 900, rng); };
  Model m = f.SeedWith(200, row);
  const uint64_t seeded = f.Stats().data_pages;
  std::vector<uint64_t> pages;
  uint64_t early = 0;  // pages the collector's rounds wrote early (an update's own are not its)
  for (int cycle = 0; cycle < 20; ++cycle) {
    INFO("cycle " << cycle);
    f.UpdateAll(m, row);
    const uint64_t before = f.db->stats().pages.cycle_writes;
    REQUIRE_OK(impl->gc()->RunOnce());  // with the collector's own thread, whichever is first
    early += f.db->stats().pages.cycle_writes - before;
    pages.push_back(f.Stats().data_pages);
  }
  CHECK(early == 0);
  std::string series;
  for (uint64_t p : pages) absl::StrAppend(&series, " ", p);
  INFO("data pages: " << seeded << " seeded, after each cycle:" << series);
  REQUIRE(pages[0] > seeded);  // the back versions did need secondary pages
  // Freed a cycle late, their room serves again: without the later frees the secondary pages
  // would grow by a full set each cycle (20x the first cycle's by the end).
  for (uint64_t p : pages) CHECK(p <= 3 * pages[0]);
  // What still waits goes with an explicit collection; nothing is lost or leaked.
  REQUIRE_OK(f.db->CollectGarbage());
  CHECK(f.Stats().back_versions == 0);
  auto r = f.Begin();
  f.Verify(r.get(), m, "after 20 cycles");
  REQUIRE_OK(r->Commit());
  f.RequireValid();
  f.Reopen();
  auto r2 = f.Begin();
  f.Verify(r2.get(), m, "after reopen");
  REQUIRE_OK(r2->Commit());
}

TEST_CASE("gc: counters count garbage collection only", "[gc]") {
  // Index entries a transaction removes for its own overwritten versions (and an undo removes)
  // are not garbage collection: with nothing collected, the gc counters stay 0.
  Fixture f(GcPolicy::kCooperative);
  Model m = f.Seed(10);
  auto txn = f.Begin();
  const uint64_t rec = m.begin()->first;
  REQUIRE_OK(txn->Update(f.t, RecordId{rec}, Row{int64_t{100}, int64_t{1}, std::string("a")}));
  REQUIRE_OK(txn->Update(f.t, RecordId{rec}, Row{int64_t{101}, int64_t{2}, std::string("b")}));
  REQUIRE_OK(txn->Savepoint("s"));
  REQUIRE_OK(txn->Update(f.t, RecordId{rec}, Row{int64_t{102}, int64_t{3}, std::string("c")}));
  REQUIRE_OK(txn->RollbackToSavepoint("s"));
  REQUIRE_OK(txn->Commit());
  const DatabaseStats s = f.db->stats();
  CHECK(s.gc_versions_removed == 0);
  CHECK(s.gc_records_removed == 0);
  CHECK(s.gc_index_entries_removed == 0);
}

// The white-box form of the next test's spurious unique violation, one step at a time.
// Collection removes a deleted record A (its lines become free) and only then drops A's index
// entries, holding A's record lock throughout. In between, a delete of another record B (a
// different record lock) pushes B's old version into the lowest free line: A's. B's row has the
// id A had, so A's entry (id, A) now leads to a committed back version with that id. An insert
// of the id that checks uniqueness then read that line as record A (ForEachVersion did not ask
// whether the line was a record) and reported a duplicate.
TEST_CASE(
    "gc: an index entry not dropped yet, to a line another record's back version took, "
    "is no duplicate",
    "[gc]") {
  Fixture f(GcPolicy::kCooperative);
  auto* impl = static_cast<db::DatabaseImpl*>(f.db.get());
  internal::TableState* ts = internal::TableState::From(f.t);
  record::Relation* rel = ts->relation.get();
  auto insert = [&](int64_t id, const std::string& v) {
    auto txn = f.Begin();
    const uint64_t rec = VALUE_OR_FAIL(txn->Insert(f.t, Row{id, int64_t{1}, v})).value;
    REQUIRE_OK(txn->Commit());
    return rec;
  };
  auto erase = [&](uint64_t rec) {
    auto txn = f.Begin();
    REQUIRE_OK(txn->Delete(f.t, RecordId{rec}));
    REQUIRE_OK(txn->Commit());
  };
  const uint64_t a = insert(1, "a");
  erase(a);
  const uint64_t b = insert(1, "b");  // the same id again: A is deleted
  REQUIRE(page::RecordDpSequence(a) == page::RecordDpSequence(b));

  // Collection of A, first half: its lines go, its entries stay.
  std::vector<record::Unlinked> unlinked;
  record::Collected c;
  {
    std::lock_guard<std::mutex> g(impl->RecordMutex(ts->id, a));
    c = VALUE_OR_FAIL(rel->Collect(a, impl->GcHorizon(), cache::kNoOwnerMark, &unlinked));
  }
  REQUIRE(c.record_gone);
  erase(b);
  {
    // B's old version (id 1) took A's line.
    const page::PageNo p = VALUE_OR_FAIL(rel->RecordPage(a));
    absl::StatusOr<cache::PageRef> r = impl->cache()->Fetch(p, cache::LatchMode::kShared);
    REQUIRE(r.ok());
    std::optional<std::string_view> line =
        page::DpGet(r->data(), f.db->options().page_size, page::RecordLine(a));
    REQUIRE(line.has_value());
    record::RecordHeader h;
    REQUIRE(record::DecodeHeader(*line, &h));
    REQUIRE((h.flags & record::kRecBackVersion) != 0);
  }
  // A's record number names no record, whatever its line holds now.
  CHECK(IsError(rel->ForEachVersion(a, [](uint64_t, bool, std::string_view) { return true; }),
                absl::StatusCode::kNotFound));
  uint64_t n = 0;
  {
    auto txn = f.Begin();
    absl::StatusOr<RecordId> r = txn->Insert(f.t, Row{int64_t{1}, int64_t{1}, std::string("n")});
    REQUIRE_OK(r.status());  // was ALREADY_EXISTS: unique index t_id: duplicate key
    n = r->value;
    REQUIRE_OK(txn->Commit());
  }
  // Collection of A, second half; then everything else.
  {
    util::ReaderLock rows(ts->rows_mu);  // as CollectRecords holds it: DropKeys reads the indexes
    std::lock_guard<std::mutex> g(impl->RecordMutex(ts->id, a));
    uint64_t dropped_keys = 0;
    REQUIRE_OK(impl->DropKeys(ts, a, c.going, &c.staying, cache::kNoOwnerMark, &dropped_keys));
  }
  REQUIRE_OK(rel->FreeUnlinked(&unlinked, cache::kNoOwnerMark));
  REQUIRE_OK(f.db->CollectGarbage());
  auto txn = f.Begin();
  Model m{{n, Row{int64_t{1}, int64_t{1}, std::string("n")}}};
  f.Verify(txn.get(), m, "after collection");
  REQUIRE_OK(txn->Commit());
  f.RequireValid();
}

TEST_CASE(
    "gc: collecting a deleted record while an insert reuses its number keeps the new "
    "record's index entries",
    "[gc][concurrency]") {
  // Collection removes a deleted record (its line becomes free) and then drops the index
  // entries of its versions. An insert that takes the freed line (same record number) and adds
  // the same keys in between finds the entries present (AlreadyExists is fine for it); the
  // collector must not then remove them (Insert takes the record lock before adding its keys).
  // And a delete that puts another record's old version into the freed line meanwhile must not
  // make the next insert of that key see a duplicate through the entry not dropped yet (the test
  // above shows that interleaving step by step; here it came about one run in two or three).
  // One thread inserts, checks and deletes the same rows over and over while another collects
  // garbage continuously. The outcome never depends on timing: with correct code every insert
  // and lookup succeeds however the threads interleave (the loop is bounded; how soon a wrong
  // interleaving shows varies).
  constexpr int kIterations = 3000;
  constexpr int64_t kRows = 20;
  Fixture f(GcPolicy::kCooperative);
  std::atomic<bool> stop{false};
  ErrorLog errors;
  std::thread collector([&] {
    while (!stop.load()) {
      if (absl::Status s = f.db->CollectGarbage(); !s.ok()) {
        errors.Add("CollectGarbage: " + s.ToString());
        return;
      }
    }
  });
  std::string failure;
  for (int it = 0; it < kIterations && failure.empty() && errors.count() == 0; ++it) {
    auto check = [&](const absl::Status& s, const char* what) {
      if (!s.ok() && failure.empty()) {
        failure = absl::StrCat("iteration ", it, ": ", what, ": ", s.ToString());
      }
      return s.ok();
    };
    std::vector<RecordId> rids;
    {
      absl::StatusOr<std::unique_ptr<Transaction>> txn = f.db->Begin();
      if (!check(txn.status(), "Begin")) break;
      for (int64_t id = 1; id <= kRows && failure.empty(); ++id) {
        absl::StatusOr<RecordId> r = (*txn)->Insert(f.t, Row{id, id, std::string("x")});
        if (check(r.status(), "Insert")) rids.push_back(*r);
      }
      if (!failure.empty() || !check((*txn)->Commit(), "Commit")) break;
    }
    {
      absl::StatusOr<std::unique_ptr<Transaction>> txn = f.db->Begin();
      if (!check(txn.status(), "Begin")) break;
      for (int64_t id = 1; id <= kRows && failure.empty(); ++id) {
        auto by_id = (*txn)->Lookup(f.by_id, {id});
        auto by_k = (*txn)->Lookup(f.by_k, {id});
        auto got = (*txn)->Get(f.t, rids[id - 1]);
        if (!check(by_id.status(), "Lookup") || !check(by_k.status(), "Lookup") ||
            !check(got.status(), "Get")) {
          break;
        }
        if (!by_id->has_value() || !by_k->has_value()) {
          failure = absl::StrCat("iteration ", it, ": committed record ", rids[id - 1].value,
                                 (got->has_value() ? " exists" : " is missing"),
                                 " but lost index entries: id index ",
                                 by_id->has_value() ? "has it" : "lost it", ", k index ",
                                 by_k->has_value() ? "has it" : "lost it");
        }
      }
      if (!failure.empty()) break;
      (void)(*txn)->Commit();
    }
    {
      absl::StatusOr<std::unique_ptr<Transaction>> txn = f.db->Begin();
      if (!check(txn.status(), "Begin")) break;
      for (RecordId rid : rids) {
        if (!check((*txn)->Delete(f.t, rid), "Delete")) break;
      }
      if (!failure.empty() || !check((*txn)->Commit(), "Commit")) break;
    }
  }
  stop.store(true);
  collector.join();
  testing::RequireNoErrors(errors);
  INFO(failure);
  REQUIRE(failure.empty());
}

TEST_CASE("gc: writers, readers and the background collector together", "[gc][concurrency]") {
  // Each writer owns a group of rows and moves amounts between them (k is the balance), so
  // every snapshot sees each group's total unchanged; some transactions roll back to a
  // savepoint or roll back entirely. Readers check totals and index agreement in their
  // snapshots while scans collect cooperatively and the collector thread runs.
  constexpr int kWriters = 3;
  constexpr int kReaders = 2;
  constexpr int kRowsPerGroup = 8;
  constexpr int kTxnsPerWriter = 60;
  constexpr int64_t kInitial = 100;
  constexpr int kMaxReads = 100000;

  Fixture f(GcPolicy::kCombined);
  // Rows: id = group * 1000 + i.
  std::vector<std::map<uint64_t, Row>> groups(kWriters);
  {
    auto txn = f.Begin();
    for (int g = 0; g < kWriters; ++g) {
      for (int i = 0; i < kRowsPerGroup; ++i) {
        Row r{int64_t{g * 1000 + i}, kInitial, std::string("init")};
        groups[g][VALUE_OR_FAIL(txn->Insert(f.t, r)).value] = r;
      }
    }
    REQUIRE_OK(txn->Commit());
  }

  ErrorLog errors;
  std::atomic<int> writers_left{kWriters};
  std::vector<std::thread> threads;
  for (int g = 0; g < kWriters; ++g) {
    threads.emplace_back([&, g] {
      std::mt19937_64 rng(100 + g);
      std::map<uint64_t, Row>& rows = groups[g];  // this thread's only: committed state
      std::vector<uint64_t> recs;
      for (const auto& [rec, r] : rows) recs.push_back(rec);
      for (int n = 0; n < kTxnsPerWriter && errors.count() == 0; ++n) {
        absl::StatusOr<std::unique_ptr<Transaction>> txn = f.db->Begin();
        if (!txn.ok()) {
          errors.Add("Begin: " + txn.status().ToString());
          break;
        }
        std::map<uint64_t, Row> work = rows;
        auto move = [&](std::map<uint64_t, Row>& w, const std::string& tag) -> absl::Status {
          const uint64_t a = recs[rng() % recs.size()], b = recs[rng() % recs.size()];
          const int64_t x = static_cast<int64_t>(rng() % 20);
          Row ra = w[a], rb = w[b];
          ra[1] = KOf(ra) - x;
          ra[2] = tag;
          if (absl::Status s = (*txn)->Update(f.t, RecordId{a}, ra); !s.ok()) return s;
          w[a] = ra;
          rb = w[b];
          rb[1] = KOf(rb) + x;
          rb[2] = tag;
          if (absl::Status s = (*txn)->Update(f.t, RecordId{b}, rb); !s.ok()) return s;
          w[b] = rb;
          return absl::OkStatus();
        };
        absl::Status s = move(work, absl::StrCat("w", g, "-", n));
        const int mode = static_cast<int>(rng() % 4);
        if (s.ok() && mode == 1) {
          // A savepoint rolled back: its moves vanish.
          s = (*txn)->Savepoint("sp");
          std::map<uint64_t, Row> scratch = work;
          if (s.ok()) s = move(scratch, "undone");
          if (s.ok()) s = move(scratch, "undone too");
          if (s.ok()) s = (*txn)->RollbackToSavepoint("sp");
        }
        if (!s.ok()) {
          errors.Add(absl::StrCat("writer ", g, ": ", s.ToString()));
          break;
        }
        if (mode == 2) {
          if (absl::Status r = (*txn)->Rollback(); !r.ok()) errors.Add("Rollback: " + r.ToString());
          continue;
        }
        if (absl::Status c = (*txn)->Commit(); !c.ok()) {
          errors.Add(absl::StrCat("writer ", g, " commit: ", c.ToString()));
          break;
        }
        rows = std::move(work);
      }
      writers_left.fetch_sub(1);
    });
  }
  std::atomic<int> reads{0};
  for (int rd = 0; rd < kReaders; ++rd) {
    threads.emplace_back([&, rd] {
      // At least a few snapshots each, then until the writers are done.
      for (int n = 0; n < kMaxReads && (writers_left.load() > 0 || n < 5) && errors.count() == 0;
           ++n) {
        absl::StatusOr<std::unique_ptr<Transaction>> txn = f.db->Begin();
        if (!txn.ok()) {
          errors.Add("reader Begin: " + txn.status().ToString());
          return;
        }
        absl::StatusOr<std::vector<std::pair<RecordId, Row>>> scan =
            testing::ScanAll(txn->get(), f.t);
        if (!scan.ok()) {
          errors.Add("reader scan: " + scan.status().ToString());
          return;
        }
        if (scan->size() != kWriters * kRowsPerGroup) {
          errors.Add(absl::StrCat("reader ", rd, ": scan saw ", scan->size(), " rows"));
          return;
        }
        std::map<int64_t, int64_t> totals;
        std::set<std::pair<int64_t, uint64_t>> by_scan;
        for (const auto& [rid, row] : *scan) {
          totals[IdOf(row) / 1000] += KOf(row);
          by_scan.emplace(KOf(row), rid.value);
        }
        for (const auto& [g, total] : totals) {
          if (total != kInitial * kRowsPerGroup) {
            errors.Add(absl::StrCat("reader ", rd, ": group ", g, " total ", total));
          }
        }
        auto kall = testing::IndexRange(txn->get(), f.by_k, {}, {});
        if (!kall.ok()) {
          errors.Add("reader index scan: " + kall.status().ToString());
          return;
        }
        std::set<std::pair<int64_t, uint64_t>> by_index;
        for (const auto& [rid, row] : *kall) by_index.emplace(KOf(row), rid.value);
        if (by_index != by_scan || kall->size() != scan->size()) {
          errors.Add(absl::StrCat("reader ", rd, ": k index scan disagrees with the table scan (",
                                  kall->size(), " vs ", scan->size(), " rows)"));
        }
        const auto& [rid0, row0] = (*scan)[n % scan->size()];
        auto hit = (*txn)->Lookup(f.by_id, {IdOf(row0)});
        if (!hit.ok() || !hit->has_value() || (*hit)->first != rid0) {
          errors.Add(absl::StrCat("reader ", rd, ": lookup of id ", IdOf(row0), " failed"));
        }
        if (absl::Status c = (*txn)->Commit(); !c.ok())
          errors.Add("reader commit: " + c.ToString());
        reads.fetch_add(1);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  testing::RequireNoErrors(errors);
  CHECK(reads.load() >= kReaders * 5);

  auto r = f.Begin();
  Model all;
  for (const auto& g : groups) all.insert(g.begin(), g.end());
  f.Verify(r.get(), all, "final values");
  REQUIRE_OK(r->Commit());
  REQUIRE_OK(f.db->CollectGarbage());
  CHECK(f.Stats().back_versions == 0);
  ValidationReport rep = f.RequireValid();
  CHECK(rep.index_entries == 2 * all.size());
}

TEST_CASE("gc: table statistics walk version chains while writers and the collector change them",
          "[gc]") {
  // GetTableStats follows back pointers; the collector cuts chains and frees the lines they
  // pointed at. A walk must never meet a line freed under it (a DataLoss "empty line" before).
  Fixture f(GcPolicy::kCombined);
  Model m = f.Seed(300, 40);
  std::atomic<bool> stop{false};
  ErrorLog log;
  std::thread stats([&] {
    while (!stop.load()) {
      absl::StatusOr<TableStats> s = f.db->GetTableStats(f.t);
      if (!s.ok()) {
        log.Add(s.status().ToString());
        return;
      }
    }
  });
  for (int round = 0; round < 30; ++round) {
    auto txn = f.Begin();
    int n = 0;
    for (const auto& [rec, r] : m) {
      if (++n % 3 != round % 3) continue;
      Row nr = r;
      nr[2] = std::string(20 + (round * 7 + n) % 60, static_cast<char>('a' + round % 26));
      REQUIRE_OK(txn->Update(f.t, RecordId{rec}, nr));
    }
    if (round % 4 == 3) {
      REQUIRE_OK(txn->Rollback());
    } else {
      REQUIRE_OK(txn->Commit());
    }
    if (round % 5 == 0) REQUIRE_OK(f.db->CollectGarbage());
  }
  stop.store(true);
  stats.join();
  testing::RequireNoErrors(log);
  f.RequireValid();
}

}  // namespace
}  // namespace ember
