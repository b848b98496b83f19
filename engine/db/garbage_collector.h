// The background garbage collector (GCPolicy background / combined): a thread fed with the data
// pages that committed (or dead) transactions left versions on, as Firebird's GarbageCollector
// is fed by notify_garbage_collector. A page is collected once every active snapshot can see
// the commit that made its garbage (its CN is at or below the horizon); pages whose garbage an
// older snapshot still needs wait in the queue.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "engine/record/relation.h"
#include "engine/util/mutex.h"

namespace ember::db {

class DatabaseImpl;

class GarbageCollector {
 public:
  explicit GarbageCollector(DatabaseImpl* db);
  ~GarbageCollector();  // stops the thread (Stop)

  // Queues data pages (table id, page sequence) whose garbage becomes collectable once the
  // horizon reaches `cn` (0: at once, e.g. versions of a dead transaction).
  void Notify(const std::vector<std::pair<uint32_t, uint32_t>>& pages, uint64_t cn);
  // Collects everything queued that is collectable now, on the calling thread (tests, Close).
  absl::Status RunOnce() ABSL_LOCKS_EXCLUDED(mu_);
  void Stop();
  // Holds off collection rounds while the returned lock is held (waiting for one in flight):
  // CollectGarbage and Validate then see no half-done round (lines unlinked, not yet freed).
  std::unique_lock<std::mutex> Pause() { return std::unique_lock<std::mutex>(run_mu_); }
  // Pages waiting, plus those of the round in progress (0 only once their garbage is gone).
  size_t queued() const;
  // Lines of `table` that were unlinked but could not be freed (FreeUnlinked failed): the next
  // round frees them. Takes them from `*unlinked`.
  void KeepUnfreed(uint32_t table, std::vector<record::Unlinked>* unlinked)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop();

  DatabaseImpl* db_;
  mutable util::Mutex mu_;
  util::CondVar cv_;
  // (table, seq) -> CN at which its garbage becomes collectable (the highest notified).
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> queue_ ABSL_GUARDED_BY(mu_);
  size_t in_round_ ABSL_GUARDED_BY(mu_) = 0;  // pages taken from queue_ by the running round
  // Lines per table a failed FreeUnlinked left (see KeepUnfreed).
  std::map<uint32_t, std::vector<record::Unlinked>> unfreed_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // One collection round at a time. A std::mutex: it guards no fields, and Pause hands its lock
  // out (held or not, the caller's choice) as a std::unique_lock.
  std::mutex run_mu_;
  std::thread thread_;
};

}  // namespace ember::db
