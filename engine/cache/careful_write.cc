// The careful-write engine of the buffer cache (buffer_cache.h): precedence between pages,
// write batches, the doublewrite area, flushes level by level, and syncs. The cache itself
// (page table, pins, latches, fetch, eviction) is buffer_cache.cc.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "engine/cache/buffer_cache.h"
#include "engine/cache/cache_internal.h"

namespace ember::cache {

namespace {
// A commit flush whose pages still wait after this many rounds (only a precedence cycle that
// AddPrecedence could not see does that) writes them in the order it has, as Firebird does.
constexpr int kMaxFlushRounds = 8;
}  // namespace

namespace {
// Set while this thread writes pages before their time (a precedence cycle broken, a page
// forced out before what it stopped pointing at is freed): Submit counts them as cycle_writes.
thread_local int tls_early_writes = 0;
struct EarlyWrites {
  EarlyWrites() { ++tls_early_writes; }
  ~EarlyWrites() { --tls_early_writes; }
  EarlyWrites(const EarlyWrites&) = delete;
  EarlyWrites& operator=(const EarlyWrites&) = delete;
};
}  // namespace

BufferCache::DiskState BufferCache::StateOnDisk(PageNo no, uint64_t version) {
  DiskState st;
  st.frame = Lookup(no);
  std::optional<uint64_t> epoch;
  if (st.frame) {
    util::MutexLock g(st.frame->meta);
    if (st.frame->page_no.load(std::memory_order_acquire) == no) {
      st.need = version != 0 ? version : st.frame->mod_seq;
      st.unwritten = st.frame->written_seq.load(std::memory_order_acquire) < st.need;
      epoch = st.frame->written_epoch.load(std::memory_order_acquire);
    }
  }
  // Not resident (read after finding so): written when it left the cache, maybe not synced.
  if (!epoch) epoch = evicted_epoch_.load();
  st.on_disk = !st.unwritten && Durable(*epoch);
  return st;
}

bool BufferCache::IsOnDisk(PageNo no) { return StateOnDisk(no).on_disk; }

uint64_t BufferCache::VersionNow(PageNo no) {
  const DiskState st = StateOnDisk(no);
  if (st.on_disk) return 0;
  // Not resident: its eviction's write is not durable yet. A frame that reads it again takes
  // the current sequence number as written, which is at least this.
  return st.frame ? st.need : std::max<uint64_t>(1, mark_seq_.load());
}

bool BufferCache::IsOnDisk(PageNo no, uint64_t version) {
  return version == 0 || StateOnDisk(no, version).on_disk;
}

absl::Status BufferCache::AddPrecedence(PageRef& then, PageNo first) {
  if (first == then.page_no()) return absl::OkStatus();
  // The version of `first` that `then` is about to depend on, and whether it is on disk yet.
  const DiskState st = StateOnDisk(first);
  if (st.on_disk) return absl::OkStatus();
  Frame* ff = st.frame;
  const uint64_t need = st.need;
  const bool unwritten = st.unwritten;
  if (unwritten) {
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
      util::MutexLock g(f->meta);
      for (const Edge& e : f->prereqs) {
        if (e.page == then.page_no()) cycle = true;
        stack.push_back(e.page);
      }
    }
    if (cycle) {
      EarlyWrites early;
      return FlushSet({ff}, then.frame_);
    }
  }
  util::MutexLock g(then.frame_->meta);
  auto& pr = then.frame_->prereqs;
  auto it = std::find_if(pr.begin(), pr.end(), [&](const Edge& e) { return e.page == first; });
  if (it == pr.end()) pr.push_back({first, need});
  else it->need = std::max(it->need, need);
  return absl::OkStatus();
}

