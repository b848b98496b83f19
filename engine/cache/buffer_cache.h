// The buffer cache: a fixed set of page frames over the database file, with a lock-free page
// lookup, a pin count and a shared/exclusive latch per frame, clock eviction, dirty tracking per
// transaction, and careful-write precedence ("page A must reach disk before page B").
//
// Invariants and lock order:
// - A frame is reachable from the page table only while its page_no is set. A thread owns a
//   frame's identity (may change page_no or reuse the buffer) only while it has set kClaimed in
//   `pins` with no other pins; pinning threads that see kClaimed back off and retry.
// - Page bytes change only under the frame's exclusive latch; `Mark` records the change (dirty,
//   the transaction's bit, a modification sequence) under the frame's `meta` mutex.
// - Precedence edges are stored on the later page (`prereqs`): before that page is written, every
//   prerequisite that is resident and dirty is written first (and, with forced writes, synced).
// - Lock order: miss_mu_ -> (no latch is taken while holding miss_mu_); latch -> meta.
//   Writers of a chain take shared latches on prerequisite pages; a caller must not hold an
//   exclusive latch on a page that is a prerequisite of what it asks to flush (the engine only
//   flushes at commit and close, holding no latches, or through AddPrecedence's cycle breaking,
//   which writes the caller's own latched page from its ref).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/io/file.h"
#include "engine/page/page.h"
#include "engine/util/counters.h"

namespace ember::cache {

using page::PageNo;

enum class LatchMode { kShared, kExclusive };

struct CacheOptions {
  uint32_t page_size = page::kDefaultPageSize;
  uint32_t capacity = 2048;   // frames
  bool forced_writes = true;  // sync between precedence levels and after flushes
};

class BufferCache;
struct Frame;

// A pinned, latched page. Moving transfers the pin; destruction releases it.
class PageRef {
 public:
  PageRef() = default;
  PageRef(PageRef&& o) noexcept { *this = std::move(o); }
  PageRef& operator=(PageRef&& o) noexcept;
  PageRef(const PageRef&) = delete;
  PageRef& operator=(const PageRef&) = delete;
  ~PageRef() { Release(); }

  explicit operator bool() const { return frame_ != nullptr; }
  uint8_t* data() const;
  PageNo page_no() const { return page_no_; }
  bool exclusive() const { return mode_ == LatchMode::kExclusive; }
  // REQUIRES: exclusive. Records that the page changed on behalf of `txn` (0 = the engine itself):
  // the page is then written by that transaction's commit flush at the latest (a page marked
  // for 0, by the next commit flush of any transaction).
  void Mark(uint64_t txn);
  void Release();

 private:
  friend class BufferCache;
  BufferCache* cache_ = nullptr;
  Frame* frame_ = nullptr;
  PageNo page_no_ = 0;
  LatchMode mode_ = LatchMode::kShared;
};

class BufferCache {
 public:
  BufferCache(io::File* file, const CacheOptions& opts);
  ~BufferCache();
  BufferCache(const BufferCache&) = delete;
  BufferCache& operator=(const BufferCache&) = delete;

  // Pins and latches page `no`, reading and verifying it if not resident. Errors: DataLoss for a
  // bad checksum, OutOfRange for a page past the end of the file, ResourceExhausted when every
  // frame is pinned, or the read error.
  absl::StatusOr<PageRef> Fetch(PageNo no, LatchMode mode);
  // Pins page `no` exclusively without reading it (a newly allocated page): its bytes are zero.
  absl::StatusOr<PageRef> FetchNew(PageNo no);

  // Records that `first` must reach disk before `then` (whose exclusive ref the caller holds
  // and is about to change). If the edge would close a cycle, `first` (with its own chain,
  // including `then` as it is now) is written at once instead.
  absl::Status AddPrecedence(PageRef& then, PageNo first);

  // Writes every page dirtied by any of `txns` (and every dirty prerequisite) in precedence
  // order, in batches. Syncs between precedence levels and at the end when forced writes are on.
  absl::Status FlushTxns(std::span<const uint64_t> txns);
  // Writes the given pages (with prerequisites), same rules.
  absl::Status FlushPages(std::span<const PageNo> pages);
  // Writes every dirty page.
  absl::Status FlushAll();
  // Forgets every cached page without writing (after a simulated crash, or on close after a
  // failed flush). REQUIRES: nothing pinned.
  void DiscardAll();

  uint32_t page_size() const { return opts_.page_size; }
  uint32_t capacity() const { return opts_.capacity; }
  bool forced_writes() const { return opts_.forced_writes; }
  io::File* file() const { return file_; }
  util::PageCounters counters() const { return counters_.Total(); }
  // Number of dirty frames (for tests and stats).
  size_t DirtyCount() const;

 private:
  friend class PageRef;
  static constexpr uint32_t kClaimed = 0x80000000u;
  static constexpr uint32_t kChunkBits = 16;
  static constexpr uint32_t kChunkSize = 1u << kChunkBits;
  static constexpr uint32_t kChunks = 1u << (32 - kChunkBits);

  Frame* Lookup(PageNo no) const;
  void MapLocked(PageNo no, uint32_t frame_index);  // REQUIRES miss_mu_
  void UnmapLocked(PageNo no);                       // REQUIRES miss_mu_
  bool TryPin(Frame* f, PageNo no);
  void Unpin(Frame* f);
  void Latch(Frame* f, LatchMode m);
  void Unlatch(Frame* f, LatchMode m);
  absl::StatusOr<PageRef> Load(PageNo no, LatchMode mode, bool read);
  absl::StatusOr<Frame*> ClaimVictim();
  bool IsDirtyResident(PageNo no) const;

  // Writes the pages in `order` (already in precedence order, grouped in levels).
  // How a flush treats busy pages: a commit/close flush waits for latches and syncs at the end;
  // an eviction flush (the cache is full of dirty pages whose prerequisites are dirty too) may
  // run while the caller holds latches, so it never blocks: it stops at the first busy page.
  enum class FlushMode { kDurable, kEvict };
  // Each entry is a frame with the page it held when the levels were computed: a frame that holds
  // another page by the time its level is written was evicted (so written) and reused meanwhile,
  // and is skipped (writing its new page here could break that page's precedence).
  absl::Status WriteLevels(std::vector<std::vector<std::pair<Frame*, PageNo>>>& levels,
                           Frame* held, FlushMode mode);
  // file_->Sync(), first clearing unsynced_writes_.
  absl::Status SyncFile();
  absl::Status FlushSet(std::vector<Frame*> roots, Frame* held,
                        FlushMode mode = FlushMode::kDurable);
  // Writes some dirty, unpinned pages with their prerequisites so that eviction finds victims.
  void CleanForEviction();
  absl::Status WriteClaimed(Frame* f);

  io::File* file_;
  CacheOptions opts_;
  std::unique_ptr<uint8_t[], void (*)(void*)> arena_{nullptr, nullptr};
  std::vector<std::unique_ptr<Frame>> frames_;
  std::unique_ptr<std::atomic<std::atomic<uint32_t>*>[]> table_;  // chunk pointers
  std::mutex miss_mu_;                                              // misses, eviction, mapping
  uint32_t clock_hand_ = 0;                                         // guarded by miss_mu_
  // Set after every page write, cleared just before every sync: a write may not be durable yet.
  // With forced writes, a page whose precedence edges point at pages written since (by an
  // eviction, which does not sync) is written only after a sync while this is set.
  std::atomic<bool> unsynced_writes_{false};
  mutable util::ShardedCounters counters_;
};

}  // namespace ember::cache
