// TxnManager: ids, states and commit numbers, snapshots, block reservation of ids, Load after a
// crash, TIP page chaining, commit ordering on disk, group commit, waits (commit, death, time-out,
// deadlock), and OIT/OAT/OST.
#include "engine/txn/txn_manager.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "engine/cache/buffer_cache.h"
#include "engine/cache/page_space.h"
#include "engine/page/tip.h"
#include "tests/support/engine_util.h"

using namespace ember;
using cache::CacheOptions;
using cache::LatchMode;
using cache::PageRef;
using page::PageNo;
using testing::TestDb;
using txn::TxnManager;

namespace {

constexpr uint32_t kPs = 4096;

CacheOptions Opts(bool forced = false, uint32_t capacity = 256) {
  CacheOptions o;
  o.page_size = kPs;
  o.capacity = capacity;
  o.forced_writes = forced;
  return o;
}

// A database file with a page space and a transaction manager over it.
struct TxnEnv {
  explicit TxnEnv(CacheOptions opts = Opts()) : db(opts) {
    space = std::make_unique<cache::PageSpace>(&db.cache(), 2);
    tm = NewManager();
  }
  std::unique_ptr<TxnManager> NewManager() {
    return std::make_unique<TxnManager>(&db.cache(), space.get(), [this](uint64_t n) {
      ++persist_calls;
      persisted = std::max(persisted.load(), n);
      return absl::OkStatus();
    });
  }
  TestDb db;
  std::unique_ptr<cache::PageSpace> space;
  std::unique_ptr<TxnManager> tm;
  std::atomic<int> persist_calls{0};
  std::atomic<uint64_t> persisted{0};
};

uint64_t BeginId(TxnManager& tm) { return VALUE_OR_FAIL(tm.Begin()).id; }

// A page the transaction changes (so that its commit has something to write).
PageNo TouchNewPage(TxnEnv& env, uint64_t txn, uint64_t stamp) {
  PageRef r = VALUE_OR_FAIL(env.space->Allocate(txn));
  testing::FillPage(r.data(), kPs, r.page_no(), stamp);
  r.Mark(txn);
  return r.page_no();
}

page::TxnState DiskTipState(TestDb& db, PageNo tip, uint64_t txn) {
  const std::string bytes = db.DiskPage(tip);
  return page::TipGetState(reinterpret_cast<const uint8_t*>(bytes.data()), txn);
}

}  // namespace

TEST_CASE("txn: ids increase, states go active -> commit number or dead", "[txnmgr]") {
  TxnEnv env;
  TxnManager& tm = *env.tm;
  const PageNo tip = VALUE_OR_FAIL(tm.CreateInitial());
  CHECK(tip >= 2);
  CHECK(tm.first_tip() == tip);
  CHECK(tm.next_id() == 1);
  std::vector<uint64_t> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(BeginId(tm));
  for (size_t i = 1; i < ids.size(); ++i) CHECK(ids[i] > ids[i - 1]);
  CHECK(ids[0] == 1);
  CHECK(tm.next_id() == ids.back() + 1);
  for (uint64_t t : ids) CHECK(tm.StateOf(t) == txn::kCnActive);
  CHECK(tm.StateOf(ids.back() + 1) == txn::kCnDead);  // never started

  const uint64_t before = tm.CurrentCn();
  REQUIRE_OK(tm.Commit(ids[0]));
  const uint64_t cn0 = tm.StateOf(ids[0]);
  CHECK(cn0 >= txn::kCnFirst);
  CHECK(cn0 > before);
  CHECK(tm.CurrentCn() == cn0);
  CHECK(txn::IsCommittedCn(cn0));

  REQUIRE_OK(tm.MarkDead(ids[1]));
  CHECK(tm.StateOf(ids[1]) == txn::kCnDead);
  CHECK(!txn::IsCommittedCn(tm.StateOf(ids[1])));

  REQUIRE_OK(tm.CommitNoWrites(ids[2]));
  const uint64_t cn2 = tm.StateOf(ids[2]);
  CHECK(cn2 > cn0);
  CHECK(tm.CurrentCn() == cn2);
  REQUIRE_OK(tm.Commit(ids[4]));
  CHECK(tm.StateOf(ids[4]) > cn2);
  CHECK(tm.StateOf(ids[3]) == txn::kCnActive);
  CHECK(tm.counters().commits == 3);
}