bool BufferCache::MayWrite(const Frame* f, const Batch* batch, uint64_t* sync_epoch) const {
  f->meta.AssertHeld();  // the caller's (see the declaration)
  uint64_t sync = 0;
  for (const Edge& e : f->prereqs) {
    Frame* q = Lookup(e.page);
    uint64_t written = 0, epoch = 0;
    bool resident = false;
    if (q && q->page_no.load(std::memory_order_acquire) == e.page) {
      written = q->written_seq.load(std::memory_order_acquire);
      epoch = q->written_epoch.load(std::memory_order_acquire);
      resident = q->page_no.load(std::memory_order_acquire) == e.page;  // still that page
    }
    if (!resident) {
      // It left the cache, so it was written then; the epoch is read after finding it gone (the
      // evictor raised evicted_epoch_ before unmapping it).
      written = UINT64_MAX;
      epoch = evicted_epoch_.load();
    }
    if (written >= e.need) {
      // Written. A fresh page needs no more: the sync that makes it durable covers that write.
      if (!f->fresh && !Durable(epoch)) sync = std::max(sync, epoch);
      continue;
    }
    // Not written yet: a fresh page may still go out in the same batch as the needed copy, and
    // with protection any page may (the batch's records apply in order, and whole).
    if ((f->fresh || dw_) && batch) {
      auto it = batch->copied.find(q);
      if (it != batch->copied.end() && it->second >= e.need) continue;
    }
    return false;
  }
  *sync_epoch = sync;
  return true;
}

std::unique_ptr<uint8_t[]> BufferCache::TakeCopyBuffer() {
  {
    util::MutexLock g(spare_mu_);
    if (!spare_.empty()) {
      std::unique_ptr<uint8_t[]> b = std::move(spare_.back());
      spare_.pop_back();
      return b;
    }
  }
  return std::make_unique_for_overwrite<uint8_t[]>(opts_.page_size);  // the copy fills it
}

void BufferCache::GiveCopyBuffer(std::unique_ptr<uint8_t[]> b) {
  util::MutexLock g(spare_mu_);
  // As many as an eviction round copies; more would only hold memory a commit's flush used once.
  if (spare_.size() < opts_.capacity / 4 + 1) spare_.push_back(std::move(b));
}

bool BufferCache::AddToBatch(Frame* f, PageNo no, bool own, bool force, Batch& batch) {
  const uint32_t ps = opts_.page_size;
  Batch::Item item{f, no, 0, own, nullptr};
  {
    util::MutexLock g(f->meta);
    if (f->dirty.load(std::memory_order_relaxed) && f->valid) {
      uint64_t sync_epoch = 0;
      if (!MayWrite(f, &batch, &sync_epoch)) {
        if (!force) return false;
        sync_epoch = write_epoch_.load();  // at least make what was written durable first
      }
      batch.sync_epoch = std::max(batch.sync_epoch, sync_epoch);
      item.seq = f->mod_seq;
      item.fresh = f->fresh;
      item.bytes = TakeCopyBuffer();
      std::memcpy(item.bytes.get(), f->data, ps);
      // The version's own generation: two writes of the page differ in it even when their other
      // bytes do not, which lets recovery tell the copies of a record from older ones at home.
      page::SealPageAs(item.bytes.get(), ps, static_cast<uint32_t>(item.seq));
      batch.copied[f] = item.seq;
    }
  }
  if (!own) io_pins_.fetch_add(1, std::memory_order_relaxed);
  batch.items.push_back(std::move(item));
  return true;
}

