// The buffer cache (buffer_cache.h for the invariants and the lock order): the page table, pins
// and latches, fetch, eviction and prefetch, and Create. The careful-write engine that writes
// pages is careful_write.cc.
#include "engine/cache/buffer_cache.h"

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "engine/cache/cache_internal.h"
#include "engine/util/large_alloc.h"

namespace ember::cache {

namespace {
#if defined(__SANITIZE_THREAD__)
// For TSan's lock-order (deadlock) checking, the latch of a frame that takes another page is a
// new lock: the order in which latches of the old pages were taken says nothing about the new
// pages, and without this every reuse of frames reports inversions that cannot deadlock (the
// protocol orders latches by page, not by frame). Happens-before is not lost: the claim of a
// frame goes through its `pins` atomics and miss_mu_.
void ForgetLockOrder(std::shared_mutex* m) { __tsan_mutex_destroy(m, 0); }
#else
void ForgetLockOrder(std::shared_mutex*) {}
#endif

// Physical memory of this machine in bytes, 0 if unknown.
uint64_t PhysicalMemory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
}
}  // namespace

// ---------------------------------------------------------------- PageRef

PageRef& PageRef::operator=(PageRef&& o) noexcept {
  if (this != &o) {
    Release();
    cache_ = o.cache_;
    frame_ = o.frame_;
    page_no_ = o.page_no_;
    mode_ = o.mode_;
    o.cache_ = nullptr;
    o.frame_ = nullptr;
  }
  return *this;
}

uint8_t* PageRef::data() const { return frame_->data; }

void PageRef::Mark(uint64_t txn) {
  {
    const uint64_t seq = cache_->mark_seq_.fetch_add(1) + 1;
    util::MutexLock g(frame_->meta);
    frame_->txn_mask |= TxnBit(txn);
    frame_->mod_seq = seq;
    if (!frame_->dirty.load(std::memory_order_relaxed)) {
      frame_->dirty_since.store(seq, std::memory_order_relaxed);
    }
    frame_->dirty.store(true, std::memory_order_release);
  }
  util::Count(cache_->counters_, util::Counter::kMarks);
}

void PageRef::Release() {
  if (!frame_) return;
  cache_->Unlatch(frame_, mode_);
  cache_->Unpin(frame_);
  frame_ = nullptr;
  cache_ = nullptr;
}

// ---------------------------------------------------------------- table and pins

BufferCache::BufferCache(io::File* file, const CacheOptions& opts) : file_(file), opts_(opts) {
  if (opts_.capacity < 16) opts_.capacity = 16;
  const size_t bytes = size_t{opts_.capacity} * opts_.page_size;
  // Not zeroed: a frame is read into or zeroed (FetchNew, Load) before it is valid, and memory
  // never touched is not committed, so a large cache costs nothing at open until used. Huge
  // pages when the cache is large (util/large_alloc.h): cheaper first touches, fewer TLB misses.
  arena_ = util::AllocPageBlock(bytes);
  frames_.reserve(opts_.capacity);
  for (uint32_t i = 0; i < opts_.capacity; ++i) {
    auto f = std::make_unique<Frame>();
    f->data = arena_.get() + size_t{i} * opts_.page_size;
    f->index = i;
    frames_.push_back(std::move(f));
  }
  table_ = std::make_unique<std::atomic<std::atomic<uint32_t>*>[]>(kChunks);
  for (uint32_t i = 0; i < kChunks; ++i) table_[i].store(nullptr, std::memory_order_relaxed);
}

BufferCache::~BufferCache() {
  // First: the area's writer calls back into members destroyed before dw_ (counters_).
  if (dw_) dw_->StopWriter();
  for (uint32_t i = 0; i < kChunks; ++i) delete[] table_[i].load(std::memory_order_relaxed);
}

Frame* BufferCache::Lookup(PageNo no) const {
  std::atomic<uint32_t>* chunk = table_[no >> kChunkBits].load(std::memory_order_acquire);
  if (!chunk) return nullptr;
  uint32_t v = chunk[no & (kChunkSize - 1)].load(std::memory_order_acquire);
  return v ? frames_[v - 1].get() : nullptr;
}