TEST_CASE("txn: a snapshot taken before a commit does not include it", "[txnmgr]") {
  TxnEnv env;
  TxnManager& tm = *env.tm;
  REQUIRE_OK(tm.CreateInitial());
  const uint64_t w1 = BeginId(tm);
  const uint64_t w2 = BeginId(tm);
  const TxnManager::Started r1 = VALUE_OR_FAIL(tm.Begin());  // sees neither
  REQUIRE_OK(tm.Commit(w1));
  const TxnManager::Started r2 = VALUE_OR_FAIL(tm.Begin());  // sees w1
  REQUIRE_OK(tm.CommitNoWrites(w2));
  const uint64_t rc = tm.CurrentCn();  // a read-committed statement now: sees both
  auto visible = [&](uint64_t writer, uint64_t snapshot) {
    const uint64_t cn = tm.StateOf(writer);
    return txn::IsCommittedCn(cn) && cn <= snapshot;
  };
  CHECK(!visible(w1, r1.snapshot));
  CHECK(!visible(w2, r1.snapshot));
  CHECK(visible(w1, r2.snapshot));
  CHECK(!visible(w2, r2.snapshot));
  CHECK(visible(w1, rc));
  CHECK(visible(w2, rc));
  CHECK(r1.snapshot < r2.snapshot);
  CHECK(r2.snapshot < rc);
}

TEST_CASE("txn: ids are reserved in blocks: the header is rarely written", "[txnmgr]") {
  TxnEnv env;
  TxnManager& tm = *env.tm;
  REQUIRE_OK(tm.CreateInitial());
  uint64_t last = 0;
  for (int i = 0; i < 10000; ++i) {
    const uint64_t id = BeginId(tm);
    REQUIRE(id > last);
    REQUIRE(env.persisted.load() > id);  // reserved durably before it was handed out
    last = id;
    if (i % 2) REQUIRE_OK(tm.CommitNoWrites(id));
    else REQUIRE_OK(tm.MarkDead(id));
  }
  CHECK(env.persist_calls.load() >= 1);
  CHECK(env.persist_calls.load() <= 5);
}

TEST_CASE("txn: Commit writes the transaction's pages, syncs, then writes the TIP", "[txnmgr]") {
  TxnEnv env(Opts(/*forced=*/true));
  TxnManager& tm = *env.tm;
  const PageNo tip = VALUE_OR_FAIL(tm.CreateInitial());
  REQUIRE_OK(env.db.cache().FlushAll());
  const uint64_t t = BeginId(tm);
  const uint64_t other = BeginId(tm);
  const PageNo p1 = TouchNewPage(env, t, 1);
  const PageNo p2 = TouchNewPage(env, t, 2);
  const PageNo po = TouchNewPage(env, other, 3);
  env.db.file().ClearEvents();
  REQUIRE_OK(tm.Commit(t));
  const std::vector<testing::IoEvent> ev = env.db.file().events();
  INFO(testing::Describe(ev));
  CHECK(testing::CheckBefore(ev, p1, tip, true) == "");
  CHECK(testing::CheckBefore(ev, p2, tip, true) == "");
  CHECK(testing::FirstWrite(ev, po) < 0);  // another transaction's page is not part of it
  REQUIRE(!ev.empty());
  CHECK(ev.back().sync);  // durable when Commit returns
  CHECK(DiskTipState(env.db, tip, t) == page::TxnState::kCommitted);
  CHECK(DiskTipState(env.db, tip, other) == page::TxnState::kActive);
}