absl::Status BufferCache::Submit(Batch& batch, uint64_t* epoch_out) {
  std::vector<size_t> all;
  for (size_t i = 0; i < batch.items.size(); ++i) {
    if (batch.items[i].bytes) all.push_back(i);
  }
  absl::Status s;
  if (!all.empty()) {
    if (opts_.forced_writes && batch.sync_epoch != 0 && !Durable(batch.sync_epoch)) {
      s = SyncFile();
    }
    if (s.ok()) s = dw_ ? WriteProtected(batch) : WriteHome(all, batch);
    if (s.ok()) {
      for (size_t i : all) {
        const uint64_t epoch = batch.items[i].epoch;
        AtomicMax(last_write_epoch_, epoch);
        if (epoch_out) *epoch_out = std::max(*epoch_out, epoch);
      }
      if (!dw_) util::Count(counters_, util::Counter::kWrites, all.size());  // else: as they go
      if (tls_early_writes > 0) util::Count(counters_, util::Counter::kCycleWrites, all.size());
    }
  }
  for (Batch::Item& it : batch.items) {
    // With protection, a record that was synced before a later one of the batch failed made its
    // pages durable: they count as written (their images may go home), so that a later flush
    // does not copy the same version again.
    if (it.bytes && (s.ok() || (dw_ && it.epoch != 0))) {
      util::MutexLock g(it.f->meta);
      it.f->written_epoch.store(it.epoch, std::memory_order_release);
      if (it.f->written_seq.load(std::memory_order_relaxed) < it.seq) {
        it.f->written_seq.store(it.seq, std::memory_order_release);
      }
      it.f->fresh = false;  // on disk now: a page written later may link to it
      // Clean only if unchanged since the copy.
      if (it.f->mod_seq == it.seq) {
        it.f->txn_mask = 0;
        it.f->prereqs.clear();
        it.f->dirty.store(false, std::memory_order_release);
      }
    }
    it.f->writing.store(false, std::memory_order_release);
    if (!it.own) {
      Unpin(it.f);
      io_pins_.fetch_sub(1, std::memory_order_release);
    }
    if (it.bytes) GiveCopyBuffer(std::move(it.bytes));
  }
  batch.items.clear();
  batch.copied.clear();
  batch.commits.clear();
  batch.sync_epoch = 0;
  return s;
}

absl::Status BufferCache::WriteHome(std::span<const size_t> items, Batch& batch) {
  const uint32_t ps = opts_.page_size;
  std::vector<io::WriteRequest> reqs;
  reqs.reserve(items.size());
  for (size_t i : items) {
    const Batch::Item& it = batch.items[i];
    reqs.push_back({uint64_t{it.no} * ps, it.bytes.get(), ps});
  }
  absl::Status s = file_->WriteBatch(reqs);
  const uint64_t epoch = write_epoch_.load();  // after the writes completed (see SyncFile)
  for (size_t i : items) batch.items[i].epoch = epoch;
  return s;
}