void BufferCache::MapLocked(PageNo no, uint32_t frame_index) {
  std::atomic<uint32_t>* chunk = table_[no >> kChunkBits].load(std::memory_order_relaxed);
  if (!chunk) {
    chunk = new std::atomic<uint32_t>[kChunkSize];
    for (uint32_t i = 0; i < kChunkSize; ++i) chunk[i].store(0, std::memory_order_relaxed);
    table_[no >> kChunkBits].store(chunk, std::memory_order_release);
  }
  chunk[no & (kChunkSize - 1)].store(frame_index + 1, std::memory_order_release);
}

void BufferCache::UnmapLocked(PageNo no) {
  std::atomic<uint32_t>* chunk = table_[no >> kChunkBits].load(std::memory_order_relaxed);
  if (chunk) chunk[no & (kChunkSize - 1)].store(0, std::memory_order_release);
}

bool BufferCache::TryPin(Frame* f, PageNo no) {
  uint32_t p = f->pins.fetch_add(1, std::memory_order_acquire);
  if ((p & kClaimed) || f->page_no.load(std::memory_order_acquire) != no) {
    f->pins.fetch_sub(1, std::memory_order_release);
    return false;
  }
  return true;
}

void BufferCache::Unpin(Frame* f) { f->pins.fetch_sub(1, std::memory_order_release); }

void BufferCache::Latch(Frame* f, LatchMode m) {
  if (m == LatchMode::kExclusive) f->latch.lock();
  else f->latch.lock_shared();
}

void BufferCache::Unlatch(Frame* f, LatchMode m) {
  if (m == LatchMode::kExclusive) f->latch.unlock();
  else f->latch.unlock_shared();
}

size_t BufferCache::DirtyCount() const {
  size_t n = 0;
  for (const auto& f : frames_) n += f->dirty.load(std::memory_order_relaxed) ? 1 : 0;
  return n;
}

// ---------------------------------------------------------------- fetch

absl::StatusOr<PageRef> BufferCache::Fetch(PageNo no, LatchMode mode) {
  util::Count(counters_, util::Counter::kFetches);
  for (int spins = 0;; ++spins) {
    if (Frame* f = Lookup(no)) {
      if (TryPin(f, no)) {
        Latch(f, mode);
        if (f->valid) {
          f->ref.store(true, std::memory_order_relaxed);
          PageRef r;
          r.cache_ = this;
          r.frame_ = f;
          r.page_no_ = no;
          r.mode_ = mode;
          return r;
        }
        // The loader failed; retry, which reads again and reports the error itself.
        Unlatch(f, mode);
        Unpin(f);
      }
      if (spins > 16) std::this_thread::yield();
      continue;
    }
    absl::StatusOr<PageRef> r = Load(no, mode, /*read=*/true);
    if (r.ok() || !absl::IsAborted(r.status())) return r;
    // Aborted: another thread mapped the page first; go round again.
  }
}

absl::StatusOr<PageRef> BufferCache::FetchNew(PageNo no, NewPage kind) {
  util::Count(counters_, util::Counter::kFetches);
  for (;;) {
    if (Frame* f = Lookup(no)) {
      if (TryPin(f, no)) {
        // A page being allocated (freed earlier, still resident) is reachable from nothing, so
        // nobody who could wait for a lock we hold has its latch: at most a writer copying it
        // out. Taken as a try first, which also keeps this acquisition out of TSan's lock-order
        // graph: callers hold locks such as a relation's alloc_mu_, and the page, once in use,
        // is latched before alloc_mu_ is taken (Write -> StoreSecondary), a false inversion.
        if (!f->latch.try_lock()) f->latch.lock();
        std::memset(f->data, 0, opts_.page_size);
        {
          util::MutexLock g(f->meta);
          f->prereqs.clear();
          f->fresh = kind == NewPage::kUnlinked;
        }
        f->valid = true;
        PageRef r;
        r.cache_ = this;
        r.frame_ = f;
        r.page_no_ = no;
        r.mode_ = LatchMode::kExclusive;
        return r;
      }
      std::this_thread::yield();
      continue;
    }
    absl::StatusOr<PageRef> r = Load(no, LatchMode::kExclusive, /*read=*/false);
    if (r.ok() && kind == NewPage::kUnlinked) {
      util::MutexLock g(r->frame_->meta);
      r->frame_->fresh = true;
    }
    if (r.ok() || !absl::IsAborted(r.status())) return r;
  }
}

