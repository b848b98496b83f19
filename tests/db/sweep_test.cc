// Database::Sweep: it removes versions of dead transactions and committed garbage no snapshot
// needs (with their index entries), keeps what an older snapshot still sees, moves the OIT past
// the dead transactions only once their versions are gone (and that survives a reopen, where
// every transaction below the OIT reads as committed), gives the same logical result on any
// number of workers, runs beside writers, and an I/O error in one worker fails it with nothing
// lost and the OIT where it was.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ember/ember.h"
#include "engine/db/database_impl.h"
#include "tests/support/big_table.h"
#include "tests/support/db_util.h"
#include "tests/support/fault_db.h"

namespace ember {
namespace {

using testing::CreateOptions;
using testing::Fill;
using testing::IsError;
using testing::MakeBig;
using testing::OpenOrFail;
using testing::RequireValid;
using testing::ScanAll;
using testing::TempDb;

Options SweepOptionsFor(uint32_t cache_pages = 512) {
  Options o = CreateOptions(4096, cache_pages);
  o.gc_policy = GcPolicy::kCooperative;  // nothing but the sweep collects (no reads below)
  o.max_parallel_workers = 4;
  return o;
}

// Every row's field, by id, as `txn` sees them.
std::map<int64_t, int64_t> Fields(Transaction* txn, const Table& t) {
  std::map<int64_t, int64_t> out;
  for (const auto& [id, row] : VALUE_OR_FAIL(ScanAll(txn, t))) {
    out[std::get<int64_t>(row[0])] = std::get<int64_t>(row[1]);
  }
  return out;
}

TEST_CASE("sweep: versions of a dead transaction go, and the OIT passes it", "[sweep]") {
  TempDb tmp;
  const Options o = SweepOptionsFor();
  auto db = OpenOrFail(tmp.path(), o);
  Table t = MakeBig(db.get());
  std::vector<RecordId> ids = Fill(db.get(), t, 3000);
  uint64_t dead_id;
  {
    TransactionOptions to;
    to.no_savepoint = true;  // the rollback leaves dead versions behind
    auto txn = VALUE_OR_FAIL(db->Begin(to));
    dead_id = db->stats().next_transaction - 1;
    for (int i = 0; i < 3000; ++i) {
      REQUIRE_OK(txn->Update(t, ids[i], {int64_t{i}, int64_t{i + 100000}, std::string(100, 'd')}));
    }
    REQUIRE_OK(txn->Rollback());
  }
  REQUIRE(VALUE_OR_FAIL(db->GetTableStats(t)).dead_versions == 3000);
  CHECK(db->stats().oldest_interesting <= dead_id);

  SweepOptions so;
  so.workers = 2;
  SweepResult r = VALUE_OR_FAIL(db->Sweep(so));
  CHECK(r.workers == 2);
  CHECK(r.versions_removed == 3000);
  CHECK(r.index_entries_removed == 3000);  // the dead versions' field keys
  CHECK(r.records_kept == 0);
  CHECK(r.pages_visited > 0);
  CHECK(r.oit_before <= dead_id);
  CHECK(r.oit_after > dead_id);
  CHECK(db->stats().oldest_interesting > dead_id);
  CHECK(VALUE_OR_FAIL(db->GetTableStats(t)).dead_versions == 0);
  RequireValid(db.get(), "after the sweep");
  // A second sweep finds nothing.
  SweepResult again = VALUE_OR_FAIL(db->Sweep(so));
  CHECK(again.versions_removed == 0);

  // Reopened, every transaction below the OIT reads as committed: nothing of the dead one may
  // be left to come back.
  REQUIRE_OK(db->Close());
  db = OpenOrFail(tmp.path(), o);
  CHECK(db->stats().oldest_interesting > dead_id);
  t = VALUE_OR_FAIL(db->GetTable("big"));
  Index by_field = VALUE_OR_FAIL(db->GetIndex("big_field"));
  auto r2 = VALUE_OR_FAIL(db->Begin());
  std::map<int64_t, int64_t> f = Fields(r2.get(), t);
  REQUIRE(f.size() == 3000);
  for (const auto& [id, field] : f) REQUIRE(field == id);
  CHECK_FALSE(VALUE_OR_FAIL(r2->Lookup(by_field, {int64_t{100007}})).has_value());
  CHECK(VALUE_OR_FAIL(r2->Lookup(by_field, {int64_t{7}})).has_value());
  REQUIRE_OK(r2->Commit());
  RequireValid(db.get(), "after reopen");
}

TEST_CASE("sweep: committed garbage goes only when no snapshot needs it", "[sweep]") {
  TempDb tmp;
  auto db = OpenOrFail(tmp.path(), SweepOptionsFor());
  Table t = MakeBig(db.get());
  std::vector<RecordId> ids = Fill(db.get(), t, 1000);
  auto old = VALUE_OR_FAIL(db->Begin());  // sees field == id
  {
    auto w = VALUE_OR_FAIL(db->Begin());
    for (int i = 0; i < 1000; ++i) {
      REQUIRE_OK(w->Update(t, ids[i], {int64_t{i}, int64_t{-i}, std::string(100, 'u')}));
    }
    for (int i = 0; i < 1000; i += 10) REQUIRE_OK(w->Delete(t, ids[i]));
    REQUIRE_OK(w->Commit());
  }
  SweepResult kept = VALUE_OR_FAIL(db->Sweep());
  CHECK(kept.versions_removed == 0);
  CHECK(kept.records_kept == 1000);
  std::map<int64_t, int64_t> f = Fields(old.get(), t);
  REQUIRE(f.size() == 1000);
  for (const auto& [id, field] : f) REQUIRE(field == id);
  REQUIRE_OK(old->Commit());

  SweepResult swept = VALUE_OR_FAIL(db->Sweep());
  CHECK(swept.records_kept == 0);
  CHECK(swept.records_removed == 100);  // the deleted rows
  CHECK(swept.versions_removed >= 1000);
  TableStats st = VALUE_OR_FAIL(db->GetTableStats(t));
  CHECK(st.back_versions == 0);
  CHECK(st.delete_stubs == 0);
  CHECK(st.records == 900);
  auto r = VALUE_OR_FAIL(db->Begin());
  f = Fields(r.get(), t);
  REQUIRE(f.size() == 900);
  for (const auto& [id, field] : f) REQUIRE(field == -id);
  REQUIRE_OK(r->Commit());
  RequireValid(db.get(), "after the sweeps");
}

// The same random history on two databases; one swept on 1 worker, the other on 4.
struct History {
  TempDb tmp;
  std::unique_ptr<Database> db;
  Table t;
  explicit History(uint64_t seed) {
    db = OpenOrFail(tmp.path(), SweepOptionsFor(64));  // pages are read back: not all cached
    t = MakeBig(db.get());
    std::vector<RecordId> ids = Fill(db.get(), t, 4000);
    std::mt19937_64 rng(seed);
    for (int round = 0; round < 12; ++round) {
      TransactionOptions to;
      to.no_savepoint = round % 3 == 0;
      auto w = VALUE_OR_FAIL(db->Begin(to));
      for (int i = 0; i < 400; ++i) {
        const size_t k = rng() % ids.size();
        const int64_t v = static_cast<int64_t>(rng() % 50);
        absl::Status s = w->Update(t, ids[k], {static_cast<int64_t>(k), v, std::string(50, 'x')});
        REQUIRE((s.ok() || absl::IsNotFound(s)));
      }
      if (round % 4 == 1) {
        absl::Status ds = w->Delete(t, ids[rng() % ids.size()]);
        REQUIRE((ds.ok() || absl::IsNotFound(ds)));
      }
      if (rng() % 2 == 0) {
        REQUIRE_OK(w->Commit());
      } else {
        REQUIRE_OK(w->Rollback());
      }
    }
  }
};

TEST_CASE("sweep: 1 and 4 workers leave the same database", "[sweep]") {
  History a(7), b(7);
  SweepOptions one, four;
  one.workers = 1;
  four.workers = 4;
  SweepResult ra = VALUE_OR_FAIL(a.db->Sweep(one));
  SweepResult rb = VALUE_OR_FAIL(b.db->Sweep(four));
  CHECK(ra.versions_removed == rb.versions_removed);
  CHECK(ra.index_entries_removed == rb.index_entries_removed);
  CHECK(ra.versions_removed > 0);
  TableStats sa = VALUE_OR_FAIL(a.db->GetTableStats(a.t));
  TableStats sb = VALUE_OR_FAIL(b.db->GetTableStats(b.t));
  CHECK(sa.records == sb.records);
  CHECK(sb.back_versions == 0);
  CHECK(sb.dead_versions == 0);
  CHECK(sa.back_versions == sb.back_versions);
  // The same pages flagged swept, and a second sweep of either skips them all.
  CHECK(ra.pages_flagged == rb.pages_flagged);
  CHECK(sa.swept_pages == sb.swept_pages);
  CHECK(sa.swept_pages == ra.pages_flagged);
  CHECK(ra.pages_flagged > 0);
  SweepResult ra2 = VALUE_OR_FAIL(a.db->Sweep(four));
  SweepResult rb2 = VALUE_OR_FAIL(b.db->Sweep(one));
  CHECK(ra2.pages_skipped == ra.pages_flagged);
  CHECK(rb2.pages_skipped == rb.pages_flagged);
  CHECK(ra2.versions_removed == 0);
  CHECK(rb2.versions_removed == 0);
  auto ta = VALUE_OR_FAIL(a.db->Begin());
  auto tb = VALUE_OR_FAIL(b.db->Begin());
  CHECK(Fields(ta.get(), a.t) == Fields(tb.get(), b.t));
  Index fa = VALUE_OR_FAIL(a.db->GetIndex("big_field"));
  Index fb = VALUE_OR_FAIL(b.db->GetIndex("big_field"));
  for (int64_t v = 0; v < 50; ++v) {
    auto xa = VALUE_OR_FAIL(testing::IndexRange(ta.get(), fa, {v}, {v}));
    auto xb = VALUE_OR_FAIL(testing::IndexRange(tb.get(), fb, {v}, {v}));
    REQUIRE(xa.size() == xb.size());
  }
  REQUIRE_OK(ta->Commit());
  REQUIRE_OK(tb->Commit());
  RequireValid(a.db.get(), "serial");
  RequireValid(b.db.get(), "parallel");
}

TEST_CASE("sweep: beside writers, nothing visible is lost", "[sweep][concurrency]") {
  TempDb tmp;
  Options o = SweepOptionsFor(256);
  o.gc_policy = GcPolicy::kCombined;  // the collector and readers collect too, at once
  auto db = OpenOrFail(tmp.path(), o);
  Table t = MakeBig(db.get());
  std::vector<RecordId> ids = Fill(db.get(), t, 2000);
  // Each writer owns the rows i % 2 == w and keeps the value it last committed.
  std::vector<std::map<size_t, int64_t>> model(2);
  std::atomic<bool> stop{false};
  testing::ErrorLog errors;
  auto writer = [&](int me) {
    std::mt19937_64 rng(static_cast<uint64_t>(me) + 1);
    while (!stop.load()) {
      TransactionOptions to;
      to.no_savepoint = rng() % 2 == 0;
      absl::StatusOr<std::unique_ptr<Transaction>> w = db->Begin(to);
      if (!w.ok()) return errors.Add(w.status().ToString());
      std::map<size_t, int64_t> changes;
      for (int i = 0; i < 50; ++i) {
        const size_t k = (rng() % 1000) * 2 + static_cast<size_t>(me);
        const int64_t v = static_cast<int64_t>(rng() % 1000000);
        absl::Status s =
            (*w)->Update(t, ids[k], {static_cast<int64_t>(k), v, std::string(100, 'w')});
        if (!s.ok()) return errors.Add(s.ToString());
        changes[k] = v;
      }
      if (rng() % 3 == 0) {
        if (absl::Status s = (*w)->Rollback(); !s.ok()) return errors.Add(s.ToString());
      } else {
        if (absl::Status s = (*w)->Commit(); !s.ok()) return errors.Add(s.ToString());
        for (const auto& [k, v] : changes) model[static_cast<size_t>(me)][k] = v;
      }
    }
  };
  std::thread w0(writer, 0), w1(writer, 1);
  for (int i = 0; i < 6; ++i) {
    SweepOptions so;
    so.workers = 1 + i % 3;
    CHECK_OK(db->Sweep(so).status());
  }
  stop.store(true);
  w0.join();
  w1.join();
  RequireNoErrors(errors);
  REQUIRE_OK(db->Sweep().status());
  auto r = VALUE_OR_FAIL(db->Begin());
  std::map<int64_t, int64_t> f = Fields(r.get(), t);
  REQUIRE(f.size() == 2000);
  for (size_t k = 0; k < 2000; ++k) {
    const auto& m = model[k % 2];
    auto it = m.find(k);
    REQUIRE(f[static_cast<int64_t>(k)] == (it == m.end() ? static_cast<int64_t>(k) : it->second));
  }
  REQUIRE_OK(r->Commit());
  CHECK(VALUE_OR_FAIL(db->GetTableStats(t)).dead_versions == 0);
  RequireValid(db.get(), "after the sweeps");
}

TEST_CASE("sweep: a read error in one worker fails the sweep, loses nothing, keeps the OIT",
          "[sweep]") {
  TempDb tmp;
  Options o = SweepOptionsFor(32);  // the table does not fit: the sweep reads
  o.use_io_uring = false;
  testing::FaultDb fdb = testing::CreateFaultDb(tmp.path(), o);
  io::FaultFile* ff = fdb.ff;
  std::unique_ptr<db::DatabaseImpl>& d = fdb.db;
  Database* db = d.get();
  Table t = MakeBig(db);
  std::vector<RecordId> ids = Fill(db, t, 3000);
  {
    TransactionOptions to;
    to.no_savepoint = true;
    auto txn = VALUE_OR_FAIL(db->Begin(to));
    for (int i = 0; i < 3000; ++i) {
      REQUIRE_OK(txn->Update(t, ids[i], {int64_t{i}, int64_t{-1}, std::string(100, 'd')}));
    }
    REQUIRE_OK(txn->Rollback());
  }
  const uint64_t oit = db->stats().oldest_interesting;
  ff->FailReadAfter(20, EIO, /*sticky=*/true);
  SweepOptions so;
  so.workers = 4;
  absl::StatusOr<SweepResult> r = db->Sweep(so);
  ff->FailReadAfter(0, 0);
  INFO(r.status().ToString());
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() != absl::StatusCode::kCancelled);
  CHECK(db->stats().oldest_interesting == oit);
  auto rd = VALUE_OR_FAIL(db->Begin());
  std::map<int64_t, int64_t> f = Fields(rd.get(), t);
  REQUIRE(f.size() == 3000);
  for (const auto& [id, field] : f) REQUIRE(field == id);
  REQUIRE_OK(rd->Commit());
  RequireValid(db, "after the failed sweep");
  SweepResult ok = VALUE_OR_FAIL(db->Sweep(so));
  CHECK(ok.oit_after > oit);
  CHECK(VALUE_OR_FAIL(db->GetTableStats(t)).dead_versions == 0);
  REQUIRE_OK(db->Close());
}

TEST_CASE("sweep: the automatic sweep starts past the interval, not before", "[sweep]") {
  TempDb tmp;
  Options o = SweepOptionsFor();
  o.sweep_interval = 200;
  auto db = OpenOrFail(tmp.path(), o);
  Table t = MakeBig(db.get());
  std::vector<RecordId> ids = Fill(db.get(), t, 500);
  uint64_t dead_id;
  {
    TransactionOptions to;
    to.no_savepoint = true;
    auto txn = VALUE_OR_FAIL(db->Begin(to));
    dead_id = db->stats().next_transaction - 1;
    for (int i = 0; i < 500; ++i) {
      REQUIRE_OK(txn->Update(t, ids[i], {int64_t{i}, int64_t{-1}, std::string(10, 'd')}));
    }
    REQUIRE_OK(txn->Rollback());
  }
  auto run = [&](int n) {
    for (int i = 0; i < n; ++i) REQUIRE_OK(VALUE_OR_FAIL(db->Begin())->Commit());
  };
  run(150);  // the gap is below the interval
  CHECK(db->stats().automatic_sweeps == 0);
  CHECK(db->stats().oldest_interesting <= dead_id);
  // A snapshot held open keeps the oldest snapshot near the OIT: no sweep either.
  auto held = VALUE_OR_FAIL(db->Begin());
  run(300);
  CHECK(db->stats().automatic_sweeps == 0);
  REQUIRE_OK(held->Commit());
  run(100);  // past the interval now (checked at most every 64 transactions)
  CHECK(db->stats().automatic_sweeps == 1);
  for (int i = 0; i < 20000 && db->stats().sweeps == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(db->stats().sweeps == 1);
  CHECK(db->stats().oldest_interesting > dead_id);
  CHECK(VALUE_OR_FAIL(db->GetTableStats(t)).dead_versions == 0);
  REQUIRE_OK(db->Close());
}

TEST_CASE("sweep: Close stops an automatic sweep cleanly", "[sweep]") {
  TempDb tmp;
  Options o = SweepOptionsFor(64);
  o.sweep_interval = 1;
  {
    auto db = OpenOrFail(tmp.path(), o);
    Table t = MakeBig(db.get());
    std::vector<RecordId> ids = Fill(db.get(), t, 20000);
    TransactionOptions to;
    to.no_savepoint = true;
    auto txn = VALUE_OR_FAIL(db->Begin(to));
    for (int i = 0; i < 20000; ++i) {
      REQUIRE_OK(txn->Update(t, ids[i], {int64_t{i}, int64_t{-1}, std::string(10, 'd')}));
    }
    REQUIRE_OK(txn->Rollback());
    for (int i = 0; i < 70 && db->stats().automatic_sweeps == 0; ++i) {
      REQUIRE_OK(VALUE_OR_FAIL(db->Begin())->Commit());
    }
    CHECK(db->stats().automatic_sweeps == 1);
    REQUIRE_OK(db->Close());  // whether the sweep was done or not
  }
  o.sweep_interval = 0;  // what the first close left, read quietly
  auto db = OpenOrFail(tmp.path(), o);
  Table t = VALUE_OR_FAIL(db->GetTable("big"));
  auto r = VALUE_OR_FAIL(db->Begin());
  std::map<int64_t, int64_t> f = Fields(r.get(), t);
  REQUIRE(f.size() == 20000);
  for (const auto& [id, field] : f) REQUIRE(field == id);
  REQUIRE_OK(r->Commit());
  RequireValid(db.get(), "after reopen");
}

// Power loss at every sync of a sweep (the k-th fails, then everything not synced is lost):
// after the reopen every committed value is there and nothing of the dead transaction shows,
// whether or not the header had recorded the OIT past it (below the OIT a reopened database
// reads every transaction as committed, so a dead version left behind would come back).
TEST_CASE("sweep: a power loss at any sync of a sweep loses nothing and revives nothing",
          "[sweep]") {
  bool completed = false;
  uint64_t tried = 0;
  for (uint64_t k = 1; k <= 60 && !completed; ++k) {
    INFO("the " << k << "th sync of the sweep fails");
    TempDb tmp;
    Options o = SweepOptionsFor(16);  // evictions sync too
    o.use_io_uring = false;
    o.sweep_interval = 0;
    uint64_t dead_id = 0;
    {
      testing::FaultDb fdb = testing::CreateFaultDb(tmp.path(), o);
      io::FaultFile* ff = fdb.ff;
      std::unique_ptr<db::DatabaseImpl>& d = fdb.db;
      Database* db = d.get();
      Table t = MakeBig(db);
      std::vector<RecordId> ids = Fill(db, t, 1500);
      {
        TransactionOptions to;
        to.no_savepoint = true;
        auto txn = VALUE_OR_FAIL(db->Begin(to));
        dead_id = db->stats().next_transaction - 1;
        for (int i = 0; i < 1500; ++i) {
          REQUIRE_OK(txn->Update(t, ids[i], {int64_t{i}, int64_t{-1}, std::string(100, 'd')}));
        }
        REQUIRE_OK(txn->Rollback());
      }
      {
        auto txn = VALUE_OR_FAIL(db->Begin());
        for (int i = 0; i < 1500; i += 3) {
          REQUIRE_OK(txn->Update(t, ids[i], {int64_t{i}, int64_t{i * 10}, std::string(100, 'c')}));
        }
        REQUIRE_OK(txn->Commit());
      }
      const uint64_t synced = ff->syncs();
      ff->FailSyncAfter(k, EIO, /*sticky=*/true);
      SweepOptions so;
      so.workers = 2;
      completed = db->Sweep(so).ok() && ff->syncs() - synced < k;
      tried = k;
      d->TEST_SimulateCrash();
      ff->FailSyncAfter(0, 0);
      REQUIRE_OK(ff->DropUnsynced());
      d.reset();
    }
    auto db = OpenOrFail(tmp.path(), o);
    Table t = VALUE_OR_FAIL(db->GetTable("big"));
    auto r = VALUE_OR_FAIL(db->Begin());
    std::map<int64_t, int64_t> f = Fields(r.get(), t);
    REQUIRE(f.size() == 1500);
    for (const auto& [id, field] : f) REQUIRE(field == (id % 3 == 0 ? id * 10 : id));
    Index by_field = VALUE_OR_FAIL(db->GetIndex("big_field"));
    CHECK_FALSE(VALUE_OR_FAIL(r->Lookup(by_field, {int64_t{-1}})).has_value());
    REQUIRE_OK(r->Commit());
    ValidationReport v = VALUE_OR_FAIL(db->Validate());
    INFO((v.errors.empty() ? std::string() : v.errors[0]));
    CHECK(v.errors.empty());
    // A later sweep finishes the job and the OIT passes the dead transaction.
    REQUIRE_OK(db->Sweep().status());
    CHECK(db->stats().oldest_interesting > dead_id);
    CHECK(VALUE_OR_FAIL(db->GetTableStats(t)).dead_versions == 0);
  }
  INFO(tried << " sync points tried");
  CHECK(completed);  // the sync points ran out: every one of them was tried
  CHECK(tried > 2);
}

}  // namespace
}  // namespace ember
