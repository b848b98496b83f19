// What the two halves of the buffer cache share: the frame, the precedence edge, the write
// batch, and transaction mark bits. buffer_cache.cc holds the cache (page table, pins, latches,
// fetch, eviction), careful_write.cc the careful-write engine (precedence, batches, the
// doublewrite area, flush levels, sync). Not for other layers: they use buffer_cache.h.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "engine/cache/buffer_cache.h"
#include "engine/util/mutex.h"

namespace ember::cache {

constexpr PageNo kUnmapped = UINT32_MAX;

// A precedence edge, stored on the later page: `page` as of its modification sequence number
// `need` must be written (durably, unless the later page is fresh) before the later page.
struct Edge {
  PageNo page;
  uint64_t need;
};

struct Frame {
  std::atomic<uint32_t> pins{0};
  std::atomic<PageNo> page_no{kUnmapped};
  std::atomic<bool> ref{false};
  std::atomic<bool> dirty{false};    // mirror of the meta-guarded state, for lock-free checks
  std::atomic<bool> writing{false};  // a writer has copied the page and its write is in flight
  // A std::shared_mutex, not a util::SharedMutex: a latch is taken in a mode chosen at run time
  // and held across calls (by a PageRef), which the analysis cannot follow.
  std::shared_mutex latch;
  uint8_t* data = nullptr;
  uint32_t index = 0;
  bool valid = false;  // guarded by latch: contents loaded

  // Stored under meta, read without it by writers of pages that depend on this one: the
  // modification sequence number of the newest copy whose write has completed (set to the
  // current sequence number when the frame takes a page: what is on disk is all there is), and
  // the write epoch of that write (stored first, so a reader that sees a written_seq sees an
  // epoch at least as new). dirty_since: the sequence number of the Mark that made it dirty.
  std::atomic<uint64_t> written_seq{0};
  std::atomic<uint64_t> written_epoch{0};
  std::atomic<uint64_t> dirty_since{0};

  util::Mutex meta;
  uint64_t txn_mask ABSL_GUARDED_BY(meta) = 0;      // TxnBit of each marking transaction
  uint64_t mod_seq ABSL_GUARDED_BY(meta) = 0;       // the sequence number of the last Mark
  bool fresh ABSL_GUARDED_BY(meta) = false;         // FetchNew(kUnlinked) and not written since
  std::vector<Edge> prereqs ABSL_GUARDED_BY(meta);  // what to write before this page
};

// Copies of pages on their way to disk in one WriteBatch.
struct BufferCache::Batch {
  struct Item {
    Frame* f;
    PageNo no;
    uint64_t seq;  // mod_seq of the copy
    bool own;      // the caller's latched page or a claimed victim: no pin of ours to drop
    std::unique_ptr<uint8_t[]> bytes;  // null: nothing to write (clean by the time it was seen)
    bool fresh = false;                // first write since allocation: no protection copy needed
    uint64_t epoch = 0;  // set by the write: the write epoch that tracks its durability
  };
  std::vector<Item> items;
  absl::flat_hash_map<const Frame*, uint64_t> copied;  // frame -> mod_seq of its copy here
  uint64_t sync_epoch = 0;        // this write epoch must be durable before the batch goes out
  std::vector<uint64_t> commits;  // transactions its last record commits (doublewrite.h)
};

// A page's mark bits (Frame::txn_mask): bit 63 for kSystemMark, which every commit flush
// writes; bit 62 for kNoOwnerMark, which none does; transactions share bits 0..61 (a commit
// flush also writes the pages of the transactions that share its bit: more than it must, never
// less).
constexpr uint64_t kSystemBit = uint64_t{1} << 63;
constexpr uint64_t kNoOwnerBit = uint64_t{1} << 62;
inline uint64_t TxnBit(uint64_t txn) {
  if (txn == kSystemMark) return kSystemBit;
  if (txn == kNoOwnerMark) return kNoOwnerBit;
  return uint64_t{1} << (txn % 62);
}

inline void AtomicMax(std::atomic<uint64_t>& a, uint64_t v) {
  uint64_t cur = a.load();
  while (cur < v && !a.compare_exchange_weak(cur, v)) {
  }
}

}  // namespace ember::cache