Frame* BufferCache::ClaimVictim(bool take_dirty) {
  // Two passes of the clock: the first honours reference bits. A dirty frame is a victim only
  // with `take_dirty` and when it may be written now, so evicting never breaks precedence.
  const uint32_t n = opts_.capacity;
  for (uint32_t step = 0; step < 3 * n; ++step) {
    Frame* f = frames_[clock_hand_].get();
    clock_hand_ = (clock_hand_ + 1) % n;
    if (f->pins.load(std::memory_order_relaxed) != 0) continue;
    if (f->ref.exchange(false, std::memory_order_relaxed) && step < n) continue;
    if (!take_dirty && f->dirty.load(std::memory_order_acquire)) continue;
    uint32_t expected = 0;
    if (!f->pins.compare_exchange_strong(expected, kClaimed, std::memory_order_acquire)) continue;
    if (f->dirty.load(std::memory_order_acquire)) {
      bool ok = take_dirty;
      if (ok) {
        uint64_t sync_epoch;
        util::MutexLock g(f->meta);
        ok = MayWrite(f, nullptr, &sync_epoch);
      }
      if (!ok) {
        f->pins.fetch_sub(kClaimed, std::memory_order_release);
        continue;
      }
    }
    return f;
  }
  return nullptr;
}

absl::Status BufferCache::NoVictimError() const {
  // What holds the frames, so that a user can tell a pin leak (too small a cache for what one
  // thread holds at once) from pages that wait for a prerequisite.
  size_t pinned = 0, waiting = 0;
  for (const auto& f : frames_) {
    if (f->pins.load(std::memory_order_acquire) != 0) {
      ++pinned;
    } else if (f->dirty.load(std::memory_order_acquire)) {
      ++waiting;
    }
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "buffer cache: no evictable page among ", opts_.capacity, " frames (", pinned, " pinned, ",
      waiting, " dirty and waiting for a page that cannot be written yet); ",
      "a larger cache_pages may help"));
}

absl::Status BufferCache::WriteClaimed(Frame* f) {
  // Claimed: nobody else can pin it, so nobody adds an edge or writes it meanwhile.
  Batch batch;
  if (!AddToBatch(f, f->page_no.load(std::memory_order_relaxed), /*own=*/true, /*force=*/false,
                  batch)) {
    return absl::InternalError("buffer cache: an eviction victim may not be written");
  }
  return Submit(batch);
}