absl::Status BufferCache::WriteProtected(Batch& batch) {
  // In batch order, which is precedence order: a record never holds a page whose prerequisite is
  // only in a later record.
  std::vector<size_t> order;
  for (size_t i = 0; i < batch.items.size(); ++i) {
    if (batch.items[i].bytes) order.push_back(i);
  }
  // A batch of fresh pages that commits nothing goes home without a record (AllGoHomeFresh): a
  // growing BLOB's or a bulk load's new pages cost no sync of their own. Otherwise records are
  // filled by ring slots, not by pages (a fresh page takes none: it goes home with its record),
  // and the records written since the last sync share the next one (a sync covers every lower
  // record), up to max_slots together.
  struct Written {
    uint64_t seq;
    size_t from, to;  // their range in `order`
  };
  std::vector<Written> unsynced;
  uint32_t unsynced_slots = 0;
  auto sync = [&]() -> absl::Status {
    uint64_t durable = 0;
    absl::Status s;
    if (opts_.forced_writes) s = SyncFile(&durable);
    // Durable: each record holds its pages, and its images go home later (doublewrite.h). A
    // record that cannot be acknowledged (Synced's error) and every later one are void.
    const uint64_t epoch = opts_.forced_writes ? durable : write_epoch_.load();
    for (const Written& w : unsynced) {
      if (s.ok()) s = dw_->Synced(w.seq);
      if (!s.ok()) {
        dw_->Failed(w.seq);  // nothing of it goes home (its fresh pages are linked nowhere)
        continue;
      }
      for (size_t k = w.from; k < w.to; ++k) batch.items[order[k]].epoch = epoch;
    }
    unsynced.clear();
    unsynced_slots = 0;
    return s;
  };
  std::vector<Doublewrite::Item> dw;
  dw.reserve(order.size());
  for (size_t i : order) {
    const Batch::Item& it = batch.items[i];
    dw.push_back({it.no, it.bytes.get(), it.fresh});
  }
  if (batch.commits.empty()) {
    if (dw_->AllGoHomeFresh(dw)) {
      absl::Status s = WriteHome(order, batch);
      if (!s.ok()) {
        // None counts as written (Submit keeps a page with an epoch): they stay dirty.
        for (size_t i : order) batch.items[i].epoch = 0;
        return s;
      }
      util::Count(counters_, util::Counter::kWrites, order.size());
      return s;
    }
  }
  for (size_t at = 0; at < order.size();) {
    if (dw_->max_slots() - unsynced_slots < 2) {
      if (absl::Status s = sync(); !s.ok()) return s;
    }
    // Write takes what fits of the rest and names the commits only with the last page.
    uint32_t area_pages = 0;
    size_t taken = 0;
    absl::StatusOr<uint64_t> seq =
        dw_->Write(std::span<const Doublewrite::Item>(dw).subspan(at), batch.commits, &area_pages,
                   dw_->max_slots() - unsynced_slots, &taken);
    if (!seq.ok()) {
      // The records written before it are not synced: void, their pages stay to write.
      for (const Written& w : unsynced) dw_->Failed(w.seq);
      return seq.status();
    }
    util::Count(counters_, util::Counter::kDwWrites, area_pages);
    // The fresh pages the record proves instead of copying went home with it.
    util::Count(counters_, util::Counter::kWrites, taken + 1 - area_pages);
    unsynced.push_back({*seq, at, at + taken});
    unsynced_slots += area_pages;
    at += taken;
  }
  return sync();
}

void BufferCache::EnableDoublewrite(const DwRecovery& start) {
  DwHooks hooks;
  hooks.sync = [this](uint64_t* epoch) { return SyncFile(epoch); };
  hooks.durable = [this](uint64_t epoch) { return Durable(epoch); };
  hooks.write_epoch = [this]() { return write_epoch_.load(); };
  hooks.wrote_home = [this](uint64_t pages) { counters_.Add(util::Counter::kWrites, pages); };
  dw_ = std::make_unique<Doublewrite>(file_, opts_.page_size, start, std::move(hooks),
                                      opts_.forced_writes);
}

absl::Status BufferCache::Checkpoint() {
  if (dw_) {
    if (absl::Status s = dw_->WriteHomes(); !s.ok()) return s;
  }
  return SyncFile();
}

absl::Status BufferCache::RetireDoublewrite() {
  if (!dw_) return absl::OkStatus();
  if (absl::Status s = Checkpoint(); !s.ok()) return s;
  return dw_->RetireAll();
}

