// Rows updated again and again in one transaction, each update its own statement (an
// application's loop over its working set): the version chains stay whole while full pages
// make room for growing heads by moving back versions to secondary pages, every row reads back
// as last written, and Validate is clean after every pass, after the commit and after a reopen.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ember/ember.h"
#include "tests/support/db_util.h"

namespace ember {
namespace {

using testing::CreateOptions;
using testing::OpenOrFail;
using testing::TempDb;

// TST(ID, VAL) with an index on VAL, as in the mass-update experiment.
struct Tst {
  TempDb tmp;
  Options opts;
  std::unique_ptr<Database> db;
  Table t;
  std::vector<RecordId> rids;  // by id
  std::vector<int64_t> vals;   // the committed VAL of each id

  explicit Tst(int64_t rows, Options o = CreateOptions(4096, 2048)) : opts(std::move(o)) {
    db = OpenOrFail(tmp.path(), opts);
    t = VALUE_OR_FAIL(
        db->CreateTable({"tst", {{"id", ColumnType::kInt64, false}, {"val", ColumnType::kInt64}}}));
    REQUIRE_OK(db->CreateIndex({"tst_val", "tst", {"val"}, false}).status());
    auto txn = VALUE_OR_FAIL(db->Begin());
    for (int64_t id = 0; id < rows; ++id) {
      rids.push_back(VALUE_OR_FAIL(txn->Insert(t, {id, id})));
      vals.push_back(id);
    }
    REQUIRE_OK(txn->Commit());
  }

  void RequireValid(const std::string& when) {
    ValidationReport r = VALUE_OR_FAIL(db->Validate());
    INFO(when);
    REQUIRE(r.errors == std::vector<std::string>{});
  }

  // Every row holds `want[id]`, read by record id and found through the VAL index.
  void RequireRows(Transaction* txn, const std::vector<int64_t>& want) {
    Index by_val = VALUE_OR_FAIL(db->GetIndex("tst_val"));
    for (size_t id = 0; id < want.size(); ++id) {
      std::optional<Row> row = VALUE_OR_FAIL(txn->Get(t, rids[id]));
      REQUIRE(row.has_value());
      REQUIRE(std::get<int64_t>((*row)[1]) == want[id]);
    }
    size_t found = 0;
    auto cur = VALUE_OR_FAIL(txn->IndexScan(by_val, {}, {}));
    int64_t last = INT64_MIN;
    while (cur->Valid()) {
      const int64_t v = std::get<int64_t>(cur->row()[1]);
      REQUIRE(v >= last);  // key order
      REQUIRE(v == want[static_cast<size_t>(std::get<int64_t>(cur->row()[0]))]);
      last = v;
      ++found;
      REQUIRE_OK(cur->Next());
    }
    REQUIRE(found == want.size());
  }