TEST_CASE("txn: Load after a crash: committed stays, active and dead become dead", "[txnmgr]") {
  TxnEnv env(Opts(/*forced=*/true));
  const PageNo tip = VALUE_OR_FAIL(env.tm->CreateInitial());
  const uint64_t committed = BeginId(*env.tm);
  const uint64_t dead = BeginId(*env.tm);
  const uint64_t active = BeginId(*env.tm);
  TouchNewPage(env, committed, 1);
  TouchNewPage(env, dead, 2);
  TouchNewPage(env, active, 3);
  REQUIRE_OK(env.tm->Commit(committed));
  REQUIRE_OK(env.tm->MarkDead(dead));
  REQUIRE_OK(env.db.cache().FlushAll());
  const uint64_t next = env.tm->next_id();
  const uint32_t page_count = env.space->page_count();
  CHECK(DiskTipState(env.db, tip, active) == page::TxnState::kActive);

  // "Crash": drop the manager and the cache, open everything again over the same file.
  env.tm.reset();
  env.db.Reopen();
  env.space = std::make_unique<cache::PageSpace>(&env.db.cache(), page_count);
  env.persist_calls = 0;
  std::unique_ptr<TxnManager> tm = env.NewManager();
  REQUIRE_OK(tm->Load(tip, /*oit=*/1, next));
  CHECK(tm->first_tip() == tip);
  CHECK(tm->StateOf(committed) == txn::kCnPrehistoric);
  CHECK(tm->StateOf(dead) == txn::kCnDead);
  CHECK(tm->StateOf(active) == txn::kCnDead);
  // Every snapshot sees what was committed before the open.
  CHECK(tm->StateOf(committed) <= tm->CurrentCn());
  // The crashed transaction is dead on disk too.
  CHECK(DiskTipState(env.db, tip, active) == page::TxnState::kDead);
  CHECK(DiskTipState(env.db, tip, committed) == page::TxnState::kCommitted);

  // Ids go on after the old ones, and the reservation is persisted again first.
  const uint64_t t = BeginId(*tm);
  CHECK(t == next);
  CHECK(env.persist_calls.load() == 1);
  CHECK(env.persisted.load() > t);
  CHECK(tm->StateOf(t) == txn::kCnActive);
  REQUIRE_OK(tm->Commit(t));
  CHECK(tm->StateOf(t) > tm->StateOf(committed));

  // Load with an OIT past the committed one: older ids are simply committed.
  tm.reset();
  env.db.Reopen();
  env.space = std::make_unique<cache::PageSpace>(&env.db.cache(), page_count);
  tm = env.NewManager();
  REQUIRE_OK(tm->Load(tip, /*oit=*/dead, t + 1));
  CHECK(tm->StateOf(committed) == txn::kCnPrehistoric);
  CHECK(tm->StateOf(dead) == txn::kCnDead);
  CHECK(tm->StateOf(t) == txn::kCnPrehistoric);
  CHECK(tm->counters().oit == dead);
}

TEST_CASE("txn: TIP pages chain when more than TxnsPerTip transactions start", "[txnmgr]") {
  TxnEnv env;
  TxnManager& tm = *env.tm;
  const PageNo tip0 = VALUE_OR_FAIL(tm.CreateInitial());
  const uint64_t per_tip = page::TxnsPerTip(kPs);
  REQUIRE(per_tip == 16256);
  uint64_t last = 0;
  std::vector<uint64_t> committed, dead;
  for (uint64_t i = 0; i < per_tip + 800; ++i) {
    last = BeginId(tm);
    if (last % 3 == 0) {
      REQUIRE_OK(tm.MarkDead(last));
      dead.push_back(last);
    } else {
      REQUIRE_OK(tm.CommitNoWrites(last));
      committed.push_back(last);
    }
  }
  REQUIRE(last >= per_tip + 1);
  // A commit with pages in the second TIP page's range.
  const uint64_t t = BeginId(tm);
  TouchNewPage(env, t, 7);
  REQUIRE_OK(tm.Commit(t));
  committed.push_back(t);

  PageNo tip1;
  {
    PageRef r = VALUE_OR_FAIL(env.db.cache().Fetch(tip0, LatchMode::kShared));
    CHECK(page::TipFirstTxn(r.data()) == 0);
    tip1 = page::TipNext(r.data());
  }
  REQUIRE(tip1 != page::kNoPage);
  {
    PageRef r = VALUE_OR_FAIL(env.db.cache().Fetch(tip1, LatchMode::kShared));
    CHECK(page::GetType(r.data()) == page::PageType::kTip);
    CHECK(page::TipFirstTxn(r.data()) == per_tip);
    CHECK(page::TipNext(r.data()) == page::kNoPage);
    CHECK(page::TipGetState(r.data(), t) == page::TxnState::kCommitted);
  }
  REQUIRE_OK(env.db.cache().FlushAll());
  const uint64_t next = tm.next_id();
  const uint32_t page_count = env.space->page_count();
  env.tm.reset();
  env.db.Reopen();
  env.space = std::make_unique<cache::PageSpace>(&env.db.cache(), page_count);
  std::unique_ptr<TxnManager> tm2 = env.NewManager();
  REQUIRE_OK(tm2->Load(tip0, 1, next));
  for (uint64_t c : committed) REQUIRE(tm2->StateOf(c) == txn::kCnPrehistoric);
  for (uint64_t d : dead) REQUIRE(tm2->StateOf(d) == txn::kCnDead);
  const uint64_t after = BeginId(*tm2);
  REQUIRE_OK(tm2->Commit(after));
  CHECK(txn::IsCommittedCn(tm2->StateOf(after)));
}