absl::StatusOr<Frame*> BufferCache::ClaimFor(PageNo no, bool clean_only) {
  Frame* f = nullptr;
  absl::Status clean_error;  // why cleaning failed: the real cause when no victim is left
  for (int attempt = 0;;) {
    {
      util::MutexLock g(miss_mu_);
      if (Lookup(no)) return absl::AbortedError("raced");
      // Clean victims first; a dirty one is written alone, so only once batch cleaning failed.
      f = ClaimVictim(/*take_dirty=*/!clean_only && attempt >= 2);
    }
    if (f != nullptr) break;
    if (clean_only) return absl::ResourceExhaustedError("buffer cache: no clean frame");
    if (attempt >= kQuickClaims) {
      if (!clean_error.ok()) return clean_error;
      // Frames other threads hold for a read or a write come back without those threads
      // waiting for anything this one holds (see io_pins_): wait for them. A commit's flush
      // pins a whole batch through its presync, which on a slow disk outlasts the quick tries.
      if (io_pins_.load(std::memory_order_acquire) == 0) return NoVictimError();
      eviction_waits_.fetch_add(1, std::memory_order_relaxed);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    } else {
      ++attempt;
      if (attempt > 3) std::this_thread::yield();
    }
    if (absl::Status s = CleanForEviction(); !s.ok()) clean_error = std::move(s);
  }
  // The victim is ours (claimed, unpinned). Write it out if dirty, still mapped under its old
  // number so that nobody re-reads a stale copy from disk meanwhile.
  if (f->dirty.load(std::memory_order_acquire)) {
    if (absl::Status s = WriteClaimed(f); !s.ok()) {
      f->pins.fetch_sub(kClaimed, std::memory_order_release);
      return s;
    }
  }
  // Latched before miss_mu_ (which is never held while taking a latch: threads holding latches
  // take miss_mu_ on their misses). Uncontended: nobody can pin a claimed frame, so the try
  // succeeds; taken as a try, it also tells lock-order checkers (TSan) that this acquisition
  // cannot deadlock, whatever locks the caller holds (frames are reused for other pages).
  ForgetLockOrder(&f->latch);
  if (!f->latch.try_lock()) f->latch.lock();
  {
    util::MutexLock g(miss_mu_);
    if (Lookup(no)) {
      f->latch.unlock();
      f->pins.fetch_sub(kClaimed, std::memory_order_release);
      return absl::AbortedError("raced");
    }
    PageNo old = f->page_no.load(std::memory_order_relaxed);
    if (old != kUnmapped) {
      // What is known of the old page's durability from now on (before it reads as unmapped).
      AtomicMax(evicted_epoch_, f->written_epoch.load(std::memory_order_acquire));
      UnmapLocked(old);
    }
    {
      // The new page is what the disk holds: written as far as any edge can ask, and durable
      // as far as the pages that left the cache are.
      util::MutexLock m(f->meta);
      f->txn_mask = 0;
      f->prereqs.clear();
      f->fresh = false;
      f->mod_seq = mark_seq_.load();
      f->written_epoch.store(evicted_epoch_.load(), std::memory_order_release);
      f->written_seq.store(f->mod_seq, std::memory_order_release);
      f->dirty.store(false, std::memory_order_release);
    }
    f->valid = false;
    f->page_no.store(no, std::memory_order_release);
    MapLocked(no, f->index);
    f->pins.fetch_add(1, std::memory_order_relaxed);
    f->pins.fetch_sub(kClaimed, std::memory_order_release);
  }
  return f;
}

uint64_t BufferCache::StartSeq() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

absl::StatusOr<PageRef> BufferCache::Load(PageNo no, LatchMode mode, bool read) {
  absl::StatusOr<Frame*> claimed = ClaimFor(no, /*clean_only=*/false);
  if (!claimed.ok()) return claimed.status();
  Frame* f = *claimed;
  absl::Status s;
  if (read) {
    // A page whose newest version waits in the doublewrite area to go home is read from there
    // (asked first: once it is not there, the file has it).
    if (!dw_ || !dw_->ReadPending(no, f->data)) {
      io_pins_.fetch_add(1, std::memory_order_relaxed);
      s = file_->Read(uint64_t{no} * opts_.page_size, f->data, opts_.page_size);
      io_pins_.fetch_sub(1, std::memory_order_release);
      if (s.ok()) util::Count(counters_, util::Counter::kReads);
    }
    if (s.ok()) s = page::VerifyPage(f->data, opts_.page_size, no, file_->path().c_str());
  } else {
    std::memset(f->data, 0, opts_.page_size);
  }
  if (!s.ok()) {
    AbandonLoad(f, no);
    return s;
  }
  f->valid = true;
  f->ref.store(true, std::memory_order_relaxed);
  if (mode == LatchMode::kShared) {
    f->latch.unlock();
    f->latch.lock_shared();
    if (!f->valid) {  // cannot happen: only loaders clear valid, and we hold the pin
      f->latch.unlock_shared();
      Unpin(f);
      return absl::InternalError("buffer cache: frame invalidated during load");
    }
  }
  PageRef r;
  r.cache_ = this;
  r.frame_ = f;
  r.page_no_ = no;
  r.mode_ = mode;
  return r;
}