  // `passes` passes over the first `set` rows in a shuffled order, each update a statement;
  // VAL grows by `step` each pass (so its encoding, and the row, grow too). Validate after every
  // pass. Returns the values written.
  std::vector<int64_t> Passes(Transaction* txn, int64_t set, int passes, int64_t step,
                              uint64_t seed) {
    std::vector<int64_t> want = vals;
    std::vector<int64_t> order(static_cast<size_t>(set));
    for (int64_t i = 0; i < set; ++i) order[static_cast<size_t>(i)] = i;
    std::mt19937_64 rng(seed);
    for (int p = 0; p < passes; ++p) {
      std::shuffle(order.begin(), order.end(), rng);
      for (int64_t id : order) {
        want[static_cast<size_t>(id)] += step;
        INFO("pass " << p << " id " << id);
        REQUIRE_OK(txn->Update(t, rids[static_cast<size_t>(id)], {id, want[id]}));
      }
      RequireValid("after pass " + std::to_string(p));
    }
    return want;
  }
};

TEST_CASE(
    "repeated updates: back versions moved off a full page keep every chain through them "
    "whole (chains that run from a secondary page back to the primary one)",
    "[db][update]") {
  const bool no_savepoint = GENERATE(false, true);
  const uint64_t seed = GENERATE(42, 7);
  INFO("no_savepoint " << no_savepoint << " seed " << seed);
  Tst db(1000);
  // A committed history for row 0 first: its chain then runs head -> back version stored on a
  // secondary page -> the original on the primary page: a full page that moves that last link
  // away must repoint the version on the secondary page that names it.
  {
    auto txn = VALUE_OR_FAIL(db.db->Begin());
    for (int i = 1; i <= 10; ++i) REQUIRE_OK(txn->Update(db.t, db.rids[0], {int64_t{0}, i}));
    REQUIRE_OK(txn->Commit());
    db.vals[0] = 10;
  }
  TransactionOptions to;
  to.no_savepoint = no_savepoint;
  auto txn = VALUE_OR_FAIL(db.db->Begin(to));
  std::vector<int64_t> want = db.Passes(txn.get(), 1000, 6, 1, seed);
  db.RequireRows(txn.get(), want);
  REQUIRE_OK(txn->Commit());
  db.RequireValid("after commit");
  REQUIRE_OK(db.db->Close());
  db.db = OpenOrFail(db.tmp.path(), [&] {
    Options o = db.opts;
    o.create_if_missing = false;
    return o;
  }());
  db.t = VALUE_OR_FAIL(db.db->GetTable("tst"));
  db.RequireValid("after reopen");
  auto check = VALUE_OR_FAIL(db.db->Begin());
  db.RequireRows(check.get(), want);
}

TEST_CASE("repeated updates: rollback after many passes over a working set restores every row",
          "[db][update]") {
  Tst db(1000);
  auto txn = VALUE_OR_FAIL(db.db->Begin());
  (void)db.Passes(txn.get(), 1000, 5, 3, 11);
  REQUIRE_OK(txn->Rollback());
  db.RequireValid("after rollback");
  auto check = VALUE_OR_FAIL(db.db->Begin());
  db.RequireRows(check.get(), db.vals);
}

// Page writes before the commit, by the whole database (the cooperative policy: no collector
// thread writing pages of its own meanwhile) and by the transaction's counters.
TEST_CASE(
    "repeated updates: a transaction whose pages fit in the cache writes nothing before "
    "its commit",
    "[db][update][exhaustive]") {
  struct Layout {
    const char* name;
    int64_t rows;  // the working set is the whole table
  };
  const Layout layout = GENERATE(Layout{"rows on one page", 60}, Layout{"across pages", 10000});
  const bool key_changes = GENERATE(true, false);
  // 0: no_savepoint; 1: the undo log; 2: a savepoint every 100 updates, released; 3: the same,
  // rolled back every other time.
  const int mode = GENERATE(0, 1, 2, 3);
  const bool commit = GENERATE(true, false);
  INFO(layout.name << ", key changes " << key_changes << ", mode " << mode << ", "
                   << (commit ? "commit" : "rollback"));
  Options o = CreateOptions(8192, 2048);
  o.gc_policy = GcPolicy::kCooperative;
  Tst db(layout.rows, o);
  TransactionOptions to;
  to.no_savepoint = mode == 0;
  auto txn = VALUE_OR_FAIL(db.db->Begin(to));
  const Counters before = db.db->stats().pages;
  std::vector<int64_t> want = db.vals;
  std::vector<int64_t> at_savepoint;
  std::vector<int64_t> order(static_cast<size_t>(layout.rows));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::mt19937_64 rng(5);
  int64_t n = 0;
  for (int pass = 0; pass < 10; ++pass) {
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t id : order) {
      if (mode >= 2 && n % 100 == 0) {
        REQUIRE_OK(txn->Savepoint("sp"));
        at_savepoint = want;
      }
      const size_t i = static_cast<size_t>(id);
      if (key_changes) want[i] += 1;
      REQUIRE_OK(txn->Update(db.t, db.rids[i], {id, want[i]}));
      if (mode >= 2 && n % 100 == 99) {
        if (mode == 3 && (n / 100) % 2 == 1) {
          REQUIRE_OK(txn->RollbackToSavepoint("sp"));
          want = at_savepoint;
        }
        REQUIRE_OK(txn->ReleaseSavepoint("sp"));
      }
      ++n;
    }
  }
  const Counters now = db.db->stats().pages;
  struct {
    uint64_t writes, dw_writes, cycle_writes;
  } during{now.writes - before.writes, now.dw_writes - before.dw_writes,
           now.cycle_writes - before.cycle_writes};
  CHECK(during.writes == 0);
  CHECK(during.dw_writes == 0);
  CHECK(during.cycle_writes == 0);
  CHECK(txn->counters().writes == 0);
  db.RequireRows(txn.get(), want);
  if (!commit) {
    // The end writes no page early either: an undo of every row frees the back versions it
    // unlinks after writing its pages (however many), and a dead transaction's end writes
    // nothing at all, leaving what it unlinked to the collection of its versions.
    REQUIRE_OK(txn->Rollback());
    const Counters end = db.db->stats().pages;
    CHECK(end.cycle_writes == now.cycle_writes);
    if (mode == 0) CHECK(end.writes == now.writes);
    auto check = VALUE_OR_FAIL(db.db->Begin());
    db.RequireRows(check.get(), db.vals);  // a scan, which collects the dead versions
    REQUIRE_OK(check->Commit());
    db.RequireValid("after rollback");
    return;
  }
  REQUIRE_OK(txn->Commit());
  const Counters after = db.db->stats().pages;
  CHECK(after.writes + after.dw_writes >
        before.writes + before.dw_writes);  // the commit wrote them
  db.RequireValid("after commit");
  auto check = VALUE_OR_FAIL(db.db->Begin());
  db.RequireRows(check.get(), want);
}

// Rows wider than a page are stored in fragments; a transaction that overwrites its own
// version in place leaves the old fragments unreachable. A rolled-back transaction that did so
// many times writes nothing at its end, and the fragments it left are freed by the collection
// of its versions, so rolling such transactions back again and again does not grow the file.
TEST_CASE(
    "repeated updates: fragments left by rolled-back transactions are freed by the "
    "collection, writing nothing at the rollback",
    "[db][update]") {
  const bool no_savepoint = GENERATE(true, false);
  INFO("no_savepoint " << no_savepoint);
  Options o = CreateOptions(4096, 2048);
  o.gc_policy = GcPolicy::kCooperative;
  TempDb tmp;
  auto db = OpenOrFail(tmp.path(), o);
  std::vector<Column> cols{{"id", ColumnType::kInt64, false}};
  const int kParts = 5;  // 5 x 900 incompressible bytes: more than a 4096-byte page
  for (int c = 0; c < kParts; ++c) cols.push_back({"s" + std::to_string(c), ColumnType::kString});
  Table t = VALUE_OR_FAIL(db->CreateTable({"wide", cols}));
  std::mt19937_64 rng(7);
  auto make_row = [&](int64_t id) {
    Row row{id};
    for (int c = 0; c < kParts; ++c) {
      std::string v(900, '\0');
      for (char& ch : v) ch = static_cast<char>('a' + rng() % 26);
      row.push_back(std::move(v));
    }
    return row;
  };
  const int64_t kRows = 40;
  std::vector<RecordId> rids;
  std::vector<Row> committed;
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    for (int64_t id = 0; id < kRows; ++id) {
      committed.push_back(make_row(id));
      rids.push_back(VALUE_OR_FAIL(txn->Insert(t, committed.back())));
    }
    REQUIRE_OK(txn->Commit());
  }
  TransactionOptions to;
  to.no_savepoint = no_savepoint;
  uint64_t pages_after_first = 0;
  for (int round = 0; round < 12; ++round) {
    INFO("round " << round);
    auto txn = VALUE_OR_FAIL(db->Begin(to));
    for (int pass = 0; pass < 4; ++pass) {
      for (int64_t id = 0; id < kRows; ++id) {
        REQUIRE_OK(txn->Update(t, rids[static_cast<size_t>(id)], make_row(id)));
      }
    }
    const Counters before = db->stats().pages;
    REQUIRE_OK(txn->Rollback());
    const Counters after = db->stats().pages;
    CHECK(after.cycle_writes == before.cycle_writes);
    if (no_savepoint) CHECK(after.writes == before.writes);
    // A scan reads every row back as committed and collects the dead versions (and frees what
    // the rollback left).
    auto check = VALUE_OR_FAIL(db->Begin());
    auto cur = VALUE_OR_FAIL(check->Scan(t));
    int64_t seen = 0;
    while (cur->Valid()) {
      REQUIRE(cur->row() == committed[static_cast<size_t>(std::get<int64_t>(cur->row()[0]))]);
      ++seen;
      REQUIRE_OK(cur->Next());
    }
    REQUIRE(seen == kRows);
    cur.reset();
    REQUIRE_OK(check->Commit());
    ValidationReport r = VALUE_OR_FAIL(db->Validate());
    REQUIRE(r.errors == std::vector<std::string>{});
    if (round == 1) pages_after_first = db->stats().page_count;
  }
  // Fragments never freed would take new pages every round (some 200 lines of 900+ bytes).
  CHECK(db->stats().page_count <= pages_after_first + 2);
}

}  // namespace
}  // namespace ember
