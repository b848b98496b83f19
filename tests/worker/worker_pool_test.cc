// WorkerPool: every item runs once on up to W workers (the caller being worker 0), items are
// claimed dynamically, the first error cancels the task and is its result, Run returns only
// when no worker is inside, concurrent tasks share the threads, and idle threads end.
// Synchronisation is by latches, never by timing.
#include "engine/worker/worker_pool.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ember::worker {
namespace {

using namespace std::chrono_literals;

// Waits (up to a generous 30 s, which only a broken pool reaches) until `done()` holds.
template <typename F>
bool WaitUntil(F done) {
  for (int i = 0; i < 30000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return done();
}

TEST_CASE("worker pool: every item runs exactly once, on at most W workers", "[worker]") {
  WorkerPool pool(8, 60s);
  const int workers = GENERATE(1, 2, 3, 8);
  const size_t items = GENERATE(size_t{0}, size_t{1}, size_t{2}, size_t{5}, size_t{1000});
  INFO(workers << " workers, " << items << " items");
  std::vector<std::atomic<int>> runs(items);
  std::mutex mu;
  std::set<std::thread::id> threads;
  std::set<int> ids;
  const std::thread::id caller = std::this_thread::get_id();
  REQUIRE(pool.Run(workers, items,
                   [&](size_t i, const TaskContext& ctx) {
                     runs[i].fetch_add(1);
                     std::lock_guard<std::mutex> g(mu);
                     threads.insert(std::this_thread::get_id());
                     ids.insert(ctx.worker);
                     CHECK((ctx.worker == 0) == (std::this_thread::get_id() == caller));
                     return absl::OkStatus();
                   })
              .ok());
  for (size_t i = 0; i < items; ++i) REQUIRE(runs[i].load() == 1);
  CHECK(threads.size() <= static_cast<size_t>(workers));
  for (int id : ids) CHECK((id >= 0 && id < workers));
  if (workers == 1) {
    CHECK(pool.threads_alive() == 0);  // the caller did it all
    if (items > 0) CHECK(threads == std::set<std::thread::id>{std::this_thread::get_id()});
  }
}

TEST_CASE("worker pool: W workers really work at once, and a slow item does not hold the rest",
          "[worker]") {
  WorkerPool pool(4, 60s);
  // Item 0 blocks until every other item has run: only other workers can run them.
  std::atomic<int> others{0};
  std::atomic<bool> blocked_ok{false};
  std::mutex mu;
  std::set<int> workers_seen;
  const size_t items = 200;
  REQUIRE(pool.Run(4, items,
                   [&](size_t i, const TaskContext& ctx) {
                     {
                       std::lock_guard<std::mutex> g(mu);
                       workers_seen.insert(ctx.worker);
                     }
                     if (i == 0) {
                       blocked_ok =
                           WaitUntil([&] { return others.load() == static_cast<int>(items) - 1; });
                     } else {
                       others.fetch_add(1);
                     }
                     return absl::OkStatus();
                   })
              .ok());
  CHECK(blocked_ok.load());
  CHECK(workers_seen.size() >= 2);
  CHECK(pool.threads_alive() <= 3);
}

TEST_CASE("worker pool: the first error cancels the task and is its result", "[worker]") {
  WorkerPool pool(4, 60s);
  const int workers = GENERATE(1, 4);
  std::atomic<size_t> started{0};
  std::atomic<bool> saw_cancel{false};
  std::atomic<int> inside{0};
  absl::Status s = pool.Run(workers, 100000, [&](size_t i, const TaskContext& ctx) {
    inside.fetch_add(1);
    started.fetch_add(1);
    absl::Status r;
    if (i == 10) {
      // Fails once another worker is inside an item (one that waits for the cancellation).
      if (workers > 1) WaitUntil([&] { return inside.load() >= 2; });
      r = absl::DataLossError("item 10");
    } else if (i > 10 && workers > 1) {
      // Items in flight see the cancellation (the failing item runs on some worker).
      if (WaitUntil([&] { return ctx.cancelled(); })) saw_cancel = true;
    }
    inside.fetch_sub(1);
    return r;
  });
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK(s.message() == "item 10");
  CHECK(inside.load() == 0);       // nothing of the task runs after Run returned
  CHECK(started.load() < 100000);  // items not claimed never started
  if (workers > 1) CHECK(saw_cancel.load());
  // The pool goes on with the next task.
  std::atomic<int> n{0};
  REQUIRE(pool.Run(workers, 50,
                   [&](size_t, const TaskContext&) {
                     n.fetch_add(1);
                     return absl::OkStatus();
                   })
              .ok());
  CHECK(n.load() == 50);
}

TEST_CASE("worker pool: tasks from several threads at once all complete", "[worker]") {
  WorkerPool pool(3, 60s);
  std::vector<std::thread> callers;
  std::atomic<int> total{0};
  std::atomic<int> failures{0};
  for (int c = 0; c < 6; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < 20; ++round) {
        std::vector<std::atomic<int>> seen(97);
        absl::Status s = pool.Run(3, seen.size(), [&](size_t i, const TaskContext&) {
          seen[i].fetch_add(1);
          total.fetch_add(1);
          return absl::OkStatus();
        });
        if (!s.ok()) failures.fetch_add(1);
        for (auto& x : seen) {
          if (x.load() != 1) failures.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : callers) t.join();
  CHECK(failures.load() == 0);
  CHECK(total.load() == 6 * 20 * 97);
  CHECK(pool.threads_alive() <= 2);
}

TEST_CASE("worker pool: idle threads end after the timeout, and start again when needed",
          "[worker]") {
  WorkerPool pool(4, 50ms);
  auto busy = [&] {
    std::atomic<int> inside{0};
    std::atomic<bool> all{false};
    return pool.Run(4, 4, [&](size_t, const TaskContext&) {
      inside.fetch_add(1);
      // Each of the 4 items waits until 4 are inside at once (or gives up after 30 s).
      all = WaitUntil([&] { return inside.load() == 4; });
      return absl::OkStatus();
    });
  };
  REQUIRE(busy().ok());
  CHECK(pool.threads_alive() == 3);
  CHECK(WaitUntil([&] { return pool.threads_alive() == 0; }));
  REQUIRE(busy().ok());
  CHECK(pool.threads_alive() == 3);
}

TEST_CASE("worker pool: destroyed with live threads, it joins them", "[worker]") {
  std::atomic<int> n{0};
  {
    WorkerPool pool(4, 60s);
    REQUIRE(pool.Run(4, 1000,
                     [&](size_t, const TaskContext&) {
                       n.fetch_add(1);
                       return absl::OkStatus();
                     })
                .ok());
  }
  CHECK(n.load() == 1000);
}

}  // namespace
}  // namespace ember::worker
