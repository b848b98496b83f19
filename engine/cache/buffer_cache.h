// The buffer cache: a fixed set of page frames over the database file, with a lock-free page
// lookup, a pin count and a shared/exclusive latch per frame, clock eviction, dirty tracking per
// transaction, and careful-write precedence ("page A must reach disk before page B").
//
// Invariants and lock order:
// - A frame is reachable from the page table only while its page_no is set. A thread owns a
//   frame's identity (may change page_no or reuse the buffer) only while it has set kClaimed in
//   `pins` with no other pins; pinning threads that see kClaimed back off and retry.
// - Page bytes change only under the frame's exclusive latch; `Mark` records the change (dirty,
//   the transaction's bit, a modification sequence number) under the frame's `meta` mutex. At
//   most one `meta` mutex is held at a time.
// - Lock order: miss_mu_ -> (no latch is taken while holding miss_mu_); latch -> meta.
//   Writers of a chain take shared latches on prerequisite pages; a caller must not hold an
//   exclusive latch on a page that is a prerequisite of what it asks to flush (the engine only
//   flushes at commit and close, holding no latches, or through AddPrecedence's cycle breaking,
//   which writes the caller's own latched page from its ref).
//
// Careful write (architecture.md, "Durability"): AddPrecedence(B, A) records on B an edge to A's
// current version (its modification sequence number). The rule checked before every single page
// write, by the writer, under B's latch (so no edge can be added meanwhile), is:
// - B may be written only once every version B's edges ask for has been written (a write
//   completed). Otherwise B waits (a commit flush writes it in a later round; an eviction skips
//   it).
// - With forced writes, B may be written only once those writes are also durable (synced) -
//   unless B is "fresh": allocated from a PIP (FetchNew(kUnlinked)) and not written since. Nothing
//   on disk links to a fresh page, and every page that will link to it records an edge to it, so
//   that page is written only once B is durable; and B's prerequisites were written no later
//   than B, so the sync that makes B durable makes them durable too. A fresh page may therefore
//   go out in the same batch as its prerequisites, with no sync between (prerequisites whose
//   needed version is only in the same batch are allowed for fresh pages only).
// - Without forced writes there is no sync at all; the order of completed writes still holds,
//   which is what a process crash (SIGKILL) can observe.
// Durability is tracked in write epochs: a write completed while the epoch counter reads e is
// durable once a sync that started after the counter moved past e has returned (durable_epoch_
// >= e), so a sync another thread already made is never repeated. A flush groups pages in levels
// (a non-fresh page one level above its highest prerequisite still to be written, a fresh page on
// its prerequisites' level), writes each level as one batch and syncs between levels; the rule
// above is still checked per page, and a batch holding a page whose prerequisite was written
// earlier (by an eviction) but is not durable yet syncs first. Evictions clean the oldest quarter
// of the cache in one such flush, so a bulk load costs a few syncs per quarter of the cache.
// With torn-page protection (doublewrite.h) every page goes home only after its image is durable
// in a record, and records apply whole and in order at recovery; so a flush puts all its levels
// in one batch (a page may follow any prerequisite of the same batch), whose records take one
// sync before the home writes, and no sync is needed between levels.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/cache/doublewrite.h"
#include "engine/io/file.h"
#include "engine/page/page.h"
#include "engine/util/counters.h"
#include "engine/util/large_alloc.h"
#include "engine/util/mutex.h"