void BufferCache::AbandonLoad(Frame* f, PageNo no) {
  {
    util::MutexLock g(miss_mu_);
    UnmapLocked(no);
    f->page_no.store(kUnmapped, std::memory_order_release);
  }
  f->latch.unlock();
  Unpin(f);
}

void BufferCache::Prefetch(std::span<const PageNo> pages) {
  const uint32_t ps = opts_.page_size;
  // Never more than a small part of the cache, so a read-ahead cannot push out the working set.
  const size_t limit = std::min<size_t>({pages.size(), kMaxPrefetch, frames_.size() / 8});
  std::vector<std::pair<PageNo, Frame*>> claimed;
  claimed.reserve(limit);
  // Only clean victims, with no cleaning or writing on the way: this thread holds the latches
  // of the frames claimed so far, and a Fetch of one of those pages may be waiting for them
  // while holding a latch a write would need.
  for (size_t i = 0; i < limit; ++i) {
    if (Lookup(pages[i]) != nullptr) continue;
    absl::StatusOr<Frame*> f = ClaimFor(pages[i], /*clean_only=*/true);
    if (f.ok()) {
      io_pins_.fetch_add(1, std::memory_order_relaxed);
      claimed.emplace_back(pages[i], *f);
    } else if (!absl::IsAborted(f.status())) {
      break;  // no clean frame left: read what was claimed
    }
  }
  // Pages waiting in the doublewrite area to go home come from there (see Load).
  auto loaded = [&](PageNo no, Frame* f, absl::Status s) {
    if (s.ok()) s = page::VerifyPage(f->data, ps, no, file_->path().c_str());
    if (s.ok()) {
      f->valid = true;
      f->ref.store(true, std::memory_order_relaxed);
      f->latch.unlock();
      Unpin(f);
    } else {
      AbandonLoad(f, no);
    }
    io_pins_.fetch_sub(1, std::memory_order_release);
  };
  if (dw_) {
    std::erase_if(claimed, [&](const std::pair<PageNo, Frame*>& c) {
      if (!dw_->ReadPending(c.first, c.second->data)) return false;
      loaded(c.first, c.second, absl::OkStatus());
      return true;
    });
  }
  // Runs of consecutive page numbers in one read each; a failed read or a bad page only
  // unmaps what it covers (the caller's Fetch reads again and reports the error).
  std::sort(claimed.begin(), claimed.end());
  std::vector<uint8_t*> bufs;
  for (size_t i = 0; i < claimed.size();) {
    size_t j = i + 1;
    while (j < claimed.size() && claimed[j].first == claimed[j - 1].first + 1) ++j;
    bufs.clear();
    for (size_t k = i; k < j; ++k) bufs.push_back(claimed[k].second->data);
    const absl::Status rs = file_->ReadBlocks(uint64_t{claimed[i].first} * ps, ps, bufs);
    for (size_t k = i; k < j; ++k) {
      if (rs.ok()) util::Count(counters_, util::Counter::kReads);
      loaded(claimed[k].first, claimed[k].second, rs);
    }
    i = j;
  }
}

absl::StatusOr<std::unique_ptr<BufferCache>> BufferCache::Create(io::File* file,
                                                                 const CacheOptions& opts) {
  // As the constructor counts: at least 16 frames.
  const uint64_t bytes = uint64_t{std::max<uint32_t>(opts.capacity, 16)} * opts.page_size;
  const std::string what = absl::StrCat("cache_pages ", opts.capacity, " of ", opts.page_size,
                                        " bytes (", bytes, " bytes)");
  // Past the machine's memory a cache can only thrash, and an allocator may abort rather than
  // fail on such a size (sanitizers do): refuse it as a bad option.
  if (const uint64_t phys = PhysicalMemory(); phys != 0 && bytes > phys) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": more than this machine's memory (", phys, " bytes)"));
  }
  try {
    return std::make_unique<BufferCache>(file, opts);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, ": cannot allocate the buffer cache's memory"));
  }
}

}  // namespace ember::cache
