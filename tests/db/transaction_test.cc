// Transaction-level tests: snapshot and read-committed visibility, rollback, update conflicts,
// waits, lock time-outs and deadlocks, unique indexes, index lookups and ranges under MVCC,
// the transaction state machine, counters and database statistics.
//
// Tests with a second transaction that must wait run it on a std::thread; the outcome never
// depends on timing (where a thread is given a moment to reach its wait, the result is the same
// whether or not it did).
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ember/ember.h"
#include "engine/db/database_impl.h"
#include "engine/io/file.h"
#include "engine/page/doublewrite_page.h"
#include "tests/support/db_util.h"
#include "tests/support/pass_through_file.h"

namespace ember {
namespace {

using testing::IsError;
using testing::OpenOrFail;
using testing::RowText;
using testing::SameRow;
using testing::TempDb;

// A database with table t(id int64 NOT NULL, k int64, v string), a unique index on id and a
// non-unique index on k.
struct Fixture : testing::TableDb {
  std::unique_ptr<Transaction> Begin(Isolation iso = Isolation::kSnapshot, bool wait = true,
                                     int64_t timeout_ms = -1) {
    TransactionOptions o;
    o.isolation = iso;
    o.wait = wait;
    o.lock_timeout_ms = timeout_ms;
    return VALUE_OR_FAIL(db->Begin(o));
  }