namespace ember::cache {

using page::PageNo;

enum class LatchMode { kShared, kExclusive };

struct CacheOptions {
  uint32_t page_size = page::kDefaultPageSize;
  uint32_t capacity = 2048;   // frames
  bool forced_writes = true;  // prerequisites durable before dependents; flushes end synced
};

// What a page handed out by FetchNew is to the file on disk.
enum class NewPage {
  kPlaced,    // may be found on disk without a link (a PIP, the first pages): ordinary rules
  kUnlinked,  // nothing on disk links to it (just allocated from a PIP): "fresh" until written
};

class BufferCache;
struct Frame;

// Mark ids (PageRef::Mark) that are no transaction's. kSystemMark: a change of the engine itself
// that makes pages reachable (a pointer page that gained a data page, a B-tree split's links, a
// PIP): every commit flush writes such pages, so a committed change never outlives on disk the
// link to its page. kNoOwnerMark: a change no transaction owns (garbage collection, hints such as
// a pointer page's has-garbage flag): no commit flush writes it; eviction, FlushAll (the sweep,
// Close) and the flushes of later changes to the same page do.
inline constexpr uint64_t kSystemMark = 0;
inline constexpr uint64_t kNoOwnerMark = ~uint64_t{0};

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
  // REQUIRES: exclusive. Records that the page changed on behalf of transaction `txn`: the
  // page is then written by that transaction's commit flush at the latest. Two ids no
  // transaction has: kSystemMark (written by the next commit flush of any transaction) and
  // kNoOwnerMark (by no commit flush).
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
  // The cache the database opens with (buffer_cache_create.cc): InvalidArgument when `opts`
  // asks for more memory than this machine has, ResourceExhausted when its frames cannot be
  // allocated; the constructor would throw std::bad_alloc.
  static absl::StatusOr<std::unique_ptr<BufferCache>> Create(io::File* file,
                                                             const CacheOptions& opts);
  BufferCache(io::File* file, const CacheOptions& opts);
  ~BufferCache();
  BufferCache(const BufferCache&) = delete;
  BufferCache& operator=(const BufferCache&) = delete;

  // Pins and latches page `no`, reading and verifying it if not resident. Errors: DataLoss for a
  // bad checksum, OutOfRange for a page past the end of the file, ResourceExhausted when every
  // frame is pinned, or the read error.
  absl::StatusOr<PageRef> Fetch(PageNo no, LatchMode mode);
  // Pins page `no` exclusively without reading it (a newly allocated page): its bytes are zero.
  // kUnlinked promises that nothing on disk links to the page (see "fresh" above).
  absl::StatusOr<PageRef> FetchNew(PageNo no, NewPage kind = NewPage::kPlaced);

  // Records that `first`, as it is now, must reach disk before `then` (whose exclusive ref the
  // caller holds and is about to change). Nothing is recorded when that version of `first` is
  // already on disk (durably, with forced writes). If the edge would close a cycle, `first`
  // (with its own chain, including `then` as it is now) is written at once instead.
  absl::Status AddPrecedence(PageRef& then, PageNo first);
  // Whether page `no` as it is now is on disk (durably, with forced writes): what a page that
  // is to say something about it may rely on without an edge.
  bool IsOnDisk(PageNo no);
  // The version page `no` has now, for IsOnDisk(no, version) later: 0 when it is on disk now.
  uint64_t VersionNow(PageNo no);
  // Whether that version of page `no` (or a newer one) is on disk, durably with forced writes.
  // False also when a newer write of it is not durable yet: ask again later.
  bool IsOnDisk(PageNo no, uint64_t version);

