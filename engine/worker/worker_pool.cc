// WorkerPool (see worker_pool.h).
#include "engine/worker/worker_pool.h"

#include <algorithm>
#include <system_error>

namespace ember::worker {

struct Task {
  const WorkerPool::ItemFn* fn = nullptr;
  size_t items = 0;
  std::atomic<size_t> next{0};
  std::atomic<bool> cancelled{false};
  util::Mutex mu;
  util::CondVar left;  // a helper left the task
  absl::Status first_error ABSL_GUARDED_BY(mu);
  // Guarded by the pool's mu_ (an annotation here cannot name the pool's member).
  int want = 0;                        // helpers still welcome
  int joined = 0;                      // helpers that came (1..)
  int inside ABSL_GUARDED_BY(mu) = 0;  // helpers working on it now
};

bool TaskContext::cancelled() const {
  return task_ != nullptr && task_->cancelled.load(std::memory_order_relaxed);
}

WorkerPool::WorkerPool(int max_workers, std::chrono::milliseconds idle_timeout)
    : max_workers_(std::clamp(max_workers, 1, 64)), idle_timeout_(idle_timeout) {}

WorkerPool::~WorkerPool() {
  std::list<Thread> all;
  {
    util::MutexLock g(mu_);
    stop_ = true;
    all.swap(threads_);
  }
  cv_.NotifyAll();
  for (Thread& t : all) t.t.join();
}

int WorkerPool::WorkersFor(int requested) const { return std::clamp(requested, 1, max_workers_); }

std::vector<Chunk> CutChunks(std::span<const uint32_t> sizes, uint32_t per) {
  std::vector<Chunk> out;
  for (uint32_t part = 0; part < sizes.size(); ++part) {
    for (uint32_t first = 0; first < sizes[part]; first += per) {
      out.push_back({part, first, std::min(sizes[part], first + per)});
    }
  }
  return out;
}

int WorkerPool::threads_alive() const {
  util::MutexLock g(mu_);
  int n = 0;
  for (const Thread& t : threads_) n += t.exited ? 0 : 1;
  return n;
}

void WorkerPool::ReapLocked(std::list<Thread>* done) {
  for (auto it = threads_.begin(); it != threads_.end();) {
    auto next = std::next(it);
    if (it->exited) done->splice(done->end(), threads_, it);
    it = next;
  }
}

void WorkerPool::Work(Task* task, int worker) {
  TaskContext ctx;
  ctx.worker = worker;
  ctx.task_ = task;
  while (!task->cancelled.load(std::memory_order_relaxed)) {
    const size_t i = task->next.fetch_add(1, std::memory_order_relaxed);
    if (i >= task->items || task->cancelled.load(std::memory_order_relaxed)) break;
    absl::Status s = (*task->fn)(i, ctx);
    if (!s.ok()) {
      util::MutexLock g(task->mu);
      if (task->first_error.ok()) task->first_error = std::move(s);
      task->cancelled.store(true);
    }
  }
}

void WorkerPool::Loop(Thread* self) {
  util::MutexLock g(mu_);
  for (;;) {
    ++idle_;
    const bool woke = cv_.WaitFor(g, idle_timeout_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stop_ || !queue_.empty();
    });
    --idle_;
    if (stop_ || !woke) break;  // stopping, or idle for the whole timeout
    Task* task = queue_.front();
    const int worker = ++task->joined;
    if (--task->want == 0) queue_.pop_front();
    {
      util::MutexLock tg(task->mu);
      ++task->inside;
    }
    g.Unlock();
    Work(task, worker);
    {
      util::MutexLock tg(task->mu);
      --task->inside;
      // Notified under the task's mutex: the caller may destroy the task once it sees 0.
      task->left.NotifyAll();
    }
    g.Lock();
  }
  self->exited = true;
}

absl::Status WorkerPool::Run(int workers, size_t items, const ItemFn& fn) {
  if (items == 0) return absl::OkStatus();
  tasks_run_.fetch_add(1);
  Task task;
  task.fn = &fn;
  task.items = items;
  const int helpers =
      static_cast<int>(std::min<size_t>(static_cast<size_t>(WorkersFor(workers) - 1), items - 1));
  std::list<Thread> done;
  if (helpers > 0) {
    util::MutexLock g(mu_);
    ReapLocked(&done);
    task.want = helpers;
    queue_.push_back(&task);
    // Threads for the helpers no idle thread can be: up to max_workers - 1 in all.
    int alive = 0;
    for (const Thread& t : threads_) alive += t.exited ? 0 : 1;
    const int start = std::min(helpers - idle_, max_workers_ - 1 - alive);
    for (int i = 0; i < start; ++i) {
      threads_.emplace_back();
      Thread* t = &threads_.back();
      try {
        t->t = std::thread([this, t] { Loop(t); });
      } catch (const std::system_error&) {
        // No thread to be had (the process's limit): the task runs on fewer workers.
        threads_.pop_back();
        break;
      }
    }
  }
  for (Thread& t : done) t.t.join();
  if (helpers > 0) cv_.NotifyAll();
  Work(&task, 0);
  if (helpers > 0) {
    // No helper joins from now on; then wait for those inside.
    {
      util::MutexLock g(mu_);
      auto it = std::find(queue_.begin(), queue_.end(), &task);
      if (it != queue_.end()) queue_.erase(it);
    }
    util::MutexLock tg(task.mu);
    task.left.Wait(tg, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(task.mu) { return task.inside == 0; });
  }
  util::MutexLock tg(task.mu);
  return task.first_error;
}

}  // namespace ember::worker