absl::Status BufferCache::FlushSet(std::vector<Frame*> roots, Frame* held, FlushMode mode,
                                   LastPages* last) {
  const bool evict = mode == FlushMode::kEvict;
  auto page_of = [](Frame* f) { return f->page_no.load(std::memory_order_acquire); };
  // The prerequisites of `f` whose needed version is not written yet (so part of this flush).
  auto deps_of = [&](Frame* f, bool* fresh) {
    std::vector<Frame*> d;
    util::MutexLock g(f->meta);
    *fresh = f->fresh;
    for (const Edge& e : f->prereqs) {
      Frame* q = Lookup(e.page);
      if (q && q->page_no.load(std::memory_order_acquire) == e.page &&
          q->written_seq.load(std::memory_order_acquire) < e.need && !(last && last->Holds(q))) {
        d.push_back(q);
      }
    }
    return d;
  };
  for (int round = 0; !roots.empty() || (last && !last->done); ++round) {
    // Level of a page = that of its highest prerequisite in the flush, plus one unless the page
    // is fresh (then it may share the batch); computed by DFS, so within a level prerequisites
    // come first.
    absl::flat_hash_map<Frame*, int> level;  // -1 while on the DFS stack
    std::vector<std::vector<std::pair<Frame*, PageNo>>> levels;
    struct Item {
      Frame* f;
      PageNo no;  // the page it held when `deps` were read (read first)
      bool fresh;
      std::vector<Frame*> deps;
      size_t next = 0;
    };
    auto visit = [&](Frame* f) {
      Item it{f, page_of(f), false, {}};
      it.deps = deps_of(f, &it.fresh);
      return it;
    };
    for (Frame* root : roots) {
      if (level.contains(root)) continue;
      std::vector<Item> st;
      st.push_back(visit(root));
      level[root] = -1;
      while (!st.empty()) {
        Item& it = st.back();
        if (it.next < it.deps.size()) {
          Frame* d = it.deps[it.next++];
          if (level.try_emplace(d, -1).second) st.push_back(visit(d));
          continue;  // an edge to a page on the stack (-1) is a cycle: ignore that edge
        }
        int lv = 0;
        for (Frame* d : it.deps) {
          if (level[d] >= 0) lv = std::max(lv, level[d] + (it.fresh ? 0 : 1));
        }
        level[it.f] = lv;
        if (levels.size() <= static_cast<size_t>(lv)) levels.resize(lv + 1);
        levels[lv].emplace_back(it.f, it.no);
        st.pop_back();
      }
    }
    std::vector<Frame*> later;
    if (absl::Status s = WriteLevels(levels, held, mode, /*force=*/round + 1 >= kMaxFlushRounds,
                                     evict ? nullptr : &later, last);
        !s.ok()) {
      return s;
    }
    roots = std::move(later);
  }
  // Durable when it returns: also what others (evictions) wrote of these pages earlier.
  if (opts_.forced_writes && !evict && !Durable(last_write_epoch_.load())) return SyncFile();
  return absl::OkStatus();
}

namespace {
// Syncs this thread issued, on any cache (SyncsByThisThread).
thread_local uint64_t tls_syncs = 0;
}  // namespace

uint64_t BufferCache::SyncsByThisThread() { return tls_syncs; }

absl::Status BufferCache::Sync() { return SyncFile(); }

void BufferCache::CountSyncs(uint64_t n) { counters_.Add(util::Counter::kSyncs, n); }

absl::Status BufferCache::SyncFile(uint64_t* synced) {
  // Every write that completed before this increment read an epoch <= e (writers read the epoch
  // after their write completes), so this sync covers every write of epoch e and before.
  const uint64_t e = write_epoch_.fetch_add(1);
  syncs_.fetch_add(1, std::memory_order_relaxed);
  // Counted when issued, failed or not (as syncs_): the database's and this thread's sinks.
  util::Count(counters_, util::Counter::kSyncs);
  ++tls_syncs;
  absl::Status s = file_->Sync();
  if (s.ok()) {
    AtomicMax(durable_epoch_, e);
    if (synced) *synced = e;
  } else {
    sync_failures_.fetch_add(1, std::memory_order_acq_rel);
  }
  return s;
}

