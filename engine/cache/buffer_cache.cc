// Buffer cache implementation (see buffer_cache.h for the invariants and the lock order).
#include "engine/cache/buffer_cache.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace ember::cache {

constexpr PageNo kUnmapped = UINT32_MAX;

struct Frame {
  std::atomic<uint32_t> pins{0};
  std::atomic<PageNo> page_no{kUnmapped};
  std::atomic<bool> ref{false};
  std::atomic<bool> dirty{false};  // mirror of the meta-guarded state, for lock-free checks
  std::atomic<bool> writing{false};  // a writer has copied the page and its write is in flight
  std::shared_mutex latch;
  uint8_t* data = nullptr;
  uint32_t index = 0;
  bool valid = false;  // guarded by latch: contents loaded

  std::mutex meta;
  uint64_t txn_mask = 0;         // guarded by meta: bit (txn & 63) per marking transaction
  uint64_t mod_seq = 0;          // guarded by meta: bumped by every Mark
  std::vector<PageNo> prereqs;   // guarded by meta: pages to write before this one
};

namespace {
// Bit 63 belongs to the engine itself (txn 0): pages it marks, such as a pointer page that
// gained a data page or the pages a B-tree split relinked, are written by every commit flush, so
// a committed change on a page never outlives (on disk) the link that makes the page reachable,
// even when the transaction that made the link rolled back. Transactions share bits 0..62.
constexpr uint64_t kSystemBit = uint64_t{1} << 63;
uint64_t TxnBit(uint64_t txn) { return txn == 0 ? kSystemBit : uint64_t{1} << (txn % 63); }
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
    std::lock_guard<std::mutex> g(frame_->meta);
    frame_->txn_mask |= TxnBit(txn);
    frame_->mod_seq++;
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
  arena_ = {static_cast<uint8_t*>(std::aligned_alloc(4096, bytes)), &std::free};
  std::memset(arena_.get(), 0, bytes);
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

bool BufferCache::IsDirtyResident(PageNo no) const {
  Frame* f = Lookup(no);
  return f && f->page_no.load(std::memory_order_acquire) == no &&
         f->dirty.load(std::memory_order_acquire);
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

absl::StatusOr<PageRef> BufferCache::FetchNew(PageNo no) {
  util::Count(counters_, util::Counter::kFetches);
  for (;;) {
    if (Frame* f = Lookup(no)) {
      if (TryPin(f, no)) {
        Latch(f, LatchMode::kExclusive);
        std::memset(f->data, 0, opts_.page_size);
        {
          std::lock_guard<std::mutex> g(f->meta);
          f->prereqs.clear();
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
    if (r.ok() || !absl::IsAborted(r.status())) return r;
  }
}

absl::StatusOr<Frame*> BufferCache::ClaimVictim() {
  // Two passes of the clock: the first honours reference bits. A dirty frame is a victim only
  // when none of its prerequisites is dirty, so evicting never breaks precedence.
  const uint32_t n = opts_.capacity;
  for (uint32_t step = 0; step < 3 * n; ++step) {
    Frame* f = frames_[clock_hand_].get();
    clock_hand_ = (clock_hand_ + 1) % n;
    if (f->pins.load(std::memory_order_relaxed) != 0) continue;
    if (f->ref.exchange(false, std::memory_order_relaxed) && step < n) continue;
    uint32_t expected = 0;
    if (!f->pins.compare_exchange_strong(expected, kClaimed, std::memory_order_acquire)) continue;
    if (f->dirty.load(std::memory_order_acquire)) {
      bool blocked = false;
      {
        std::lock_guard<std::mutex> g(f->meta);
        for (PageNo p : f->prereqs) blocked |= IsDirtyResident(p);
      }
      if (blocked) {
        f->pins.fetch_sub(kClaimed, std::memory_order_release);
        continue;
      }
    }
    return f;
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("buffer cache: no evictable page among ", n, " frames (all pinned)"));
}

absl::Status BufferCache::WriteClaimed(Frame* f) {
  bool had_prereqs;
  {
    std::lock_guard<std::mutex> g(f->meta);
    had_prereqs = !f->prereqs.empty();
  }
  // With forced writes a prerequisite written by an earlier eviction must be durable first.
  if (had_prereqs && opts_.forced_writes) {
    if (absl::Status s = SyncFile(); !s.ok()) return s;
  }
  std::vector<uint8_t> copy(f->data, f->data + opts_.page_size);
  page::SealPage(copy.data(), opts_.page_size);
  const PageNo no = f->page_no.load(std::memory_order_relaxed);
  if (absl::Status s = file_->Write(uint64_t{no} * opts_.page_size, copy.data(), copy.size());
      !s.ok()) {
    return s;
  }
  unsynced_writes_.store(true);  // before the page reads as clean
  std::memcpy(f->data + page::hdr::kGeneration, copy.data() + page::hdr::kGeneration, 4);
  util::Count(counters_, util::Counter::kWrites);
  std::lock_guard<std::mutex> g(f->meta);
  f->txn_mask = 0;
  f->prereqs.clear();
  f->dirty.store(false, std::memory_order_release);
  return absl::OkStatus();
}

absl::StatusOr<PageRef> BufferCache::Load(PageNo no, LatchMode mode, bool read) {
  Frame* f;
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<Frame*> v;
    {
      std::lock_guard<std::mutex> g(miss_mu_);
      if (Lookup(no)) return absl::AbortedError("raced");
      v = ClaimVictim();
    }
    if (v.ok()) {
      f = *v;
      break;
    }
    if (attempt >= 16) return v.status();
    CleanForEviction();
    if (attempt > 2) std::this_thread::yield();
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
  if (!f->latch.try_lock()) f->latch.lock();
  {
    std::lock_guard<std::mutex> g(miss_mu_);
    if (Lookup(no)) {
      f->latch.unlock();
      f->pins.fetch_sub(kClaimed, std::memory_order_release);
      return absl::AbortedError("raced");
    }
    PageNo old = f->page_no.load(std::memory_order_relaxed);
    if (old != kUnmapped) UnmapLocked(old);
    f->valid = false;
    f->page_no.store(no, std::memory_order_release);
    MapLocked(no, f->index);
    f->pins.fetch_add(1, std::memory_order_relaxed);
    f->pins.fetch_sub(kClaimed, std::memory_order_release);
  }
  absl::Status s;
  if (read) {
    s = file_->Read(uint64_t{no} * opts_.page_size, f->data, opts_.page_size);
    if (s.ok()) {
      util::Count(counters_, util::Counter::kReads);
      s = page::VerifyPage(f->data, opts_.page_size, no, file_->path().c_str());
    }
  } else {
    std::memset(f->data, 0, opts_.page_size);
  }
  if (!s.ok()) {
    {
      std::lock_guard<std::mutex> g(miss_mu_);
      UnmapLocked(no);
      f->page_no.store(kUnmapped, std::memory_order_release);
    }
    f->latch.unlock();
    Unpin(f);
    return s;
  }
  f->valid = true;
  {
    std::lock_guard<std::mutex> g(f->meta);
    f->txn_mask = 0;
    f->prereqs.clear();
  }
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

// ---------------------------------------------------------------- precedence and flushing

absl::Status BufferCache::AddPrecedence(PageRef& then, PageNo first) {
  if (first == then.page_no() || !IsDirtyResident(first)) return absl::OkStatus();
  // Would the edge close a cycle? Search `first`'s prerequisites (bounded) for `then`.
  std::vector<PageNo> stack{first};
  absl::flat_hash_map<PageNo, bool> seen;
  bool cycle = false;
  int budget = 256;
  while (!stack.empty() && !cycle) {
    PageNo p = stack.back();
    stack.pop_back();
    if (!seen.emplace(p, true).second) continue;
    if (--budget < 0) {
      cycle = true;  // unknown: treat as a cycle (write now) as Firebird does
      break;
    }
    Frame* f = Lookup(p);
    if (!f || f->page_no.load(std::memory_order_acquire) != p) continue;
    std::lock_guard<std::mutex> g(f->meta);
    for (PageNo q : f->prereqs) {
      if (q == then.page_no()) cycle = true;
      stack.push_back(q);
    }
  }
  if (cycle) {
    Frame* ff = Lookup(first);
    if (!ff) return absl::OkStatus();
    return FlushSet({ff}, then.frame_);
  }
  std::lock_guard<std::mutex> g(then.frame_->meta);
  auto& pr = then.frame_->prereqs;
  if (std::find(pr.begin(), pr.end(), first) == pr.end()) pr.push_back(first);
  return absl::OkStatus();
}

absl::Status BufferCache::FlushSet(std::vector<Frame*> roots, Frame* held, FlushMode mode) {
  // Level of a page = 1 + the highest level among its dirty prerequisites; computed by DFS.
  absl::flat_hash_map<Frame*, int> level;  // -1 while on the DFS stack
  std::vector<std::vector<std::pair<Frame*, PageNo>>> levels;
  struct Item {
    Frame* f;
    PageNo no;  // the page it held when `deps` were read (read first)
    std::vector<Frame*> deps;
    size_t next = 0;
  };
  auto page_of = [](Frame* f) { return f->page_no.load(std::memory_order_acquire); };
  auto deps_of = [&](Frame* f) {
    std::vector<Frame*> d;
    std::lock_guard<std::mutex> g(f->meta);
    for (PageNo p : f->prereqs) {
      Frame* q = Lookup(p);
      if (q && q->page_no.load(std::memory_order_acquire) == p &&
          q->dirty.load(std::memory_order_acquire)) {
        d.push_back(q);
      }
    }
    return d;
  };
  for (Frame* root : roots) {
    if (level.contains(root)) continue;
    std::vector<Item> st;
    st.push_back({root, page_of(root), deps_of(root)});
    level[root] = -1;
    while (!st.empty()) {
      Item& it = st.back();
      if (it.next < it.deps.size()) {
        Frame* d = it.deps[it.next++];
        auto [pos, fresh] = level.try_emplace(d, -1);
        if (fresh) st.push_back({d, page_of(d), deps_of(d)});
        continue;  // an edge to a page on the stack (-1) is a cycle: ignore that edge
      }
      int lv = 0;
      for (Frame* d : it.deps) lv = std::max(lv, level[d] + 1);
      level[it.f] = lv;
      if (levels.size() <= static_cast<size_t>(lv)) levels.resize(lv + 1);
      levels[lv].emplace_back(it.f, it.no);
      st.pop_back();
    }
  }
  return WriteLevels(levels, held, mode);
}

absl::Status BufferCache::SyncFile() {
  unsynced_writes_.store(false);
  return file_->Sync();
}

// Writes level by level; pages of one level go out in batches. A page being copied is pinned
// (so it cannot be evicted) and carries `writing` until its write completes, so two writers never
// race on one page. A writer never blocks on a latch or on another page's `writing` while holding
// `writing` flags of its own: it submits what it has first. That keeps it deadlock-free against
// threads that hold latches and wait for `writing`.
absl::Status BufferCache::WriteLevels(std::vector<std::vector<std::pair<Frame*, PageNo>>>& levels,
                                      Frame* held, FlushMode mode) {
  const bool evict = mode == FlushMode::kEvict;
  bool stopped = false;  // eviction mode met a busy page: later levels must wait
  const uint32_t ps = opts_.page_size;
  struct Pending {
    Frame* f;
    PageNo no;
    uint64_t seq;
    bool own;
    std::unique_ptr<uint8_t[]> bytes;
  };
  std::vector<Pending> batch;
  absl::Status first_error;
  // A level-0 page with (clean) prerequisites: they were written after the edge was recorded,
  // perhaps by an eviction that did not sync. With forced writes, sync before writing it.
  bool presync = false;
  auto submit = [&]() {
    std::vector<io::WriteRequest> reqs;
    for (const Pending& p : batch) {
      if (p.bytes) reqs.push_back({uint64_t{p.no} * ps, p.bytes.get(), ps});
    }
    absl::Status s;
    if (!reqs.empty() && presync && opts_.forced_writes && unsynced_writes_.load()) s = SyncFile();
    presync = false;
    if (s.ok() && !reqs.empty()) s = file_->WriteBatch(reqs);
    if (s.ok() && !reqs.empty()) {
      unsynced_writes_.store(true);  // before the pages read as clean
      util::Count(counters_, util::Counter::kWrites, reqs.size());
    }
    for (Pending& p : batch) {
      if (s.ok() && p.bytes) {
        std::lock_guard<std::mutex> g(p.f->meta);
        // Clean only if unchanged since the copy.
        if (p.f->mod_seq == p.seq) {
          p.f->txn_mask = 0;
          p.f->prereqs.clear();
          p.f->dirty.store(false, std::memory_order_release);
        }
      }
      p.f->writing.store(false, std::memory_order_release);
      if (!p.own) Unpin(p.f);
    }
    batch.clear();
    if (!s.ok() && first_error.ok()) first_error = s;
  };
  for (size_t lv = 0; lv < levels.size() && first_error.ok(); ++lv) {
    for (auto [f, no] : levels[lv]) {
      const bool own = (f == held);
      if (!own) {
        bool pinned = false;
        while (!(pinned = TryPin(f, no)) && f->page_no.load(std::memory_order_acquire) == no) {
          if (evict) break;
          std::this_thread::yield();  // being evicted: the evictor writes it
        }
        if (!pinned) {
          stopped |= evict;
          continue;
        }
      }
      if (evict) {
        if (f->writing.exchange(true, std::memory_order_acquire)) {
          if (!own) Unpin(f);
          stopped = true;
          continue;
        }
        if (!own && !f->latch.try_lock_shared()) {
          f->writing.store(false, std::memory_order_release);
          Unpin(f);
          stopped = true;
          continue;
        }
      } else {
        // Latch first, then `writing`: never block on the latch holding the page's `writing`
        // flag, since the latch holder may be flushing this very page as its own (`held`) and
        // spin on that flag (AddPrecedence's cycle breaking).
        if (!own && !f->latch.try_lock_shared()) {
          if (!batch.empty()) submit();
          f->latch.lock_shared();
        }
        while (f->writing.exchange(true, std::memory_order_acquire)) {
          if (!batch.empty()) submit();
          std::this_thread::yield();
        }
      }
      Pending p{f, no, 0, own, nullptr};
      {
        std::lock_guard<std::mutex> g(f->meta);
        p.seq = f->mod_seq;
        if (f->dirty.load(std::memory_order_relaxed) && f->valid) {
          p.bytes = std::make_unique<uint8_t[]>(ps);
          std::memcpy(p.bytes.get(), f->data, ps);
          page::SealPage(p.bytes.get(), ps);
          if (lv == 0 && !f->prereqs.empty()) presync = true;
        }
      }
      if (!own) f->latch.unlock_shared();
      batch.push_back(std::move(p));
    }
    submit();
    if (stopped) break;
    if (first_error.ok() && opts_.forced_writes && lv + 1 < levels.size()) {
      first_error = SyncFile();
    }
  }
  if (!first_error.ok()) return first_error;
  if (opts_.forced_writes && !evict) return SyncFile();
  return absl::OkStatus();
}

void BufferCache::CleanForEviction() {
  // Dirty unpinned pages, oldest by clock position first; their dirty prerequisites come along.
  std::vector<Frame*> roots;
  const uint32_t n = opts_.capacity;
  for (uint32_t i = 0; i < n && roots.size() < 64; ++i) {
    Frame* f = frames_[i].get();
    if (f->dirty.load(std::memory_order_acquire) && f->pins.load(std::memory_order_relaxed) == 0) {
      roots.push_back(f);
    }
  }
  if (roots.empty()) return;
  (void)FlushSet(std::move(roots), nullptr, FlushMode::kEvict);  // errors resurface on retry
}

absl::Status BufferCache::FlushTxns(std::span<const uint64_t> txns) {
  uint64_t mask = kSystemBit;
  for (uint64_t t : txns) mask |= TxnBit(t);
  std::vector<Frame*> roots;
  for (const auto& f : frames_) {
    if (!f->dirty.load(std::memory_order_acquire)) continue;
    std::lock_guard<std::mutex> g(f->meta);
    if (f->txn_mask & mask) roots.push_back(f.get());
  }
  return FlushSet(std::move(roots), nullptr);
}

absl::Status BufferCache::FlushPages(std::span<const PageNo> pages) {
  std::vector<Frame*> roots;
  for (PageNo p : pages) {
    Frame* f = Lookup(p);
    if (f && f->page_no.load(std::memory_order_acquire) == p &&
        f->dirty.load(std::memory_order_acquire)) {
      roots.push_back(f);
    }
  }
  return FlushSet(std::move(roots), nullptr);
}

absl::Status BufferCache::FlushAll() {
  std::vector<Frame*> roots;
  for (const auto& f : frames_) {
    if (f->dirty.load(std::memory_order_acquire)) roots.push_back(f.get());
  }
  return FlushSet(std::move(roots), nullptr);
}

void BufferCache::DiscardAll() {
  std::lock_guard<std::mutex> g(miss_mu_);
  for (const auto& f : frames_) {
    PageNo no = f->page_no.load(std::memory_order_relaxed);
    if (no != kUnmapped) UnmapLocked(no);
    f->page_no.store(kUnmapped, std::memory_order_release);
    f->valid = false;
    std::lock_guard<std::mutex> m(f->meta);
    f->txn_mask = 0;
    f->prereqs.clear();
    f->dirty.store(false, std::memory_order_release);
  }
}

}  // namespace ember::cache