TEST_CASE("txn: group commit from 8 threads", "[txnmgr]") {
  TxnEnv env(Opts(/*forced=*/true, 512));
  TxnManager& tm = *env.tm;
  REQUIRE_OK(tm.CreateInitial());
  constexpr int kThreads = 8, kPerThread = 15;
  std::mutex mu;
  std::vector<std::string> errors;
  std::vector<uint64_t> ids;
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&, th] {
      for (int i = 0; i < kPerThread; ++i) {
        absl::StatusOr<TxnManager::Started> s = tm.Begin();
        absl::Status st = s.status();
        if (st.ok()) {
          absl::StatusOr<PageRef> r = env.space->Allocate(s->id);
          st = r.status();
          if (st.ok()) {
            testing::FillPage(r->data(), kPs, r->page_no(), th);
            r->Mark(s->id);
            r->Release();
            st = tm.Commit(s->id);
          }
        }
        std::lock_guard<std::mutex> g(mu);
        if (!st.ok()) errors.push_back(std::string(st.ToString()));
        else ids.push_back(s->id);
      }
    });
  }
  for (auto& t : threads) t.join();
  INFO((errors.empty() ? std::string() : errors[0]));
  REQUIRE(errors.empty());
  const txn::TxnCounters k = tm.counters();
  CHECK(k.commits == uint64_t{kThreads} * kPerThread);
  CHECK(k.group_flushes >= 1);
  CHECK(k.group_flushes <= k.commits);
  // Every transaction got its own commit number; together they are kCnFirst.. without gaps.
  std::set<uint64_t> cns;
  for (uint64_t id : ids) cns.insert(tm.StateOf(id));
  CHECK(cns.size() == ids.size());
  CHECK(*cns.begin() == txn::kCnFirst);
  CHECK(*cns.rbegin() == txn::kCnFirst + ids.size() - 1);
  CHECK(tm.CurrentCn() == *cns.rbegin());
  CHECK(env.db.cache().DirtyCount() <= 1);  // at most the PIP (marked by the engine, txn 0)
}

TEST_CASE("txn: WaitFor returns when the other transaction commits or dies", "[txnmgr]") {
  TxnEnv env;
  TxnManager& tm = *env.tm;
  REQUIRE_OK(tm.CreateInitial());
  for (bool commit : {true, false}) {
    const uint64_t a = BeginId(tm);
    const uint64_t b = BeginId(tm);
    absl::StatusOr<uint64_t> result = absl::UnknownError("not run");
    std::thread waiter([&] { result = tm.WaitFor(a, b, -1); });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let it block (not required)
    if (commit) REQUIRE_OK(tm.Commit(b));
    else REQUIRE_OK(tm.MarkDead(b));
    waiter.join();
    REQUIRE_OK(result);
    // The state it returns is the final one: WaitFor did not return while b was active.
    CHECK(*result == tm.StateOf(b));
    if (commit) CHECK(txn::IsCommittedCn(*result));
    else CHECK(*result == txn::kCnDead);
    // Waiting for a finished transaction returns at once.
    CHECK(VALUE_OR_FAIL(tm.WaitFor(a, b, 0)) == tm.StateOf(b));
    REQUIRE_OK(tm.Commit(a));
  }
}