  // Writes every page dirtied by any of `txns` (and every prerequisite still to be written) in
  // precedence order, in batches; with forced writes, syncs where the rules above need it and
  // at the end, so that everything is durable when it returns.
  absl::Status FlushTxns(std::span<const uint64_t> txns);
  // A commit's flush: FlushTxns, then `tips` (pages the caller holds latched exclusively, with
  // the commit bits of `txns` set) after every other page of the flush. With torn-page
  // protection they all go into the area's records, the tips in the last one, which names
  // `txns` as committed; one sync makes the whole durable.
  absl::Status FlushCommit(std::span<const uint64_t> txns, std::span<PageRef> tips);
  // Writes `pages`, which the caller holds latched exclusively (with prerequisites, same rules).
  absl::Status FlushHeld(std::span<PageRef> pages);
  // Writes the given pages (with prerequisites), same rules.
  absl::Status FlushPages(std::span<const PageNo> pages);
  // FlushPages for a write careful write forces before its time (a page that must be on disk
  // before what it stopped pointing at is freed, a new PIP): counted as cycle_writes too.
  absl::Status FlushPagesEarly(std::span<const PageNo> pages);
  // Read-ahead: reads those of `pages` (at most kMaxPrefetch, and an eighth of the cache) that
  // are not resident, consecutive page numbers in one read each, so that the Fetches that
  // follow hit. Best effort: errors are left for those Fetches to report.
  void Prefetch(std::span<const PageNo> pages);
  // Each page being read ahead is latched by the calling thread until its read is done; 32
  // keeps that well under what lock checkers track per thread (TSan: 64).
  static constexpr size_t kMaxPrefetch = 32;
  // Writes every dirty page.
  absl::Status FlushAll();
  // Torn-page protection (doublewrite.h): from now on every page written in place is copied into
  // the doublewrite area first. `start` is what RecoverDoublewrite found at open. Call before
  // any write.
  void EnableDoublewrite(const DwRecovery& start);
  // Pages one record of the area holds (0 without protection): a flush of more takes several.
  uint32_t doublewrite_record_pages() const { return dw_ ? dw_->max_items(0) : 0; }
  // Flushes that waited for the area's lazy home writes (doublewrite.h) because it was full.
  uint64_t doublewrite_stalls() const { return dw_ ? dw_->stalls() : 0; }
  // Writes home every page the area's records hold (doublewrite.h: they go home lazily) and
  // syncs: afterwards the file itself holds every page's durable version, as a reader of the
  // raw file expects (and an open, which reads page 0 before it applies the records).
  absl::Status Checkpoint();
  // Writes home what the area's records hold, without a sync: the lazy writer's round, now.
  absl::Status WriteHomes() { return dw_ ? dw_->WriteHomes() : absl::OkStatus(); }
  // At a clean close, after FlushAll: writes home what the area's records still hold, syncs, and
  // voids the records, so that the next open finds nothing to apply.
  absl::Status RetireDoublewrite();
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
  // Syncs the cache has issued (for tests and benchmarks).
  uint64_t SyncCount() const { return syncs_.load(std::memory_order_relaxed); }
  // Syncs the file for its owner (the header, Close), as the cache's own syncs: counted in
  // `syncs` (the database's and the calling thread's sinks), and every write completed before
  // it is durable afterwards.
  absl::Status Sync();
  // Adds `n` to the database's `syncs` only: syncs of the file made before the cache existed
  // (the doublewrite recovery at open).
  void CountSyncs(uint64_t n);
  // Syncs the calling thread has issued through any cache so far: the difference over a call
  // is what that call synced (a group commit's leader hands it to the transactions it commits).
  static uint64_t SyncsByThisThread();
  // Syncs that failed: after one, what was written before it is not known durable - nor known
  // lost (the commit path tells "in doubt" from "not written" by it).
  uint64_t SyncFailures() const { return sync_failures_.load(std::memory_order_acquire); }
  // Times an eviction found no victim while other threads' reads or writes held frames, and
  // waited for them (for tests).
  uint64_t EvictionWaits() const { return eviction_waits_.load(std::memory_order_relaxed); }

 private:
  friend class PageRef;
  static constexpr uint32_t kClaimed = 0x80000000u;
  static constexpr uint32_t kChunkBits = 16;
  static constexpr uint32_t kChunkSize = 1u << kChunkBits;
  static constexpr uint32_t kChunks = 1u << (32 - kChunkBits);

