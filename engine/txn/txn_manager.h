// Transaction ids, states and commit numbers; the TIP pages; group commit; waiting for a
// conflicting transaction (with deadlock detection).
//
// Model (architecture.md, "MVCC"): a committed transaction gets a commit number (CN); a snapshot
// is a CN; a version is visible to a snapshot when its writer committed with CN <= snapshot.
// Commit numbers live only in memory: transactions committed before the database was opened all
// get kCnPrehistoric, which every snapshot sees. Transaction ids come from memory and are
// reserved in blocks on the header page, so starting a transaction writes nothing.
//
// Commit (group commit): committing threads queue; one of them becomes the leader, flushes the
// pages of every queued transaction in one batched, precedence-ordered write (one sync), sets
// their TIP bits, writes the TIP pages (one sync), and only then publishes their commit numbers.
// The syncs the leader issued count in its own counters as it issues them, and each waiter adds
// them to its own (Counters::syncs: once per transaction that waited on them).
//
// Lock order: commit_mu_ is never held during I/O; tip_mu_ -> cache latches; wait_mu_ alone.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/cache/buffer_cache.h"
#include "engine/cache/page_space.h"
#include "engine/page/tip.h"
#include "engine/util/mutex.h"

namespace ember::txn {

// Commit-number values with special meaning; real commit numbers start at kCnFirst.
constexpr uint64_t kCnActive = 0;
constexpr uint64_t kCnDead = 1;
constexpr uint64_t kCnLimbo = 2;
constexpr uint64_t kCnPrehistoric = 3;  // committed before this open
constexpr uint64_t kCnFirst = 4;

inline bool IsCommittedCn(uint64_t cn) { return cn >= kCnPrehistoric; }

struct TxnCounters {
  uint64_t next = 0, oit = 0, oat = 0, ost = 0;
  uint64_t commits = 0, group_flushes = 0;
};

class TxnManager {
 public:
  // `persist_next(n)` durably records on the header page that no id >= n was handed out; it is
  // called with a block reservation ahead of use.
  TxnManager(cache::BufferCache* cache, cache::PageSpace* space,
             std::function<absl::Status(uint64_t)> persist_next);
  ~TxnManager();

  // For a new database: creates the first TIP page (returned) and starts ids at 1.
  absl::StatusOr<page::PageNo> CreateInitial();
  // For an existing database: loads the TIP chain from `first_tip`, states of [oit, next) into
  // memory; every transaction left active by a crash becomes dead (written to the TIP).
  absl::Status Load(page::PageNo first_tip, uint64_t oit, uint64_t next);

  struct Started {
    uint64_t id;
    uint64_t snapshot;  // CN visible to a snapshot transaction
  };
  absl::StatusOr<Started> Begin();
  // The newest published CN (what a read-committed statement sees).
  uint64_t CurrentCn() const { return last_cn_.load(std::memory_order_acquire); }
  // kCnActive, kCnDead, kCnLimbo or the transaction's CN.
  uint64_t StateOf(uint64_t txn) const;

  // `counted` false: a rollback that undid everything ends as an empty commit (it then holds
  // back no one), which the commits counter does not count.
  absl::Status Commit(uint64_t txn, bool counted = true);
  // Commit of a transaction that changed no page: nothing to flush, so no sync; its TIP bit is
  // written lazily (if lost in a crash it reads as dead, which is the same for a reader).
  absl::Status CommitNoWrites(uint64_t txn, bool counted = true);
  // Marks `txn` dead (rolled back): its versions are ignored by every reader from now on.
  // A transaction whose commit is in doubt (see CommitGroup) stays active instead: its versions
  // must not be backed out while the disk may say it committed. Unknown is returned then.
  absl::Status MarkDead(uint64_t txn);

  // Blocks until `other` is no longer active, `timeout_ms` passes (-1: no limit) or waiting
  // would deadlock. Returns the state of `other` afterwards, or Aborted (deadlock) /
  // DeadlineExceeded (timeout).
  absl::StatusOr<uint64_t> WaitFor(uint64_t self, uint64_t other, int64_t timeout_ms);

  // The transactions still active, in no particular order (what Close ends).
  std::vector<uint64_t> ActiveIds() const;