TEST_CASE("txn: WaitFor times out with DeadlineExceeded", "[txnmgr]") {
  TxnEnv env;
  TxnManager& tm = *env.tm;
  REQUIRE_OK(tm.CreateInitial());
  const uint64_t a = BeginId(tm);
  const uint64_t b = BeginId(tm);
  absl::StatusOr<uint64_t> r = tm.WaitFor(a, b, 20);
  CHECK(absl::IsDeadlineExceeded(r.status()));
  CHECK(tm.StateOf(b) == txn::kCnActive);
  // The timed-out wait left no trace: b may now wait for a without a false deadlock.
  CHECK(absl::IsDeadlineExceeded(tm.WaitFor(b, a, 0).status()));
}

TEST_CASE("txn: WaitFor detects a 2-cycle deadlock", "[txnmgr]") {
  TxnEnv env;
  TxnManager& tm = *env.tm;
  REQUIRE_OK(tm.CreateInitial());
  const uint64_t a = BeginId(tm);
  const uint64_t b = BeginId(tm);
  // Thread X: a waits for b. Main: b waits for a (with a zero time-out, retried until X is
  // waiting). One of the two must see the deadlock.
  std::atomic<bool> x_done{false};
  absl::StatusOr<uint64_t> x_result = absl::UnknownError("not run");
  std::thread x([&] {
    x_result = tm.WaitFor(a, b, -1);
    x_done = true;
  });
  bool main_aborted = false;
  absl::Status unexpected;
  while (!x_done.load()) {
    absl::StatusOr<uint64_t> m = tm.WaitFor(b, a, 0);
    if (absl::IsAborted(m.status())) {
      main_aborted = true;
      CHECK(std::string(m.status().message()).find("deadlock") != std::string::npos);
      break;
    }
    if (!absl::IsDeadlineExceeded(m.status())) {
      unexpected = m.status();
      break;
    }
  }
  // b rolls back (the victim when main saw the deadlock), which releases a if it still waits.
  if (!x_done.load()) REQUIRE_OK(tm.MarkDead(b));
  x.join();
  REQUIRE_OK(unexpected);
  if (main_aborted) {
    REQUIRE_OK(x_result);
    CHECK(*x_result == txn::kCnDead);
  } else {
    CHECK(absl::IsAborted(x_result.status()));
  }
}

TEST_CASE("txn: OIT, OAT and OST move as transactions start and end", "[txnmgr]") {
  TxnEnv env;
  TxnManager& tm = *env.tm;
  REQUIRE_OK(tm.CreateInitial());
  txn::TxnCounters k = tm.counters();
  CHECK(k.next == 1);
  CHECK(k.oat == 1);
  CHECK(k.ost == 1);
  CHECK(k.oit == 1);

  const uint64_t t1 = BeginId(tm);  // active: {t1}
  const uint64_t t2 = BeginId(tm);  // active: {t1, t2}; t2 saw t1
  k = tm.counters();
  CHECK(k.next == t2 + 1);
  CHECK(k.oat == t1);
  CHECK(k.ost == t1);
  CHECK(k.oit == t1);

  REQUIRE_OK(tm.CommitNoWrites(t1));  // active: {t2}
  k = tm.counters();
  CHECK(k.oat == t2);
  CHECK(k.ost == t1);  // t2's snapshot began while t1 was active
  CHECK(k.oit == t2);

  const uint64_t t3 = BeginId(tm);  // saw t2
  REQUIRE_OK(tm.MarkDead(t2));      // active: {t3}
  k = tm.counters();
  CHECK(k.oat == t3);
  CHECK(k.ost == t2);
  CHECK(k.oit == t2);  // a dead transaction stays interesting

  REQUIRE_OK(tm.Commit(t3));  // nothing active
  k = tm.counters();
  CHECK(k.next == t3 + 1);
  CHECK(k.oat == k.next);
  CHECK(k.ost == k.next);
  CHECK(k.oit == t2);

  // Nothing moves OIT past the dead one, however many commit after it.
  for (int i = 0; i < 10; ++i) REQUIRE_OK(tm.CommitNoWrites(BeginId(tm)));
  CHECK(tm.counters().oit == t2);
  CHECK(tm.counters().commits == 12);
}