  Frame* Lookup(PageNo no) const;
  // Page `no`'s frame (null: not resident), its current version, and whether that version is
  // unwritten, or on disk durably (AddPrecedence, IsOnDisk).
  struct DiskState {
    Frame* frame = nullptr;
    uint64_t need = 0;
    bool unwritten = false;
    bool on_disk = false;
  };
  // With `version`, that version of the page (or a newer one) instead of its current one.
  DiskState StateOnDisk(PageNo no, uint64_t version = 0);
  void MapLocked(PageNo no, uint32_t frame_index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(miss_mu_);
  void UnmapLocked(PageNo no) ABSL_EXCLUSIVE_LOCKS_REQUIRED(miss_mu_);
  bool TryPin(Frame* f, PageNo no);
  void Unpin(Frame* f);
  void Latch(Frame* f, LatchMode m);
  void Unlatch(Frame* f, LatchMode m);
  absl::StatusOr<PageRef> Load(PageNo no, LatchMode mode, bool read);
  // A frame for page `no`: claimed (a victim written out if dirty), mapped to `no`, pinned,
  // latched exclusively and not yet valid. Aborted if another thread mapped `no` first.
  // `clean_only`: only a clean victim, never blocking on cleaning (ResourceExhausted if none).
  absl::StatusOr<Frame*> ClaimFor(PageNo no, bool clean_only);
  // Undoes ClaimFor after its read failed: unmapped, unlatched, unpinned.
  void AbandonLoad(Frame* f, PageNo no);
  // A victim frame, claimed, or null when there is none. Dirty frames qualify only with
  // `take_dirty` and when they may be written now (WriteClaimed then writes them).
  Frame* ClaimVictim(bool take_dirty) ABSL_EXCLUSIVE_LOCKS_REQUIRED(miss_mu_);
  // Tries of ClaimFor (cleaning between them) before it waits for other threads' I/O or fails.
  static constexpr int kQuickClaims = 16;
  // ResourceExhausted saying what holds the frames (pinned, dirty and waiting).
  absl::Status NoVictimError() const;

  struct Batch;
  // Whether `f` may be written now (the rule in the file comment). REQUIRES f->meta (Frame is
  // incomplete here, so the definition asserts it for the analysis), and f latched or claimed
  // so that no edge is added meanwhile. `batch`: the copies about to go out with it.
  // Returns false when it must wait; otherwise *sync_epoch is the newest write epoch that must be
  // durable before it is written (0: none).
  bool MayWrite(const Frame* f, const Batch* batch, uint64_t* sync_epoch) const;
  // Copies `f` (latched or claimed; takes its meta) into `batch` if dirty and MayWrite allows, or
  // regardless with `force` (after a sync: the last resort of a flush stuck on a cycle). Returns
  // false when it must wait.
  bool AddToBatch(Frame* f, PageNo no, bool own, bool force, Batch& batch);
  // Page-sized buffers for the copies a batch writes, kept for reuse (a malloc and its page
  // faults per written page showed in bulk loads).
  std::unique_ptr<uint8_t[]> TakeCopyBuffer();
  void GiveCopyBuffer(std::unique_ptr<uint8_t[]> b);
  // Writes the batch (after a sync if it needs one), then marks its pages written, clean if
  // unchanged since the copy, and releases their `writing` flags and pins. Raises *epoch_out
  // (if given) to the write epoch of the batch.
  absl::Status Submit(Batch& batch, uint64_t* epoch_out = nullptr);
  bool Durable(uint64_t epoch) const {
    return !opts_.forced_writes || epoch <= durable_epoch_.load(std::memory_order_acquire);
  }

  // Writes the pages of `levels` (precedence order, see FlushSet) level by level, in batches.
  // How a flush treats busy pages: a commit/close flush waits for latches; an eviction flush (the
  // cache is full of dirty pages) may run while the caller holds latches, so it never blocks: it
  // skips busy pages and pages that may not be written yet. Pages a commit flush could not write
  // yet (a prerequisite changed or gained an edge after the levels were computed) go to `later`.
  // Each entry is a frame with the page it held when the levels were computed: a frame that holds
  // another page by the time its level is written was evicted (so written) and reused meanwhile,
  // and is skipped.
  enum class FlushMode { kDurable, kEvict };
  // Pages a flush writes after all others, held latched exclusively by its caller (a commit's
  // TIP pages), and the transactions the flush commits.
  struct LastPages {
    std::vector<Frame*> frames;
    std::span<const uint64_t> commits;
    bool done = false;  // written (set by WriteLevels)
    bool Holds(const Frame* f) const {
      return std::find(frames.begin(), frames.end(), f) != frames.end();
    }
  };
  // The dirty frames any of `txns` (or the system) marked, but those `skip` holds.
  std::vector<Frame*> MarkedBy(std::span<const uint64_t> txns, const LastPages* skip);
  absl::Status WriteLevels(std::vector<std::vector<std::pair<Frame*, PageNo>>>& levels, Frame* held,
                           FlushMode mode, bool force, std::vector<Frame*>* later,
                           LastPages* last = nullptr);
  // Adds the last pages to `batch` after everything else of the flush (WriteLevels).
  void AddLastPages(LastPages& last, bool force, Batch& batch, const std::function<void()>& submit,
                    std::vector<Frame*>* later);
  // file_->Sync(), advancing the write epoch first.
  // *synced (if given): a write epoch that every write completed before the call belongs to,
  // durable once it returns OK.
  absl::Status SyncFile(uint64_t* synced = nullptr);
  // Writes the batch's copies home (WriteBatch), setting each item's epoch.
  absl::Status WriteHome(std::span<const size_t> items, Batch& batch);
  // The same with torn-page protection: copies into the doublewrite area first.
  absl::Status WriteProtected(Batch& batch);
  absl::Status FlushSet(std::vector<Frame*> roots, Frame* held,
                        FlushMode mode = FlushMode::kDurable, LastPages* last = nullptr);
  // Writes the oldest dirty, unpinned pages (a quarter of the cache) with their prerequisites so
  // that eviction finds clean victims. Returns the write's error, if any (OK when another thread
  // cleaned meanwhile): an evictor that then finds no victim reports that, not "all pinned".
  absl::Status CleanForEviction();
  absl::Status WriteClaimed(Frame* f);

  io::File* file_;
  CacheOptions opts_;
  util::PageBlock arena_;
  std::vector<std::unique_ptr<Frame>> frames_;
  std::unique_ptr<std::atomic<std::atomic<uint32_t>*>[]> table_;  // chunk pointers
  std::unique_ptr<Doublewrite> dw_;                               // null: no torn-page protection
  util::Mutex miss_mu_;                                           // misses, eviction, mapping
  uint32_t clock_hand_ ABSL_GUARDED_BY(miss_mu_) = 0;
  // Modification sequence numbers: every Mark takes the next one. They start at the clock's
  // microseconds, so that the page generations taken from them (AddToBatch) seldom repeat
  // those of an earlier open.
  std::atomic<uint64_t> mark_seq_{StartSeq()};
  static uint64_t StartSeq();
  // Write epochs (see the file comment): writes completing now belong to write_epoch_; every
  // write of an epoch <= durable_epoch_ is durable. last_write_epoch_: the newest epoch of any
  // completed write; evicted_epoch_: the newest epoch of a write whose page has left its frame
  // (what is known of a page that is not resident, or was read back).
  std::atomic<uint64_t> write_epoch_{1};
  std::atomic<uint64_t> durable_epoch_{0};
  std::atomic<uint64_t> last_write_epoch_{0};
  std::atomic<uint64_t> evicted_epoch_{0};
  std::atomic<uint64_t> syncs_{0};
  std::atomic<uint64_t> sync_failures_{0};
  util::Mutex spare_mu_;
  std::vector<std::unique_ptr<uint8_t[]>> spare_ ABSL_GUARDED_BY(spare_mu_);
  util::Mutex clean_mu_;                   // one CleanForEviction at a time
  std::atomic<uint64_t> clean_rounds_{0};  // CleanForEviction calls completed
  // Pins held only for a read or a write in progress: a Load's read, a Prefetch's claimed
  // frames, a batch's pages from AddToBatch to Submit. Their holders release them without
  // waiting for any latch or pin (a flush submits its batch before it blocks), so an evictor
  // that finds no victim while this is non-zero may wait instead of failing.
  std::atomic<uint32_t> io_pins_{0};
  std::atomic<uint64_t> eviction_waits_{0};
  mutable util::ShardedCounters counters_;
};

}  // namespace ember::cache