  TxnCounters counters() const;
  // Garbage-collection horizon: every active transaction's snapshot sees every version committed
  // at or before this CN (read-committed transactions count with the CN they started at).
  uint64_t OldestSnapshotCn() const;
  uint64_t next_id() const { return next_.load(std::memory_order_acquire); }
  // After a sweep removed every version of the dead transactions below `txn` (and those
  // removals are on disk): the OIT may pass them. A dead transaction stays dead in the TIP;
  // below the OIT nothing asks.
  // At most the OIT (where its last computation stopped): for cheap checks.
  uint64_t oit_lower_bound() const {
    return std::max(base_, oit_scan_.load(std::memory_order_relaxed));
  }
  void SetSweptBelow(uint64_t txn) {
    uint64_t cur = swept_below_.load(std::memory_order_relaxed);
    while (cur < txn && !swept_below_.compare_exchange_weak(cur, txn)) {
    }
  }
  page::PageNo first_tip() const;

 private:
  std::atomic<uint64_t>* Slot(uint64_t txn) const;  // nullptr below base_
  absl::Status EnsureTip(uint64_t txn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(tip_mu_);
  absl::Status SetTipState(uint64_t txn, page::TxnState s, std::vector<page::PageNo>* touched);
  absl::Status CommitGroup(const std::vector<uint64_t>& txns);
  // The TIP pages holding `txns`' states, latched exclusively, one per page: a commit holds them
  // from setting its bits until its flush has written them.
  struct HeldTips {
    std::vector<uint64_t> index;  // TIP block k of each page
    std::vector<cache::PageRef> refs;
    cache::PageRef& For(uint64_t txn, uint64_t per_tip);
  };
  absl::StatusOr<HeldTips> LatchTips(const std::vector<uint64_t>& txns);
  // After the commit marks of `txns` were set but could not be made durable (`cause`; a sync
  // failed on the way, or only writes).
  absl::Status FailCommit(const std::vector<uint64_t>& txns, const absl::Status& cause,
                          bool sync_failed, HeldTips& tips);
  // Transactions one group commit takes at most: its record names them all.
  static constexpr size_t kMaxGroup = page::kDwMaxCommits;
  void Finished(uint64_t txn);
  void Publish(uint64_t txn);

  static constexpr uint32_t kChunkBits = 16;
  static constexpr uint64_t kChunkSize = uint64_t{1} << kChunkBits;
  static constexpr uint32_t kChunks = 1u << 16;
  static constexpr uint64_t kReserveBlock = 4096;

  cache::BufferCache* cache_;
  cache::PageSpace* space_;
  std::function<absl::Status(uint64_t)> persist_next_;
  const uint64_t per_tip_;

  uint64_t base_ = 1;  // ids below are committed (prehistoric)
  std::unique_ptr<std::atomic<std::atomic<uint64_t>*>[]> chunks_;
  util::Mutex chunk_mu_;  // allocation of chunks

  std::atomic<uint64_t> next_{1};
  mutable std::atomic<uint64_t> oit_scan_{0};  // where the last OIT scan stopped
  std::atomic<uint64_t> swept_below_{0};       // see SetSweptBelow
  std::atomic<uint64_t> last_cn_{kCnPrehistoric};
  util::Mutex cn_mu_;                              // publication of commit numbers, in order
  util::Mutex id_mu_;                              // id reservation
  uint64_t reserved_ ABSL_GUARDED_BY(id_mu_) = 0;  // ids below are covered by the header

  mutable util::Mutex tip_mu_;
  std::vector<page::PageNo> tips_ ABSL_GUARDED_BY(tip_mu_);  // TIP page of block k

  // Active transactions: the oldest active id each saw at start (for OST) and its snapshot.
  struct ActiveInfo {
    uint64_t oldest;
    uint64_t snapshot;
  };
  mutable util::Mutex active_mu_ ABSL_ACQUIRED_AFTER(id_mu_);
  absl::flat_hash_map<uint64_t, ActiveInfo> active_ ABSL_GUARDED_BY(active_mu_);

  // Group commit.
  struct CommitRequest;
  util::Mutex commit_mu_;
  util::CondVar commit_cv_;
  std::vector<CommitRequest*> commit_queue_ ABSL_GUARDED_BY(commit_mu_);
  bool leader_active_ ABSL_GUARDED_BY(commit_mu_) = false;
  std::atomic<uint64_t> commits_{0};
  std::atomic<uint64_t> group_flushes_{0};
  // Transactions whose commit is in doubt until the database is reopened (FailCommit).
  absl::flat_hash_set<uint64_t> in_doubt_ ABSL_GUARDED_BY(active_mu_);

  // Waiting for other transactions.
  util::Mutex wait_mu_;
  util::CondVar wait_cv_;
  absl::flat_hash_map<uint64_t, uint64_t> waits_for_ ABSL_GUARDED_BY(wait_mu_);
};

}  // namespace ember::txn