// Writes level by level; pages of one level go out in batches. A page being copied is pinned
// (so it cannot be evicted) and carries `writing` until its write completes, so two writers never
// race on one page. A writer never blocks on a latch or on another page's `writing` while holding
// `writing` flags of its own: it submits what it has first. That keeps it deadlock-free against
// threads that hold latches and wait for `writing`.
absl::Status BufferCache::WriteLevels(std::vector<std::vector<std::pair<Frame*, PageNo>>>& levels,
                                      Frame* held, FlushMode mode, bool force,
                                      std::vector<Frame*>* later, LastPages* last) {
  const bool evict = mode == FlushMode::kEvict;
  Batch batch;
  absl::Status first_error;
  uint64_t written = 0;  // newest write epoch of this call's writes
  auto submit = [&]() {
    absl::Status s = Submit(batch, &written);
    if (!s.ok() && first_error.ok()) first_error = s;
  };
  for (size_t lv = 0; lv < levels.size() && first_error.ok(); ++lv) {
    // Every level after the first holds pages that follow pages of the level before: sync before
    // pinning any of them (a presync would hold their pins and `writing` flags through it).
    if (lv > 0 && opts_.forced_writes && written != 0 && !Durable(written)) {
      first_error = SyncFile();
      if (!first_error.ok()) break;
    }
    for (auto [f, no] : levels[lv]) {
      if (!first_error.ok()) break;  // the disk is failing: the rest stay dirty
      const bool own = held != nullptr && f == held;
      if (!own) {
        bool pinned = false;
        while (!(pinned = TryPin(f, no)) && f->page_no.load(std::memory_order_acquire) == no) {
          if (evict) break;
          std::this_thread::yield();  // being evicted: the evictor writes it
        }
        if (!pinned) continue;
      }
      if (evict) {
        if (f->writing.exchange(true, std::memory_order_acquire)) {
          if (!own) Unpin(f);
          continue;
        }
        if (!own && !f->latch.try_lock_shared()) {
          f->writing.store(false, std::memory_order_release);
          Unpin(f);
          continue;
        }
      } else {
        // Latch first, then `writing`: never block on the latch holding the page's `writing`
        // flag, since the latch holder may be flushing this very page as its own (`held`) and
        // spin on that flag (AddPrecedence's cycle breaking).
        if (!own && !f->latch.try_lock_shared()) {
          if (!batch.items.empty()) submit();
          f->latch.lock_shared();
        }
        while (f->writing.exchange(true, std::memory_order_acquire)) {
          if (!batch.items.empty()) submit();
          std::this_thread::yield();
        }
      }
      const bool added = AddToBatch(f, no, own, force, batch);
      if (!own) f->latch.unlock_shared();
      if (!added) {  // a prerequisite is not written yet: skip it (eviction) or try again later
        f->writing.store(false, std::memory_order_release);
        if (!own) Unpin(f);
        if (later) later->push_back(f);
      }
      // A record's worth goes out at once (it gets its own sync anyway): a flush of the whole
      // cache holds no more copies and pins than that.
      if (dw_ && batch.items.size() >= dw_->max_items(0)) submit();
    }
    // With protection the levels share one batch: its records apply in order, and whole.
    if (!dw_) submit();
  }
  if (first_error.ok() && last && !last->done && (!later || later->empty())) {
    if (!dw_ && opts_.forced_writes) {
      // Careful write: everything before them durable first.
      submit();
      if (first_error.ok() && written != 0 && !Durable(written)) first_error = SyncFile();
    }
    if (first_error.ok()) AddLastPages(*last, force, batch, submit, later);
  }
  submit();
  return first_error;
}

void BufferCache::AddLastPages(LastPages& last, bool force, Batch& batch,
                               const std::function<void()>& submit, std::vector<Frame*>* later) {
  size_t added = 0;
  for (Frame* f : last.frames) {
    const PageNo no = f->page_no.load(std::memory_order_acquire);
    // Latched by the caller: only a writer of an older image (an eviction) can hold the flag.
    while (f->writing.exchange(true, std::memory_order_acquire)) {
      if (!batch.items.empty()) submit();
      std::this_thread::yield();
    }
    if (AddToBatch(f, no, /*own=*/true, force, batch)) {
      ++added;
      continue;
    }
    f->writing.store(false, std::memory_order_release);
    // A prerequisite not written yet: it goes first, in the next round.
    util::MutexLock g(f->meta);
    for (const Edge& e : f->prereqs) {
      Frame* q = Lookup(e.page);
      if (later && q && q->page_no.load(std::memory_order_acquire) == e.page) later->push_back(q);
    }
  }
  if (added < last.frames.size()) {
    // Some wait for a later round: the ones added go out now, and again then (unchanged: a
    // clean page adds nothing).
    return;
  }
  batch.commits.assign(last.commits.begin(), last.commits.end());
  last.done = true;
}

