// The database's pool of parallel workers (Firebird 5's parallel workers, for the index build
// and the sweep). A task is a number of items claimed one by one from a shared counter, so
// uneven items balance; the calling thread works on it as worker 0 and pool threads join as
// workers 1..W-1 when they are free. Threads start when a task first needs them and end after
// `idle_timeout` without work. The first error of any item cancels the task (items not yet
// claimed never start; items in flight see TaskContext::cancelled()) and is its result; Run
// returns only once no worker is inside the task any more.
//
// Thread safety: Run may be called from several threads at once; a task never waits for
// another's items (with no free thread it runs on fewer workers, down to its caller alone).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <span>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "engine/util/mutex.h"

namespace ember::worker {

struct Task;

class TaskContext {
 public:
  int worker = 0;  // 0: the thread that called Run; pool threads 1..W-1
  // True once some item of the task failed: a long item should stop early.
  bool cancelled() const;

 private:
  friend class WorkerPool;
  const Task* task_ = nullptr;
};

class WorkerPool {
 public:
  // At most `max_workers` workers per task (1..64), the caller included, so at most
  // max_workers - 1 threads.
  WorkerPool(int max_workers, std::chrono::milliseconds idle_timeout);
  ~WorkerPool();  // joins every thread (no Run may be in progress)
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // The workers a task asking for `requested` gets: at least 1, at most max_workers.
  int WorkersFor(int requested) const;
  using ItemFn = std::function<absl::Status(size_t item, const TaskContext& ctx)>;
  // Runs fn(item, ctx) for every item in [0, items) on WorkersFor(workers) workers.
  absl::Status Run(int workers, size_t items, const ItemFn& fn);

  int threads_alive() const;
  uint64_t tasks_run() const { return tasks_run_.load(); }

 private:
  struct Thread {
    std::thread t;
    // Guarded by the pool's mu_ (an annotation here cannot name the pool's member).
    bool exited = false;
  };
  void Loop(Thread* self);
  static void Work(Task* task, int worker);
  // Moves exited threads to `done` (joined outside).
  void ReapLocked(std::list<Thread>* done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int max_workers_;
  const std::chrono::milliseconds idle_timeout_;
  mutable util::Mutex mu_;
  util::CondVar cv_;                              // work queued, or stop
  std::deque<Task*> queue_ ABSL_GUARDED_BY(mu_);  // tasks that want more workers
  std::list<Thread> threads_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;  // threads waiting for work
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> tasks_run_{0};
};

// A piece of a task over parts of different sizes (the data page sequences of several tables,
// say): units [first, end) of part `part`.
struct Chunk {
  uint32_t part = 0;
  uint32_t first = 0, end = 0;
};
// Parts of sizes[i] units cut into chunks of `per` units (the last of each part shorter), in
// part order; a part of no units gives none.
std::vector<Chunk> CutChunks(std::span<const uint32_t> sizes, uint32_t per);

// Runs fn(item, ctx, local) for every item on `workers` workers, `local` being the running
// worker's own element of `*locals` (resized to the workers the task gets; elements already
// there are kept): per-worker state and tallies that the caller gathers afterwards, no lock.
template <typename Local, typename Fn>
absl::Status RunWithLocals(WorkerPool* pool, int workers, size_t items, std::vector<Local>* locals,
                           Fn&& fn) {
  const int w = pool->WorkersFor(workers);
  if (locals->size() < static_cast<size_t>(w)) locals->resize(static_cast<size_t>(w));
  return pool->Run(w, items, [&](size_t item, const TaskContext& ctx) -> absl::Status {
    return fn(item, ctx, (*locals)[static_cast<size_t>(ctx.worker)]);
  });
}

}  // namespace ember::worker