  // Inserts rows (id, id * 10, "v<id>") for the given ids in one committed transaction.
  std::map<int64_t, RecordId> Seed(std::initializer_list<int64_t> ids) {
    auto txn = Begin();
    std::map<int64_t, RecordId> out;
    for (int64_t id : ids) out[id] = VALUE_OR_FAIL(txn->Insert(t, RowFor(id)));
    REQUIRE_OK(txn->Commit());
    return out;
  }
  static Row RowFor(int64_t id, int64_t k_delta = 0) {
    return {id, id * 10 + k_delta, "v" + std::to_string(id)};
  }
};

std::optional<Row> GetRow(Transaction* txn, const Table& t, RecordId id) {
  return VALUE_OR_FAIL(txn->Get(t, id));
}

// The ids (column 0) of the rows a transaction sees in a full scan, in scan order.
std::vector<int64_t> ScanIds(Transaction* txn, const Table& t) {
  std::vector<int64_t> out;
  for (const auto& [rec, row] : VALUE_OR_FAIL(testing::ScanAll(txn, t))) {
    out.push_back(std::get<int64_t>(row[0]));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int64_t> IndexIds(Transaction* txn, const Index& ix, const Row& lo, const Row& hi,
                              bool descending = false) {
  std::vector<int64_t> out;
  for (const auto& [rec, row] : VALUE_OR_FAIL(testing::IndexRange(txn, ix, lo, hi, descending))) {
    out.push_back(std::get<int64_t>(row[0]));
  }
  return out;
}

std::optional<int64_t> LookupId(Transaction* txn, const Index& ix, const Row& key) {
  auto f = VALUE_OR_FAIL(txn->Lookup(ix, key));
  if (!f) return std::nullopt;
  return std::get<int64_t>(f->second[0]);
}

// Runs `fn` on a thread; Wait() joins and returns its status. Started() tells whether the thread
// is about to make its call, Done() whether the call returned.
class Async {
 public:
  explicit Async(std::function<absl::Status()> fn)
      : thread_([this, fn = std::move(fn)] {
          started_.store(true);
          status_ = fn();
          done_.store(true);
        }) {}
  ~Async() {
    if (thread_.joinable()) thread_.join();
  }
  // Waits until the thread has started its call, then gives it a moment to block in it.
  void LetItBlock() {
    while (!started_.load()) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  bool Done() const { return done_.load(); }
  absl::Status Wait() {
    thread_.join();
    return status_;
  }

 private:
  std::atomic<bool> started_{false};
  std::atomic<bool> done_{false};
  absl::Status status_;
  std::thread thread_;
};

// ------------------------------------------------------------------------- visibility

TEST_CASE("a snapshot does not see changes committed after it began, read committed does",
          "[txn]") {
  Fixture f;
  auto recs = f.Seed({1, 2, 3});
  auto snap = f.Begin(Isolation::kSnapshot);
  auto rc = f.Begin(Isolation::kReadCommitted);
  // Both read once before the writer starts (a snapshot is fixed at Begin, not at first read).
  REQUIRE(ScanIds(snap.get(), f.t) == std::vector<int64_t>{1, 2, 3});
  REQUIRE(ScanIds(rc.get(), f.t) == std::vector<int64_t>{1, 2, 3});

  auto w = f.Begin();
  RecordId r4 = VALUE_OR_FAIL(w->Insert(f.t, Fixture::RowFor(4)));
  REQUIRE_OK(w->Update(f.t, recs[1], Row{int64_t{1}, int64_t{111}, std::string("updated")}));
  REQUIRE_OK(w->Delete(f.t, recs[2]));
  // Own changes are visible to the writer, through every access path.
  REQUIRE(ScanIds(w.get(), f.t) == std::vector<int64_t>{1, 3, 4});
  REQUIRE(SameRow(*GetRow(w.get(), f.t, recs[1]),
                  Row{int64_t{1}, int64_t{111}, std::string("updated")}));
  REQUIRE_FALSE(GetRow(w.get(), f.t, recs[2]).has_value());
  REQUIRE(GetRow(w.get(), f.t, r4).has_value());
  REQUIRE(LookupId(w.get(), f.by_id, {int64_t{4}}) == 4);
  REQUIRE_FALSE(LookupId(w.get(), f.by_id, {int64_t{2}}).has_value());
  REQUIRE(LookupId(w.get(), f.by_k, {int64_t{111}}) == 1);
  REQUIRE_FALSE(LookupId(w.get(), f.by_k, {int64_t{10}}).has_value());
  REQUIRE(IndexIds(w.get(), f.by_k, {}, {}) == std::vector<int64_t>{3, 4, 1});

  // Uncommitted changes are invisible to both readers.
  for (Transaction* r : {snap.get(), rc.get()}) {
    REQUIRE(ScanIds(r, f.t) == std::vector<int64_t>{1, 2, 3});
    REQUIRE(SameRow(*GetRow(r, f.t, recs[1]), Fixture::RowFor(1)));
    REQUIRE(GetRow(r, f.t, recs[2]).has_value());
    REQUIRE_FALSE(GetRow(r, f.t, r4).has_value());
    REQUIRE(IndexIds(r, f.by_k, {}, {}) == std::vector<int64_t>{1, 2, 3});
  }
  REQUIRE_OK(w->Commit());

  // The snapshot still sees the old state, through every access path.
  REQUIRE(ScanIds(snap.get(), f.t) == std::vector<int64_t>{1, 2, 3});
  REQUIRE(SameRow(*GetRow(snap.get(), f.t, recs[1]), Fixture::RowFor(1)));
  REQUIRE(SameRow(*GetRow(snap.get(), f.t, recs[2]), Fixture::RowFor(2)));
  REQUIRE_FALSE(GetRow(snap.get(), f.t, r4).has_value());
  REQUIRE(LookupId(snap.get(), f.by_k, {int64_t{10}}) == 1);
  REQUIRE_FALSE(LookupId(snap.get(), f.by_k, {int64_t{111}}).has_value());
  REQUIRE_FALSE(LookupId(snap.get(), f.by_id, {int64_t{4}}).has_value());
  REQUIRE(IndexIds(snap.get(), f.by_id, {}, {}) == std::vector<int64_t>{1, 2, 3});
  REQUIRE(IndexIds(snap.get(), f.by_k, {}, {}, true) == std::vector<int64_t>{3, 2, 1});

  // Read committed sees the new state at its next statement.
  REQUIRE(ScanIds(rc.get(), f.t) == std::vector<int64_t>{1, 3, 4});
  REQUIRE(SameRow(*GetRow(rc.get(), f.t, recs[1]),
                  Row{int64_t{1}, int64_t{111}, std::string("updated")}));
  REQUIRE_FALSE(GetRow(rc.get(), f.t, recs[2]).has_value());
  REQUIRE(LookupId(rc.get(), f.by_id, {int64_t{4}}) == 4);
  REQUIRE(IndexIds(rc.get(), f.by_k, {}, {}) == std::vector<int64_t>{3, 4, 1});

  // A snapshot begun now sees it too.
  auto later = f.Begin();
  REQUIRE(ScanIds(later.get(), f.t) == std::vector<int64_t>{1, 3, 4});
  for (auto* x : {snap.get(), rc.get(), later.get()}) REQUIRE_OK(x->Commit());
}

TEST_CASE("a snapshot ignores changes of transactions that were active when it began", "[txn]") {
  Fixture f;
  auto recs = f.Seed({1, 2});
  auto w = f.Begin();
  REQUIRE_OK(w->Update(f.t, recs[1], Fixture::RowFor(1, 5)));
  auto snap = f.Begin();  // w is active: its change is not in this snapshot even once committed
  REQUIRE_OK(w->Commit());
  REQUIRE(SameRow(*GetRow(snap.get(), f.t, recs[1]), Fixture::RowFor(1)));
  REQUIRE(LookupId(snap.get(), f.by_k, {int64_t{10}}) == 1);
  REQUIRE_FALSE(LookupId(snap.get(), f.by_k, {int64_t{15}}).has_value());
  REQUIRE_OK(snap->Commit());
}

TEST_CASE("rollback hides inserts, updates and deletes, also after reopen", "[txn]") {
  Fixture f;
  auto recs = f.Seed({1, 2, 3});
  RecordId r4;
  auto check = [&](Transaction* r) {
    REQUIRE(ScanIds(r, f.t) == std::vector<int64_t>{1, 2, 3});
    REQUIRE(SameRow(*GetRow(r, f.t, recs[1]), Fixture::RowFor(1)));
    REQUIRE(SameRow(*GetRow(r, f.t, recs[2]), Fixture::RowFor(2)));
    REQUIRE_FALSE(GetRow(r, f.t, r4).has_value());
    REQUIRE_FALSE(LookupId(r, f.by_id, {int64_t{4}}).has_value());
    REQUIRE_FALSE(LookupId(r, f.by_k, {int64_t{999}}).has_value());
    REQUIRE(LookupId(r, f.by_k, {int64_t{10}}) == 1);
    REQUIRE(IndexIds(r, f.by_id, {}, {}) == std::vector<int64_t>{1, 2, 3});
    REQUIRE(IndexIds(r, f.by_k, {}, {}) == std::vector<int64_t>{1, 2, 3});
  };
  SECTION("explicit rollback") {
    auto w = f.Begin();
    r4 = VALUE_OR_FAIL(w->Insert(f.t, Fixture::RowFor(4)));
    REQUIRE_OK(w->Update(f.t, recs[1], Row{int64_t{1}, int64_t{999}, std::string("x")}));
    REQUIRE_OK(w->Update(f.t, recs[1], Row{int64_t{1}, int64_t{998}, std::string("y")}));
    REQUIRE_OK(w->Delete(f.t, recs[2]));
    REQUIRE_OK(w->Rollback());
  }
  SECTION("destroyed while active") {
    auto w = f.Begin();
    r4 = VALUE_OR_FAIL(w->Insert(f.t, Fixture::RowFor(4)));
    REQUIRE_OK(w->Update(f.t, recs[1], Row{int64_t{1}, int64_t{999}, std::string("x")}));
    REQUIRE_OK(w->Delete(f.t, recs[2]));
  }
  SECTION("active at close") {
    auto w = f.Begin();
    r4 = VALUE_OR_FAIL(w->Insert(f.t, Fixture::RowFor(4)));
    REQUIRE_OK(w->Update(f.t, recs[1], Row{int64_t{1}, int64_t{999}, std::string("x")}));
    REQUIRE_OK(w->Delete(f.t, recs[2]));
    REQUIRE_OK(f.db->Close());
    w.reset();
    f.db.reset();
    f.Open(false);
  }
  {
    auto r = f.Begin();
    check(r.get());
    REQUIRE_OK(r->Commit());
  }
  f.Reopen();
  {
    auto r = f.Begin();
    check(r.get());
    // The rolled-back versions do not get in the way of new writers.
    REQUIRE_OK(r->Update(f.t, recs[1], Fixture::RowFor(1, 1)));
    REQUIRE_OK(r->Update(f.t, recs[2], Fixture::RowFor(2, 1)));
    REQUIRE_OK(r->Insert(f.t, Fixture::RowFor(4)).status());
    REQUIRE_OK(r->Commit());
  }
  auto r = f.Begin();
  REQUIRE(ScanIds(r.get(), f.t) == std::vector<int64_t>{1, 2, 3, 4});
  REQUIRE(LookupId(r.get(), f.by_k, {int64_t{11}}) == 1);
  REQUIRE(LookupId(r.get(), f.by_k, {int64_t{21}}) == 2);
  REQUIRE_OK(r->Commit());
  r.reset();
  ValidationReport rep = VALUE_OR_FAIL(f.db->Validate());
  INFO("first error: " << (rep.errors.empty() ? std::string() : rep.errors[0]));
  REQUIRE(rep.ok());
}

// ------------------------------------------------------------------------- conflicts

TEST_CASE("no-wait update of a row changed by an active transaction is an update conflict",
          "[txn]") {
  Fixture f;
  auto recs = f.Seed({1, 2});
  const Isolation iso = GENERATE(Isolation::kSnapshot, Isolation::kReadCommitted);
  auto t1 = f.Begin();
  REQUIRE_OK(t1->Update(f.t, recs[1], Fixture::RowFor(1, 1)));
  auto t2 = f.Begin(iso, /*wait=*/false);
  absl::Status s = t2->Update(f.t, recs[1], Fixture::RowFor(1, 2));
  INFO("status: " << s.ToString());
  REQUIRE(IsError(s, absl::StatusCode::kAborted, "update conflict"));
  REQUIRE(IsError(t2->Delete(f.t, recs[1]), absl::StatusCode::kAborted, "update conflict"));
  // t2 can go on with other rows, and still reads the committed version of the contended one.
  REQUIRE_OK(t2->Update(f.t, recs[2], Fixture::RowFor(2, 2)));
  REQUIRE(SameRow(*GetRow(t2.get(), f.t, recs[1]), Fixture::RowFor(1)));
  REQUIRE_OK(t2->Commit());
  REQUIRE_OK(t1->Commit());
  auto r = f.Begin();
  REQUIRE(SameRow(*GetRow(r.get(), f.t, recs[1]), Fixture::RowFor(1, 1)));
  REQUIRE(SameRow(*GetRow(r.get(), f.t, recs[2]), Fixture::RowFor(2, 2)));
  REQUIRE_OK(r->Commit());
}

TEST_CASE("a waiting update ends when the other transaction commits or rolls back", "[txn]") {
  Fixture f;
  auto recs = f.Seed({1});
  const Isolation iso = GENERATE(Isolation::kSnapshot, Isolation::kReadCommitted);
  const bool commit_first = GENERATE(true, false);
  CAPTURE(iso == Isolation::kSnapshot, commit_first);
  auto t1 = f.Begin();
  REQUIRE_OK(t1->Update(f.t, recs[1], Fixture::RowFor(1, 1)));
  auto t2 = f.Begin(iso, /*wait=*/true);
  Async waiter([&] { return t2->Update(f.t, recs[1], Fixture::RowFor(1, 2)); });
  waiter.LetItBlock();
  REQUIRE_FALSE(waiter.Done());  // t1 is still active: t2 cannot have finished
  if (commit_first) REQUIRE_OK(t1->Commit());
  else REQUIRE_OK(t1->Rollback());
  absl::Status s = waiter.Wait();
  INFO("status: " << s.ToString());
  Row expect;
  if (commit_first && iso == Isolation::kSnapshot) {
    REQUIRE(IsError(s, absl::StatusCode::kAborted, "update conflict"));
    expect = Fixture::RowFor(1, 1);
  } else {
    REQUIRE_OK(s);
    expect = Fixture::RowFor(1, 2);
  }
  REQUIRE_OK(t2->Commit());
  auto r = f.Begin();
  REQUIRE(SameRow(*GetRow(r.get(), f.t, recs[1]), expect));
  REQUIRE(IndexIds(r.get(), f.by_k, {}, {}) == std::vector<int64_t>{1});
  REQUIRE(LookupId(r.get(), f.by_k, {std::get<int64_t>(expect[1])}) == 1);
  REQUIRE_OK(r->Commit());
}

TEST_CASE("waiting for a transaction that deletes the row", "[txn]") {
  Fixture f;
  auto recs = f.Seed({1});
  const Isolation iso = GENERATE(Isolation::kSnapshot, Isolation::kReadCommitted);
  auto t1 = f.Begin();
  REQUIRE_OK(t1->Delete(f.t, recs[1]));
  auto t2 = f.Begin(iso, /*wait=*/true);
  Async waiter([&] { return t2->Update(f.t, recs[1], Fixture::RowFor(1, 2)); });
  waiter.LetItBlock();
  REQUIRE_FALSE(waiter.Done());
  REQUIRE_OK(t1->Commit());
  absl::Status s = waiter.Wait();
  INFO("status: " << s.ToString());
  if (iso == Isolation::kSnapshot)
    REQUIRE(IsError(s, absl::StatusCode::kAborted, "update conflict"));
  else REQUIRE(absl::IsNotFound(s));
  REQUIRE_OK(t2->Commit());
  auto r = f.Begin();
  REQUIRE(ScanIds(r.get(), f.t).empty());
  REQUIRE_OK(r->Commit());
}

TEST_CASE("lock_timeout_ms gives up with Aborted (an update conflict, as documented)", "[txn]") {
  Fixture f;
  auto recs = f.Seed({1});
  auto t1 = f.Begin();
  REQUIRE_OK(t1->Update(f.t, recs[1], Fixture::RowFor(1, 1)));
  auto t2 = f.Begin(Isolation::kSnapshot, /*wait=*/true, /*timeout_ms=*/50);
  absl::Status s = t2->Update(f.t, recs[1], Fixture::RowFor(1, 2));
  INFO("status: " << s.ToString());
  REQUIRE(IsError(s, absl::StatusCode::kAborted, "update conflict: lock time-out"));
  REQUIRE(IsError(t2->Delete(f.t, recs[1]), absl::StatusCode::kAborted, "lock time-out"));
  REQUIRE_OK(t2->Rollback());
  REQUIRE_OK(t1->Commit());
  auto r = f.Begin();
  REQUIRE(SameRow(*GetRow(r.get(), f.t, recs[1]), Fixture::RowFor(1, 1)));
  REQUIRE_OK(r->Commit());
}

TEST_CASE("two transactions waiting for each other: one gets a deadlock error", "[txn]") {
  Fixture f;
  auto recs = f.Seed({1, 2});
  auto t1 = f.Begin();
  auto t2 = f.Begin();
  REQUIRE_OK(t1->Update(f.t, recs[1], Fixture::RowFor(1, 1)));
  REQUIRE_OK(t2->Update(f.t, recs[2], Fixture::RowFor(2, 2)));
  // Whichever asks second closes the cycle and is told; it then rolls back, which lets the
  // other one finish its update.
  auto cross = [&](Transaction* t, RecordId rec, Row row) {
    return [&f, t, rec, row] {
      absl::Status s = t->Update(f.t, rec, row);
      if (absl::IsAborted(s)) (void)t->Rollback();
      return s;
    };
  };
  Async a(cross(t1.get(), recs[2], Fixture::RowFor(2, 1)));
  Async b(cross(t2.get(), recs[1], Fixture::RowFor(1, 2)));
  absl::Status sa = a.Wait();
  absl::Status sb = b.Wait();
  INFO("t1: " << sa.ToString() << "; t2: " << sb.ToString());
  REQUIRE(sa.ok() != sb.ok());
  const absl::Status& failed = sa.ok() ? sb : sa;
  REQUIRE(IsError(failed, absl::StatusCode::kAborted, "deadlock"));
  Transaction* winner = sa.ok() ? t1.get() : t2.get();
  REQUIRE_OK(winner->Commit());
  auto r = f.Begin();
  if (sa.ok()) {  // t1 wrote both rows
    REQUIRE(SameRow(*GetRow(r.get(), f.t, recs[1]), Fixture::RowFor(1, 1)));
    REQUIRE(SameRow(*GetRow(r.get(), f.t, recs[2]), Fixture::RowFor(2, 1)));
  } else {
    REQUIRE(SameRow(*GetRow(r.get(), f.t, recs[1]), Fixture::RowFor(1, 2)));
    REQUIRE(SameRow(*GetRow(r.get(), f.t, recs[2]), Fixture::RowFor(2, 2)));
  }
  REQUIRE_OK(r->Commit());
}

TEST_CASE("a row committed by another transaction after our snapshot is a conflict", "[txn]") {
  Fixture f;
  auto recs = f.Seed({1, 2});
  const bool wait = GENERATE(true, false);
  auto t2 = f.Begin(Isolation::kSnapshot, wait);
  auto rc = f.Begin(Isolation::kReadCommitted, wait);
  {
    auto t1 = f.Begin();
    REQUIRE_OK(t1->Update(f.t, recs[1], Fixture::RowFor(1, 1)));
    REQUIRE_OK(t1->Delete(f.t, recs[2]));
    REQUIRE_OK(t1->Commit());
  }
  // t1 is finished: there is nothing to wait for, only the conflict.
  REQUIRE(IsError(t2->Update(f.t, recs[1], Fixture::RowFor(1, 2)), absl::StatusCode::kAborted,
                  "update conflict"));
  REQUIRE(IsError(t2->Delete(f.t, recs[1]), absl::StatusCode::kAborted, "update conflict"));
  REQUIRE(IsError(t2->Update(f.t, recs[2], Fixture::RowFor(2, 2)), absl::StatusCode::kAborted,
                  "update conflict"));
  REQUIRE_OK(t2->Rollback());
  // Read committed updates the newest committed version instead.
  REQUIRE_OK(rc->Update(f.t, recs[1], Fixture::RowFor(1, 3)));
  REQUIRE(absl::IsNotFound(rc->Update(f.t, recs[2], Fixture::RowFor(2, 3))));
  REQUIRE_OK(rc->Commit());
  auto r = f.Begin();
  REQUIRE(SameRow(*GetRow(r.get(), f.t, recs[1]), Fixture::RowFor(1, 3)));
  REQUIRE_FALSE(GetRow(r.get(), f.t, recs[2]).has_value());
  REQUIRE_OK(r->Commit());
}

TEST_CASE("a transaction updates its own row many times and deletes it", "[txn]") {
  Fixture f;
  auto recs = f.Seed({1});
  auto t1 = f.Begin();
  for (int64_t i = 1; i <= 50; ++i) {
    REQUIRE_OK(t1->Update(f.t, recs[1],
                          Row{int64_t{1}, i, std::string(static_cast<size_t>(i) * 50, 'a')}));
  }
  REQUIRE(std::get<int64_t>((*GetRow(t1.get(), f.t, recs[1]))[1]) == 50);
  REQUIRE_OK(t1->Delete(f.t, recs[1]));
  REQUIRE_FALSE(GetRow(t1.get(), f.t, recs[1]).has_value());
  REQUIRE(absl::IsNotFound(t1->Update(f.t, recs[1], Fixture::RowFor(1))));
  REQUIRE(absl::IsNotFound(t1->Delete(f.t, recs[1])));
  REQUIRE(ScanIds(t1.get(), f.t).empty());
  REQUIRE(IndexIds(t1.get(), f.by_k, {}, {}).empty());
  REQUIRE_OK(t1->Commit());
  auto r = f.Begin();
  REQUIRE(ScanIds(r.get(), f.t).empty());
  REQUIRE(IndexIds(r.get(), f.by_id, {}, {}).empty());
  REQUIRE_OK(r->Commit());
}

// ------------------------------------------------------------------------- unique indexes

TEST_CASE("unique index: duplicates in the same and in committed transactions", "[txn]") {
  Fixture f;
  f.Seed({1, 2});
  auto t1 = f.Begin();
  REQUIRE_OK(t1->Insert(f.t, Fixture::RowFor(3)).status());
  absl::Status s = t1->Insert(f.t, Fixture::RowFor(3)).status();
  INFO("status: " << s.ToString());
  REQUIRE(IsError(s, absl::StatusCode::kAlreadyExists, "t_id"));
  REQUIRE(absl::IsAlreadyExists(t1->Insert(f.t, Fixture::RowFor(1)).status()));
  // The refused inserts left nothing behind.
  REQUIRE(ScanIds(t1.get(), f.t) == std::vector<int64_t>{1, 2, 3});
  REQUIRE(IndexIds(t1.get(), f.by_k, {}, {}) == std::vector<int64_t>{1, 2, 3});
  REQUIRE(IndexIds(t1.get(), f.by_id, {int64_t{3}}, {int64_t{3}}) == std::vector<int64_t>{3});
  REQUIRE_OK(t1->Commit());
  auto t2 = f.Begin();
  REQUIRE(absl::IsAlreadyExists(t2->Insert(f.t, Fixture::RowFor(3)).status()));
  REQUIRE(ScanIds(t2.get(), f.t) == std::vector<int64_t>{1, 2, 3});
  REQUIRE_OK(t2->Commit());
}

TEST_CASE("unique index: an update to an existing key is refused and undone", "[txn]") {
  Fixture f;
  auto recs = f.Seed({1, 2});
  auto t1 = f.Begin();
  absl::Status s = t1->Update(f.t, recs[2], Row{int64_t{1}, int64_t{77}, std::string("clash")});
  REQUIRE(absl::IsAlreadyExists(s));
  REQUIRE(SameRow(*GetRow(t1.get(), f.t, recs[2]), Fixture::RowFor(2)));
  REQUIRE(LookupId(t1.get(), f.by_id, {int64_t{1}}) == 1);
  REQUIRE_FALSE(LookupId(t1.get(), f.by_k, {int64_t{77}}).has_value());
  // Freeing the key first makes the same update legal.
  REQUIRE_OK(t1->Delete(f.t, recs[1]));
  REQUIRE_OK(t1->Update(f.t, recs[2], Row{int64_t{1}, int64_t{77}, std::string("moved")}));
  REQUIRE_OK(t1->Commit());
  auto r = f.Begin();
  REQUIRE(ScanIds(r.get(), f.t) == std::vector<int64_t>{1});
  auto found = VALUE_OR_FAIL(r->Lookup(f.by_id, {int64_t{1}}));
  REQUIRE(found.has_value());
  REQUIRE(found->first == recs[2]);
  REQUIRE_OK(r->Commit());
}

TEST_CASE("unique index: delete then re-insert the same key in one transaction", "[txn]") {
  Fixture f;
  auto recs = f.Seed({1, 2});
  auto t1 = f.Begin();
  REQUIRE_OK(t1->Delete(f.t, recs[1]));
  RecordId again =
      VALUE_OR_FAIL(t1->Insert(f.t, Row{int64_t{1}, int64_t{5}, std::string("again")}));
  REQUIRE(again != recs[1]);
  REQUIRE(absl::IsAlreadyExists(t1->Insert(f.t, Fixture::RowFor(1)).status()));
  auto found = VALUE_OR_FAIL(t1->Lookup(f.by_id, {int64_t{1}}));
  REQUIRE(found.has_value());
  REQUIRE(found->first == again);
  REQUIRE(IndexIds(t1.get(), f.by_id, {int64_t{1}}, {int64_t{1}}).size() == 1);
  REQUIRE_OK(t1->Commit());
  auto r = f.Begin();
  REQUIRE(ScanIds(r.get(), f.t) == std::vector<int64_t>{1, 2});
  REQUIRE(IndexIds(r.get(), f.by_id, {int64_t{1}}, {int64_t{1}}).size() == 1);
  REQUIRE(VALUE_OR_FAIL(r->Lookup(f.by_id, {int64_t{1}}))->first == again);
  REQUIRE_OK(r->Commit());
}

TEST_CASE("unique index: a key inserted by an active transaction", "[txn]") {
  Fixture f;
  f.Seed({1});
  auto t1 = f.Begin();
  REQUIRE_OK(t1->Insert(f.t, Fixture::RowFor(5)).status());
  SECTION("no wait: conflict at once") {
    auto t2 = f.Begin(Isolation::kSnapshot, /*wait=*/false);
    absl::Status s = t2->Insert(f.t, Fixture::RowFor(5)).status();
    INFO("status: " << s.ToString());
    REQUIRE(absl::IsAborted(s));
    REQUIRE(ScanIds(t2.get(), f.t) == std::vector<int64_t>{1});
    REQUIRE_OK(t2->Rollback());
    REQUIRE_OK(t1->Commit());
  }
  SECTION("wait, the other commits: duplicate") {
    auto t2 = f.Begin(Isolation::kReadCommitted, /*wait=*/true);
    Async waiter([&] { return t2->Insert(f.t, Fixture::RowFor(5)).status(); });
    waiter.LetItBlock();
    REQUIRE_FALSE(waiter.Done());
    REQUIRE_OK(t1->Commit());
    absl::Status s = waiter.Wait();
    INFO("status: " << s.ToString());
    REQUIRE(absl::IsAlreadyExists(s));
    REQUIRE_OK(t2->Commit());
    auto r = f.Begin();
    REQUIRE(IndexIds(r.get(), f.by_id, {int64_t{5}}, {int64_t{5}}).size() == 1);
    REQUIRE_OK(r->Commit());
  }
  SECTION("wait, the other rolls back: inserted") {
    auto t2 = f.Begin(Isolation::kSnapshot, /*wait=*/true);
    Async waiter([&] { return t2->Insert(f.t, Fixture::RowFor(5)).status(); });
    waiter.LetItBlock();
    REQUIRE_FALSE(waiter.Done());
    REQUIRE_OK(t1->Rollback());
    REQUIRE_OK(waiter.Wait());
    REQUIRE_OK(t2->Commit());
    auto r = f.Begin();
    REQUIRE(IndexIds(r.get(), f.by_id, {int64_t{5}}, {int64_t{5}}).size() == 1);
    REQUIRE(ScanIds(r.get(), f.t) == std::vector<int64_t>{1, 5});
    REQUIRE_OK(r->Commit());
  }
}

TEST_CASE("unique index: a key being deleted or changed by an active transaction", "[txn]") {
  // Until the other transaction commits, its key is still taken: if it rolled back, inserting
  // the key now would leave two rows with it.
  Fixture f;
  auto recs = f.Seed({1});
  const bool delete_it = GENERATE(true, false);
  CAPTURE(delete_it);
  auto t1 = f.Begin();
  if (delete_it) REQUIRE_OK(t1->Delete(f.t, recs[1]));
  else REQUIRE_OK(t1->Update(f.t, recs[1], Row{int64_t{9}, int64_t{90}, std::string("moved")}));
  SECTION("no wait") {
    auto t2 = f.Begin(Isolation::kReadCommitted, /*wait=*/false);
    absl::Status s = t2->Insert(f.t, Fixture::RowFor(1)).status();
    INFO("status: " << s.ToString());
    REQUIRE(absl::IsAborted(s));
    REQUIRE_OK(t2->Rollback());
    REQUIRE_OK(t1->Rollback());
  }
  SECTION("wait, the other rolls back: duplicate") {
    auto t2 = f.Begin(Isolation::kReadCommitted, /*wait=*/true);
    Async waiter([&] { return t2->Insert(f.t, Fixture::RowFor(1)).status(); });
    waiter.LetItBlock();
    REQUIRE_FALSE(waiter.Done());
    REQUIRE_OK(t1->Rollback());
    absl::Status s = waiter.Wait();
    INFO("status: " << s.ToString());
    REQUIRE(absl::IsAlreadyExists(s));
    REQUIRE_OK(t2->Commit());
  }
  SECTION("wait, the other commits: inserted") {
    auto t2 = f.Begin(Isolation::kReadCommitted, /*wait=*/true);
    Async waiter([&] { return t2->Insert(f.t, Fixture::RowFor(1)).status(); });
    waiter.LetItBlock();
    REQUIRE_FALSE(waiter.Done());
    REQUIRE_OK(t1->Commit());
    REQUIRE_OK(waiter.Wait());
    REQUIRE_OK(t2->Commit());
  }
  auto r = f.Begin();
  REQUIRE(IndexIds(r.get(), f.by_id, {int64_t{1}}, {int64_t{1}}).size() == 1);
  REQUIRE_OK(r->Commit());
}

TEST_CASE("unique index: NULL keys do not collide", "[txn]") {
  TempDb tmp;
  auto db = OpenOrFail(tmp.path(), testing::CreateOptions());
  Table u = VALUE_OR_FAIL(
      db->CreateTable({"u", {{"id", ColumnType::kInt64, false}, {"code", ColumnType::kString}}}));
  Index by_code = VALUE_OR_FAIL(db->CreateIndex({"u_code", "u", {"code"}, true}));
  auto txn = VALUE_OR_FAIL(db->Begin());
  for (int64_t i = 0; i < 5; ++i) REQUIRE_OK(txn->Insert(u, Row{i, std::monostate{}}).status());
  REQUIRE_OK(txn->Insert(u, Row{int64_t{10}, std::string("a")}).status());
  REQUIRE(absl::IsAlreadyExists(txn->Insert(u, Row{int64_t{11}, std::string("a")}).status()));
  REQUIRE_OK(txn->Commit());
  txn.reset();
  auto r = VALUE_OR_FAIL(db->Begin());
  auto nulls =
      VALUE_OR_FAIL(testing::IndexRange(r.get(), by_code, {std::monostate{}}, {std::monostate{}}));
  REQUIRE(nulls.size() == 5);
  auto all = VALUE_OR_FAIL(testing::IndexRange(r.get(), by_code, {}, {}));
  REQUIRE(all.size() == 6);
  REQUIRE(IsNull(all.front().second[1]));
  REQUIRE(std::get<std::string>(all.back().second[1]) == "a");
  REQUIRE_OK(r->Commit());
  r.reset();
  REQUIRE_OK(db->Close());
}

// ------------------------------------------------------------------------- index scans

TEST_CASE("index scans return each visible row once after many key changes", "[txn]") {
  Fixture f;
  auto recs = f.Seed({1, 2, 3});
  // Row 1's key moves 10 -> 100..149 in one transaction, then through committed transactions
  // back to 10 and on to 20 (row 2's key), while older snapshots look on.
  auto before = f.Begin();
  {
    auto w = f.Begin();
    for (int64_t k = 100; k < 150; ++k) {
      REQUIRE_OK(w->Update(f.t, recs[1], Row{int64_t{1}, k, std::string("k") + std::to_string(k)}));
      REQUIRE(IndexIds(w.get(), f.by_k, {}, {}) == std::vector<int64_t>{2, 3, 1});
    }
    REQUIRE(LookupId(w.get(), f.by_k, {int64_t{149}}) == 1);
    REQUIRE_FALSE(LookupId(w.get(), f.by_k, {int64_t{120}}).has_value());
    REQUIRE_FALSE(LookupId(w.get(), f.by_k, {int64_t{10}}).has_value());
    REQUIRE_OK(w->Commit());
  }
  auto middle = f.Begin();  // sees k = 149
  for (int64_t k : {int64_t{10}, int64_t{149}, int64_t{10}, int64_t{20}}) {
    auto w = f.Begin();
    REQUIRE_OK(w->Update(f.t, recs[1], Row{int64_t{1}, k, std::string("x")}));
    REQUIRE_OK(w->Commit());
  }
  auto after = f.Begin();
  REQUIRE(IndexIds(before.get(), f.by_k, {}, {}) == std::vector<int64_t>{1, 2, 3});
  REQUIRE(IndexIds(before.get(), f.by_k, {int64_t{100}}, {int64_t{200}}).empty());
  REQUIRE(IndexIds(middle.get(), f.by_k, {}, {}) == std::vector<int64_t>{2, 3, 1});
  REQUIRE(IndexIds(middle.get(), f.by_k, {int64_t{100}}, {int64_t{200}}) ==
          std::vector<int64_t>{1});
  REQUIRE(LookupId(middle.get(), f.by_k, {int64_t{149}}) == 1);
  REQUIRE_FALSE(LookupId(middle.get(), f.by_k, {int64_t{10}}).has_value());
  std::vector<int64_t> now = IndexIds(after.get(), f.by_k, {}, {});
  std::sort(now.begin(), now.end());
  REQUIRE(now == std::vector<int64_t>{1, 2, 3});
  REQUIRE(IndexIds(after.get(), f.by_k, {int64_t{20}}, {int64_t{20}}).size() == 2);
  REQUIRE(IndexIds(after.get(), f.by_k, {int64_t{10}}, {int64_t{10}}).empty());
  REQUIRE(IndexIds(after.get(), f.by_k, {int64_t{100}}, {int64_t{200}}).empty());
  REQUIRE(IndexIds(after.get(), f.by_k, {}, {}, true).size() == 3);
  for (auto* x : {before.get(), middle.get(), after.get()}) REQUIRE_OK(x->Commit());
  before.reset();
  middle.reset();
  after.reset();
  ValidationReport rep = VALUE_OR_FAIL(f.db->Validate());
  REQUIRE(rep.ok());
}

TEST_CASE("index ranges: bounds, prefixes, direction and NULLs on a two-column index", "[txn]") {
  TempDb tmp;
  auto db = OpenOrFail(tmp.path(), testing::CreateOptions(4096, 64));
  Table p = VALUE_OR_FAIL(db->CreateTable(
      {"p",
       {{"a", ColumnType::kInt64}, {"b", ColumnType::kString}, {"n", ColumnType::kInt64, false}}}));
  Index ab = VALUE_OR_FAIL(db->CreateIndex({"p_ab", "p", {"a", "b"}}));
  // (a, b) for a in {NULL, -5, 1, 2, 3} and b in {NULL, "", "b", "bb", "c"}; n numbers them in
  // key order (NULL first, strings bytewise).
  const std::vector<Value> as = {std::monostate{}, int64_t{-5}, int64_t{1}, int64_t{2}, int64_t{3}};
  const std::vector<Value> bs = {std::monostate{}, std::string(""), std::string("b"),
                                 std::string("bb"), std::string("c")};
  std::vector<Row> rows;
  for (const Value& a : as) {
    for (const Value& b : bs) rows.push_back(Row{a, b, static_cast<int64_t>(rows.size())});
  }
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    // Insert in a scrambled order so key order is not insertion order.
    for (size_t i = 0; i < rows.size(); ++i) {
      REQUIRE_OK(txn->Insert(p, rows[(i * 7) % rows.size()]).status());
    }
    REQUIRE_OK(txn->Commit());
  }
  auto txn = VALUE_OR_FAIL(db->Begin());
  auto ns = [&](const Row& lo, const Row& hi, bool desc = false) {
    std::vector<int64_t> out;
    for (const auto& [rec, row] : VALUE_OR_FAIL(testing::IndexRange(txn.get(), ab, lo, hi, desc))) {
      out.push_back(std::get<int64_t>(row[2]));
    }
    return out;
  };
  auto range = [](int64_t from, int64_t to) {
    std::vector<int64_t> v;
    for (int64_t i = from; i <= to; ++i) v.push_back(i);
    return v;
  };
  auto reversed = [](std::vector<int64_t> v) {
    std::reverse(v.begin(), v.end());
    return v;
  };
  const Value null = std::monostate{};
  REQUIRE(ns({}, {}) == range(0, 24));
  REQUIRE(ns({}, {}, true) == reversed(range(0, 24)));
  REQUIRE(ns({null}, {null}) == range(0, 4));                // a IS NULL
  REQUIRE(ns({int64_t{2}}, {int64_t{3}}) == range(15, 24));  // prefix bounds
  REQUIRE(ns({int64_t{2}}, {int64_t{3}}, true) == reversed(range(15, 24)));
  REQUIRE(ns({int64_t{1}}, {int64_t{1}}) == range(10, 14));
  REQUIRE(ns({int64_t{-5}}, {}) == range(5, 24));  // open above
  REQUIRE(ns({}, {int64_t{1}}) == range(0, 14));   // open below
  REQUIRE(ns({}, {int64_t{1}}, true) == reversed(range(0, 14)));
  REQUIRE(ns({int64_t{2}, std::string("b")}, {int64_t{3}, std::string("b")}) == range(17, 22));
  REQUIRE(ns({int64_t{2}, std::string("b")}, {int64_t{3}, std::string("b")}, true) ==
          reversed(range(17, 22)));
  REQUIRE(ns({int64_t{2}, null}, {int64_t{2}, null}) == range(15, 15));  // b IS NULL
  REQUIRE(ns({int64_t{1}, std::string("bb")}, {int64_t{1}, std::string("bb")}) == range(13, 13));
  REQUIRE(ns({int64_t{3}}, {int64_t{2}}).empty());  // lo > hi
  REQUIRE(ns({int64_t{4}}, {}).empty());
  REQUIRE(ns({}, {int64_t{-6}}) == range(0, 4));  // only NULLs sort below -6
  REQUIRE(ns({int64_t{0}}, {int64_t{0}}).empty());
  // Lookup on a prefix gives the first row in key order.
  auto first = VALUE_OR_FAIL(txn->Lookup(ab, {int64_t{2}}));
  REQUIRE(first.has_value());
  REQUIRE(std::get<int64_t>(first->second[2]) == 15);
  auto exact = VALUE_OR_FAIL(txn->Lookup(ab, {int64_t{3}, std::string("c")}));
  REQUIRE(exact.has_value());
  REQUIRE(std::get<int64_t>(exact->second[2]) == 24);
  REQUIRE_FALSE(VALUE_OR_FAIL(txn->Lookup(ab, {int64_t{3}, std::string("d")})).has_value());
  // Bad bounds.
  REQUIRE(absl::IsInvalidArgument(txn->IndexScan(ab, {std::string("x")}, {}).status()));
  REQUIRE(absl::IsInvalidArgument(
      txn->IndexScan(ab, {int64_t{1}, std::string("x"), int64_t{3}}, {}).status()));
  REQUIRE(absl::IsInvalidArgument(txn->Lookup(ab, {1.5}).status()));

  // Deleted and updated rows, seen by this transaction's own later statements.
  auto all = VALUE_OR_FAIL(testing::IndexRange(txn.get(), ab, {int64_t{2}}, {int64_t{2}}));
  REQUIRE(all.size() == 5);
  REQUIRE_OK(txn->Delete(p, all[1].first));  // (2, "")
  REQUIRE_OK(txn->Update(p, all[2].first, Row{int64_t{-5}, std::string("zz"), int64_t{100}}));
  REQUIRE(ns({int64_t{2}}, {int64_t{2}}) == std::vector<int64_t>{15, 18, 19});
  REQUIRE(ns({int64_t{-5}}, {int64_t{-5}}) == std::vector<int64_t>{5, 6, 7, 8, 9, 100});
  REQUIRE(ns({int64_t{-5}}, {int64_t{-5}}, true) == std::vector<int64_t>{100, 9, 8, 7, 6, 5});
  REQUIRE(ns({}, {}).size() == 24);
  REQUIRE_OK(txn->Commit());
  txn.reset();
  REQUIRE_OK(db->Close());
}

// ------------------------------------------------------------------------- state machine

TEST_CASE("operations after Commit or Rollback are FailedPrecondition", "[txn]") {
  Fixture f;
  auto recs = f.Seed({1});
  const bool commit = GENERATE(true, false);
  auto txn = f.Begin();
  REQUIRE_OK(txn->Insert(f.t, Fixture::RowFor(2)).status());
  if (commit) REQUIRE_OK(txn->Commit());
  else REQUIRE_OK(txn->Rollback());
  REQUIRE(absl::IsFailedPrecondition(txn->Insert(f.t, Fixture::RowFor(3)).status()));
  REQUIRE(absl::IsFailedPrecondition(txn->Get(f.t, recs[1]).status()));
  REQUIRE(absl::IsFailedPrecondition(txn->Update(f.t, recs[1], Fixture::RowFor(1, 1))));
  REQUIRE(absl::IsFailedPrecondition(txn->Delete(f.t, recs[1])));
  REQUIRE(absl::IsFailedPrecondition(txn->Scan(f.t).status()));
  REQUIRE(absl::IsFailedPrecondition(txn->Lookup(f.by_id, {int64_t{1}}).status()));
  REQUIRE(absl::IsFailedPrecondition(txn->IndexScan(f.by_id, {}, {}).status()));
  REQUIRE(absl::IsFailedPrecondition(txn->Commit()));
  REQUIRE(absl::IsFailedPrecondition(txn->Rollback()));
  auto r = f.Begin();
  REQUIRE(ScanIds(r.get(), f.t) == (commit ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{1}));
  REQUIRE_OK(r->Commit());
}

TEST_CASE("a read-only transaction reads but does not write", "[txn]") {
  Fixture f;
  auto recs = f.Seed({1});
  TransactionOptions o;
  o.read_only = true;
  auto ro = VALUE_OR_FAIL(f.db->Begin(o));
  REQUIRE(GetRow(ro.get(), f.t, recs[1]).has_value());
  REQUIRE(absl::IsFailedPrecondition(ro->Insert(f.t, Fixture::RowFor(2)).status()));
  REQUIRE(absl::IsFailedPrecondition(ro->Update(f.t, recs[1], Fixture::RowFor(1, 1))));
  REQUIRE(absl::IsFailedPrecondition(ro->Delete(f.t, recs[1])));
  REQUIRE_OK(ro->Commit());
}

TEST_CASE("invalid handles are refused", "[txn]") {
  Fixture f;
  auto txn = f.Begin();
  REQUIRE(absl::IsInvalidArgument(txn->Insert(Table(), Fixture::RowFor(1)).status()));
  REQUIRE(absl::IsInvalidArgument(txn->Get(Table(), RecordId{1}).status()));
  REQUIRE(absl::IsInvalidArgument(txn->Scan(Table()).status()));
  REQUIRE(absl::IsInvalidArgument(txn->Lookup(Index(), {int64_t{1}}).status()));
  REQUIRE(absl::IsInvalidArgument(txn->IndexScan(Index(), {}, {}).status()));
  REQUIRE_OK(txn->Rollback());
}

// ------------------------------------------------------------------------- counters and stats

TEST_CASE("statement and transaction counters move", "[txn]") {
  Fixture f;
  auto recs = f.Seed({1, 2, 3});
  auto txn = f.Begin();
  REQUIRE(GetRow(txn.get(), f.t, recs[1]).has_value());
  const Counters get = txn->statement_counters();
  REQUIRE(get.fetches > 0);
  REQUIRE(get.marks == 0);
  REQUIRE(txn->counters().fetches >= get.fetches);

  // A scan's page work counts to the call that made the cursor and to the transaction.
  const uint64_t before_scan = txn->counters().fetches;
  REQUIRE(ScanIds(txn.get(), f.t).size() == 3);
  REQUIRE(txn->counters().fetches > before_scan);

  REQUIRE_OK(txn->Update(f.t, recs[2], Fixture::RowFor(2, 1)));
  const Counters upd = txn->statement_counters();
  REQUIRE(upd.fetches > 0);
  REQUIRE(upd.marks > 0);
  REQUIRE_OK(txn->Commit());
  const Counters commit = txn->statement_counters();
  REQUIRE(commit.marks > 0);
  // Its pages went into the doublewrite area's record; their home writes come later, from the
  // area's writer (counted by the database only).
  REQUIRE(commit.dw_writes > 0);
  const Counters total = txn->counters();
  REQUIRE(total.fetches >= get.fetches + upd.fetches);
  REQUIRE(total.marks >= upd.marks + commit.marks);
  REQUIRE(total.writes >= commit.writes);
  REQUIRE(total.dw_writes >= commit.dw_writes);

  // Each statement starts from zero.
  auto t2 = f.Begin();
  REQUIRE(t2->counters().fetches == 0);
  REQUIRE(LookupId(t2.get(), f.by_id, {int64_t{3}}) == 3);
  REQUIRE(t2->statement_counters().fetches > 0);
  REQUIRE(t2->statement_counters().marks == 0);
  REQUIRE(t2->statement_counters().writes == 0);
  REQUIRE_OK(t2->Commit());
  const DatabaseStats st = f.db->stats();
  REQUIRE(st.pages.fetches >= total.fetches);
  REQUIRE(st.pages.writes >= total.writes);
}

// Options for the sync tests: no collector thread, so every sync of the database while they
// run is one of their transactions' (or of a call they make).
Options SyncTestOptions(bool forced_writes) {
  Options o = testing::CreateOptions(4096, 256);
  o.forced_writes = forced_writes;
  o.gc_policy = GcPolicy::kCooperative;
  return o;
}

// With torn-page protection a commit's pages and its TIP page go into the doublewrite area's
// records and take one sync together; without it, careful write syncs the pages (a level at a
// time), then the TIP.
TEST_CASE("syncs: a commit costs one sync with torn-page protection, two or more without",
          "[txn][syncs]") {
  for (const bool protect : {true, false}) {
    CAPTURE(protect);
    Options o = SyncTestOptions(true);
    o.doublewrite = protect;
    testing::TableDb f(o);
    // Exactly one with protection; at least two without.
    auto right = [&](uint64_t syncs) { return protect ? syncs == 1 : syncs >= 2; };
    std::vector<RecordId> rids;
    for (int64_t i = 0; i < 40; ++i) {
      auto txn = VALUE_OR_FAIL(f.db->Begin());
      rids.push_back(VALUE_OR_FAIL(txn->Insert(f.t, {i, i * 10, std::string(40, 'a')})));
      REQUIRE_OK(txn->Commit());
      INFO("insert commit " << i << ": " << txn->counters().syncs << " syncs");
      REQUIRE(right(txn->counters().syncs));
    }
    // A transaction that touches several pages (its rows, their back versions, the index).
    auto txn = VALUE_OR_FAIL(f.db->Begin());
    for (size_t i = 0; i < rids.size(); i += 4) {
      const int64_t k = static_cast<int64_t>(i);
      REQUIRE_OK(txn->Update(f.t, rids[i], Row{k, k * 10 + 1, std::string(60, 'b')}));
    }
    REQUIRE_OK(txn->Commit());
    INFO("update commit: " << txn->counters().syncs << " syncs");
    CHECK(right(txn->counters().syncs));
  }
}

// A commit's pages go home lazily (doublewrite.h); Checkpoint writes them home and syncs, so
// that the file holds every committed row without the area's records.
TEST_CASE("checkpoint: afterwards the file holds every committed row without the area's records",
          "[txn][syncs]") {
  testing::TableDb f(testing::CreateOptions(4096, 128));
  for (int64_t i = 0; i < 50; ++i) {
    auto txn = VALUE_OR_FAIL(f.db->Begin());
    REQUIRE_OK(txn->Insert(f.t, {i, i * 10, std::string(100, 'c')}).status());
    REQUIRE_OK(txn->Commit());
  }
  REQUIRE_OK(f.db->Checkpoint());
  std::string bytes = testing::ReadFileBytes(f.tmp.path());
  // The area's records erased: what an open applies from them is gone.
  const size_t from = size_t{page::kDoublewriteFirst} * 4096;
  const size_t to = std::min(bytes.size(), size_t{page::DoublewriteEnd(4096)} * 4096);
  std::fill(bytes.begin() + static_cast<std::ptrdiff_t>(from),
            bytes.begin() + static_cast<std::ptrdiff_t>(to), '\0');
  testing::TempDb copy;
  testing::WriteFileBytes(copy.path(), bytes);
  Options o = f.opts;
  o.create_if_missing = false;
  auto db = testing::OpenOrFail(copy.path(), o);
  CHECK(db->stats().pages_repaired_at_open == 0);
  Table t = VALUE_OR_FAIL(db->GetTable("t"));
  auto txn = VALUE_OR_FAIL(db->Begin());
  CHECK(ScanIds(txn.get(), t).size() == 50);
  REQUIRE_OK(txn->Commit());
  testing::RequireValid(db.get(), "a checkpointed copy without its records");
  REQUIRE_OK(db->Close());
}

TEST_CASE("syncs: a commit counts its syncs in its statement, its transaction and the database",
          "[txn][syncs]") {
  SECTION("forced writes") {
    testing::TableDb f(SyncTestOptions(true));
    auto txn = VALUE_OR_FAIL(f.db->Begin());
    REQUIRE_OK(txn->Insert(f.t, {int64_t{1}, int64_t{10}, std::string("v1")}).status());
    REQUIRE(txn->counters().syncs == 0);  // nothing is synced before the commit
    const uint64_t before = f.db->stats().pages.syncs;
    REQUIRE_OK(txn->Commit());
    const uint64_t syncs = txn->counters().syncs;
    INFO("syncs of a one-insert commit: " << syncs);
    REQUIRE(syncs >= 1);
    REQUIRE(txn->statement_counters().syncs == syncs);  // all of them in the commit
    REQUIRE(f.db->stats().pages.syncs - before == syncs);
    // A second commit counts its own syncs, from zero.
    auto t2 = VALUE_OR_FAIL(f.db->Begin());
    REQUIRE_OK(t2->Insert(f.t, {int64_t{2}, int64_t{20}, std::string("v2")}).status());
    const uint64_t before2 = f.db->stats().pages.syncs;
    REQUIRE_OK(t2->Commit());
    REQUIRE(t2->counters().syncs >= 1);
    REQUIRE(f.db->stats().pages.syncs - before2 == t2->counters().syncs);
  }
  SECTION("no forced writes: a commit syncs nothing; the header's sync still counts") {
    testing::TableDb f(SyncTestOptions(false));
    const uint64_t before = f.db->stats().pages.syncs;
    auto txn = VALUE_OR_FAIL(f.db->Begin());
    REQUIRE_OK(txn->Insert(f.t, {int64_t{1}, int64_t{10}, std::string("v1")}).status());
    REQUIRE_OK(txn->Commit());
    REQUIRE(txn->counters().syncs == 0);
    REQUIRE(txn->statement_counters().syncs == 0);
    REQUIRE(txn->counters().writes > 0);  // it did write its pages
    REQUIRE(f.db->stats().pages.syncs == before);
    // SetSweepInterval syncs the header even without forced writes: the database counts it.
    REQUIRE_OK(f.db->SetSweepInterval(1000));
    REQUIRE(f.db->stats().pages.syncs == before + 1);
  }
}

// A database file whose syncs can be held: while closed, Sync() waits (counted in waiting())
// until Open().
class GatedFile : public testing::PassThroughFile {
 public:
  using PassThroughFile::PassThroughFile;
  void Close() {
    std::lock_guard<std::mutex> g(mu_);
    closed_ = true;
  }
  void Open() {
    {
      std::lock_guard<std::mutex> g(mu_);
      closed_ = false;
    }
    cv_.notify_all();
  }
  int waiting() {
    std::lock_guard<std::mutex> g(mu_);
    return waiting_;
  }
  absl::Status Sync() override {
    {
      std::unique_lock<std::mutex> lk(mu_);
      ++waiting_;
      cv_.wait(lk, [&] { return !closed_; });
      --waiting_;
    }
    return PassThroughFile::Sync();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;
  int waiting_ = 0;
};

TEST_CASE("syncs: a group commit's syncs count once for each transaction that waited on them",
          "[txn][syncs]") {
  constexpr int kThreads = 4;
  constexpr int kRounds = 8;
  TempDb tmp;
  io::FileOptions fo;
  fo.mode = io::OpenMode::kCreateNew;
  auto gated = std::make_unique<GatedFile>(VALUE_OR_FAIL(io::OpenPosixFile(tmp.path(), fo)));
  GatedFile* gate = gated.get();
  std::unique_ptr<Database> db =
      VALUE_OR_FAIL(db::DatabaseImpl::OpenFile(std::move(gated), SyncTestOptions(true), true));
  Table t = VALUE_OR_FAIL(
      db->CreateTable({"t", {{"id", ColumnType::kInt64, false}, {"v", ColumnType::kString}}}));
  const DatabaseStats before = db->stats();

  testing::ErrorLog errors;
  std::mutex mu;
  std::vector<uint64_t> txn_syncs, stmt_syncs;  // per committed transaction
  for (int round = 0; round < kRounds; ++round) {
    // Each round, the first sync (the first committer's, as the leader of its group) waits at
    // the gate while the other threads reach their commits and queue behind it. Only how many
    // of them group depends on timing; the relations checked below hold however they group.
    gate->Close();
    std::vector<std::thread> threads;
    std::atomic<int> finished{0};
    for (int w = 0; w < kThreads; ++w) {
      threads.emplace_back([&, w] {
        struct Done {
          std::atomic<int>* n;
          ~Done() { n->fetch_add(1); }
        } done{&finished};
        auto txn = db->Begin();
        if (!txn.ok()) return errors.Add("Begin: " + txn.status().ToString());
        const int64_t id = int64_t{round} * kThreads + w;
        auto r = (*txn)->Insert(t, {id, std::string(100, 'v')});
        if (!r.ok()) return errors.Add("insert: " + r.status().ToString());
        absl::Status s = (*txn)->Commit();
        if (!s.ok()) return errors.Add("commit: " + s.ToString());
        std::lock_guard<std::mutex> g(mu);
        txn_syncs.push_back((*txn)->counters().syncs);
        stmt_syncs.push_back((*txn)->statement_counters().syncs);
      });
    }
    while (gate->waiting() == 0 && finished.load() < kThreads) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    gate->Open();
    for (std::thread& th : threads) th.join();
  }
  testing::RequireNoErrors(errors);

  const DatabaseStats after = db->stats();
  const uint64_t commits = after.commits - before.commits;
  const uint64_t rounds = after.group_commit_flushes - before.group_commit_flushes;
  const uint64_t db_syncs = after.pages.syncs - before.pages.syncs;  // every one a commit's
  uint64_t sum = 0;
  for (uint64_t s : txn_syncs) sum += s;
  INFO("commits " << commits << ", group commits " << rounds << ", database syncs " << db_syncs
                  << ", transactions' syncs " << sum);
  REQUIRE(commits == uint64_t{kThreads} * kRounds);
  REQUIRE(txn_syncs.size() == commits);
  for (size_t i = 0; i < txn_syncs.size(); ++i) {
    // Every transaction waited on its group's syncs (at least one with forced writes), whether
    // it issued them or not, and on no more syncs than the database made.
    REQUIRE(txn_syncs[i] >= 1);
    REQUIRE(txn_syncs[i] <= db_syncs);
    REQUIRE(stmt_syncs[i] == txn_syncs[i]);  // the commit statement's
  }
  // Each group's syncs count once in the database and once per transaction of the group: the
  // transactions' sum exceeds the database's by (size - 1) x syncs for each group, at least one
  // per transaction that did not lead its group.
  REQUIRE(sum >= db_syncs);
  REQUIRE(sum - db_syncs >= commits - rounds);
  REQUIRE_OK(db->Close());
}

TEST_CASE("database stats: commits, OIT, OAT and Next", "[txn]") {
  Fixture f;
  f.Seed({1});
  const DatabaseStats s0 = f.db->stats();
  REQUIRE(s0.oldest_interesting <= s0.oldest_active);
  REQUIRE(s0.oldest_active <= s0.next_transaction);
  REQUIRE(s0.page_count > 0);

  auto t1 = f.Begin();
  auto t2 = f.Begin();
  auto t3 = f.Begin();
  REQUIRE(t1->id() < t2->id());
  REQUIRE(t2->id() < t3->id());
  DatabaseStats s1 = f.db->stats();
  REQUIRE(s1.next_transaction > t3->id());
  REQUIRE(s1.oldest_active <= t1->id());
  REQUIRE(s1.oldest_interesting <= s1.oldest_active);
  REQUIRE(s1.oldest_snapshot <= s1.oldest_active);

  REQUIRE_OK(t1->Insert(f.t, Fixture::RowFor(2)).status());
  REQUIRE_OK(t1->Commit());
  REQUIRE_OK(t2->Rollback());
  DatabaseStats s2 = f.db->stats();
  REQUIRE(s2.commits == s1.commits + 1);
  REQUIRE(s2.oldest_active <= t3->id());
  REQUIRE(s2.oldest_active > t1->id());
  // t2 rolled back with nothing to undo: it ends as an empty commit (not counted), so it does
  // not stay interesting; only t3, still active, holds OIT.
  REQUIRE(s2.oldest_interesting > t2->id());
  REQUIRE(s2.oldest_interesting <= t3->id());
  REQUIRE(s2.oldest_interesting <= s2.oldest_active);

  REQUIRE_OK(t3->Commit());  // commits nothing but still counts
  DatabaseStats s3 = f.db->stats();
  REQUIRE(s3.commits == s2.commits + 1);
  REQUIRE(s3.oldest_active == s3.next_transaction);  // nobody active
  REQUIRE(s3.oldest_interesting <= s3.oldest_active);
  REQUIRE(s3.group_commit_flushes <= s3.commits);
  REQUIRE(s3.next_transaction >= s2.next_transaction);
  auto t4 = f.Begin();
  REQUIRE(t4->id() >= s3.next_transaction);
  REQUIRE(f.db->stats().oldest_active == t4->id());
  REQUIRE_OK(t4->Commit());

  // After a reopen Next only moves forward and ids are not reused.
  const uint64_t last_id = t4->id();
  t1.reset();
  t2.reset();
  t3.reset();
  t4.reset();
  f.Reopen();
  DatabaseStats s4 = f.db->stats();
  REQUIRE(s4.next_transaction > last_id);
  REQUIRE(s4.oldest_interesting <= s4.oldest_active);
  auto t5 = f.Begin();
  REQUIRE(t5->id() > last_id);
  REQUIRE_OK(t5->Commit());
}

}  // namespace
}  // namespace ember