absl::Status BufferCache::CleanForEviction() {
  // One cleaner at a time; whoever waited for it finds frames cleaned and returns (the cleaner
  // never blocks, so waiting here while holding latches cannot deadlock).
  const uint64_t round = clean_rounds_.load();
  util::MutexLock g(clean_mu_);
  if (clean_rounds_.load() != round) return absl::OkStatus();
  // The oldest dirty, unpinned pages (by when they became dirty), a quarter of the cache: their
  // prerequisites come along, and a batch that size needs only a few syncs.
  std::vector<std::pair<uint64_t, Frame*>> dirty;
  for (const auto& f : frames_) {
    if (f->dirty.load(std::memory_order_acquire) && f->pins.load(std::memory_order_relaxed) == 0) {
      dirty.emplace_back(f->dirty_since.load(std::memory_order_relaxed), f.get());
    }
  }
  const size_t want = std::max<size_t>(1, opts_.capacity / 4);
  if (dirty.size() > want) {
    std::nth_element(dirty.begin(), dirty.begin() + static_cast<ptrdiff_t>(want), dirty.end());
    dirty.resize(want);
  }
  std::vector<Frame*> roots;
  roots.reserve(dirty.size());
  for (const auto& d : dirty) roots.push_back(d.second);
  absl::Status s;
  if (!roots.empty()) s = FlushSet(std::move(roots), nullptr, FlushMode::kEvict);
  clean_rounds_.fetch_add(1);
  return s;
}

std::vector<Frame*> BufferCache::MarkedBy(std::span<const uint64_t> txns, const LastPages* skip) {
  uint64_t mask = kSystemBit;
  for (uint64_t t : txns) mask |= TxnBit(t);
  std::vector<Frame*> roots;
  for (const auto& f : frames_) {
    if (!f->dirty.load(std::memory_order_acquire) || (skip && skip->Holds(f.get()))) continue;
    util::MutexLock g(f->meta);
    if (f->txn_mask & mask) roots.push_back(f.get());
  }
  return roots;
}

absl::Status BufferCache::FlushTxns(std::span<const uint64_t> txns) {
  return FlushSet(MarkedBy(txns, nullptr), nullptr);
}

absl::Status BufferCache::FlushCommit(std::span<const uint64_t> txns, std::span<PageRef> tips) {
  LastPages last;
  last.commits = txns;
  for (PageRef& r : tips) last.frames.push_back(r.frame_);
  return FlushSet(MarkedBy(txns, &last), nullptr, FlushMode::kDurable, &last);
}

absl::Status BufferCache::FlushHeld(std::span<PageRef> pages) {
  LastPages last;
  for (PageRef& r : pages) last.frames.push_back(r.frame_);
  return FlushSet({}, nullptr, FlushMode::kDurable, &last);
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

absl::Status BufferCache::FlushPagesEarly(std::span<const PageNo> pages) {
  EarlyWrites early;
  return FlushPages(pages);
}

absl::Status BufferCache::FlushAll() {
  std::vector<Frame*> roots;
  for (const auto& f : frames_) {
    if (f->dirty.load(std::memory_order_acquire)) roots.push_back(f.get());
  }
  return FlushSet(std::move(roots), nullptr);
}

void BufferCache::DiscardAll() {
  if (dw_) dw_->StopWriter();  // what it has not written home stays in the area's records
  util::MutexLock g(miss_mu_);
  for (const auto& f : frames_) {
    PageNo no = f->page_no.load(std::memory_order_relaxed);
    if (no != kUnmapped) UnmapLocked(no);
    f->page_no.store(kUnmapped, std::memory_order_release);
    f->valid = false;
    util::MutexLock m(f->meta);
    f->txn_mask = 0;
    f->prereqs.clear();
    f->fresh = false;
    f->dirty.store(false, std::memory_order_release);
  }
}

}  // namespace ember::cache
