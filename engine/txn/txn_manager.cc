// Transaction manager: ids, TIP, commit numbers, group commit, waits (see txn_manager.h).
#include "engine/txn/txn_manager.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "engine/util/counters.h"

namespace ember::txn {

using cache::LatchMode;
using page::PageNo;
using page::TxnState;

struct TxnManager::CommitRequest {
  uint64_t txn;
  bool done = false;
  absl::Status status;
  uint64_t syncs = 0;  // the syncs of the group commit that committed it
};

TxnManager::TxnManager(cache::BufferCache* cache, cache::PageSpace* space,
                       std::function<absl::Status(uint64_t)> persist_next)
    : cache_(cache),
      space_(space),
      persist_next_(std::move(persist_next)),
      per_tip_(page::TxnsPerTip(cache->page_size())),
      chunks_(std::make_unique<std::atomic<std::atomic<uint64_t>*>[]>(kChunks)) {
  for (uint32_t i = 0; i < kChunks; ++i) chunks_[i].store(nullptr, std::memory_order_relaxed);
}

TxnManager::~TxnManager() {
  for (uint32_t i = 0; i < kChunks; ++i) delete[] chunks_[i].load(std::memory_order_relaxed);
}

std::atomic<uint64_t>* TxnManager::Slot(uint64_t txn) const {
  if (txn < base_) return nullptr;
  const uint64_t rel = txn - base_;
  const uint64_t c = rel >> kChunkBits;
  if (c >= kChunks) return nullptr;
  std::atomic<uint64_t>* chunk = chunks_[c].load(std::memory_order_acquire);
  if (!chunk) {
    auto* self = const_cast<TxnManager*>(this);
    util::MutexLock g(self->chunk_mu_);
    chunk = chunks_[c].load(std::memory_order_acquire);
    if (!chunk) {
      chunk = new std::atomic<uint64_t>[kChunkSize];
      for (uint64_t i = 0; i < kChunkSize; ++i)
        chunk[i].store(kCnActive, std::memory_order_relaxed);
      self->chunks_[c].store(chunk, std::memory_order_release);
    }
  }
  return &chunk[rel & (kChunkSize - 1)];
}

uint64_t TxnManager::StateOf(uint64_t txn) const {
  if (txn < base_) return kCnPrehistoric;
  if (txn >= next_.load(std::memory_order_acquire)) return kCnDead;  // never started
  std::atomic<uint64_t>* s = Slot(txn);
  return s ? s->load(std::memory_order_acquire) : kCnDead;
}

PageNo TxnManager::first_tip() const {
  util::MutexLock g(tip_mu_);
  return tips_.empty() ? page::kNoPage : tips_[0];
}

// ---------------------------------------------------------------- TIP pages

absl::Status TxnManager::EnsureTip(uint64_t txn) {
  const uint64_t k = txn / per_tip_;
  while (tips_.size() <= k) {
    absl::StatusOr<cache::PageRef> np = space_->Allocate(0);
    if (!np.ok()) return np.status();
    const PageNo no = np->page_no();
    page::InitTip(np->data(), cache_->page_size(), no, tips_.size() * per_tip_);
    np->Mark(cache::kSystemMark);
    np->Release();
    if (!tips_.empty()) {
      absl::StatusOr<cache::PageRef> prev = cache_->Fetch(tips_.back(), LatchMode::kExclusive);
      if (!prev.ok()) return prev.status();
      if (absl::Status s = cache_->AddPrecedence(*prev, no); !s.ok()) return s;
      page::TipSetNext(prev->data(), no);
      prev->Mark(cache::kSystemMark);
      prev->Release();
      tips_.push_back(no);
      // The chain must be durable before any commit is recorded in the new page.
      const PageNo both[] = {tips_[tips_.size() - 2], no};
      if (absl::Status s = cache_->FlushPages(both); !s.ok()) return s;
    } else {
      tips_.push_back(no);
    }
  }
  return absl::OkStatus();
}

absl::Status TxnManager::SetTipState(uint64_t txn, TxnState st, std::vector<PageNo>* touched) {
  util::MutexLock g(tip_mu_);
  if (absl::Status s = EnsureTip(txn); !s.ok()) return s;
  const PageNo no = tips_[txn / per_tip_];
  absl::StatusOr<cache::PageRef> p = cache_->Fetch(no, LatchMode::kExclusive);
  if (!p.ok()) return p.status();
  page::TipSetState(p->data(), txn, st);
  p->Mark(txn);
  if (touched && std::find(touched->begin(), touched->end(), no) == touched->end()) {
    touched->push_back(no);
  }
  return absl::OkStatus();
}

absl::StatusOr<PageNo> TxnManager::CreateInitial() {
  util::MutexLock g(tip_mu_);
  base_ = 1;
  next_.store(1);
  if (absl::Status s = EnsureTip(0); !s.ok()) return s;
  return tips_[0];
}

absl::Status TxnManager::Load(PageNo first_tip, uint64_t oit, uint64_t next) {
  {
    util::MutexLock g(tip_mu_);
    tips_.clear();
    for (PageNo p = first_tip; p != page::kNoPage;) {
      absl::StatusOr<cache::PageRef> r = cache_->Fetch(p, LatchMode::kShared);
      if (!r.ok()) return r.status();
      if (page::GetType(r->data()) != page::PageType::kTip ||
          page::TipFirstTxn(r->data()) != tips_.size() * per_tip_) {
        return absl::DataLossError(absl::StrCat("page ", p, " of ", cache_->file()->path(),
                                                ": expected TIP page ", tips_.size()));
      }
      tips_.push_back(p);
      p = page::TipNext(r->data());
      if (tips_.size() > (uint64_t{1} << 32)) return absl::DataLossError("TIP chain loops");
    }
    if (tips_.empty()) return absl::DataLossError("database has no TIP page");
  }
  base_ = std::max<uint64_t>(1, oit);
  if (next > base_ && next - base_ > kChunks * kChunkSize) {
    // More states than memory has slots for (Slot would return none): a damaged header.
    return absl::DataLossError(absl::StrCat("header of ", cache_->file()->path(),
                                            ": next transaction ", next,
                                            " is more than 2^32 "
                                            "past the oldest interesting one, ",
                                            oit));
  }
  next_.store(std::max<uint64_t>(next, base_));
  {
    util::MutexLock g(id_mu_);  // nothing else runs yet: for the analysis
    reserved_ = next_.load();
  }
  // States of [base_, next): anything still active crashed with us: it is dead now.
  std::vector<PageNo> touched;
  for (uint64_t t = base_; t < next_.load(); ++t) {
    TxnState st = TxnState::kActive;
    {
      util::MutexLock g(tip_mu_);
      const uint64_t k = t / per_tip_;
      if (k < tips_.size()) {
        absl::StatusOr<cache::PageRef> r = cache_->Fetch(tips_[k], LatchMode::kShared);
        if (!r.ok()) return r.status();
        st = page::TipGetState(r->data(), t);
      }
    }
    uint64_t cn = kCnDead;
    if (st == TxnState::kCommitted) cn = kCnPrehistoric;
    else if (st == TxnState::kLimbo) cn = kCnLimbo;
    else if (st == TxnState::kActive) {
      if (absl::Status s = SetTipState(t, TxnState::kDead, &touched); !s.ok()) return s;
    }
    Slot(t)->store(cn, std::memory_order_release);
  }
  if (!touched.empty()) return cache_->FlushPages(touched);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- begin / end

absl::StatusOr<TxnManager::Started> TxnManager::Begin() {
  uint64_t id, snapshot;
  {
    util::MutexLock g(id_mu_);
    id = next_.load(std::memory_order_relaxed);
    if (id >= reserved_) {
      if (absl::Status s = persist_next_(id + kReserveBlock); !s.ok()) return s;
      reserved_ = id + kReserveBlock;
    }
    Slot(id)->store(kCnActive, std::memory_order_relaxed);
    util::MutexLock a(active_mu_);
    uint64_t oldest = id;
    for (const auto& [t, o] : active_) oldest = std::min(oldest, t);
    // The snapshot is taken under active_mu_, so OldestSnapshotCn never misses it.
    snapshot = CurrentCn();
    active_.emplace(id, ActiveInfo{oldest, snapshot});
    next_.store(id + 1, std::memory_order_release);
  }
  {
    util::MutexLock g(tip_mu_);
    if (id / per_tip_ >= tips_.size()) {
      if (absl::Status s = EnsureTip(id); !s.ok()) return s;
    }
  }
  return Started{id, snapshot};
}

void TxnManager::Finished(uint64_t txn) {
  {
    util::MutexLock a(active_mu_);
    active_.erase(txn);
  }
  util::MutexLock w(wait_mu_);
  wait_cv_.NotifyAll();
}

std::vector<uint64_t> TxnManager::ActiveIds() const {
  util::MutexLock g(active_mu_);
  std::vector<uint64_t> ids;
  ids.reserve(active_.size());
  for (const auto& [t, info] : active_) ids.push_back(t);
  return ids;
}

absl::Status TxnManager::MarkDead(uint64_t txn) {
  {
    util::MutexLock g(active_mu_);
    if (in_doubt_.contains(txn)) {
      return absl::UnknownError(absl::StrCat("transaction ", txn,
                                             " stays active: its commit is in doubt until the "
                                             "database is reopened"));
    }
  }
  Slot(txn)->store(kCnDead, std::memory_order_release);
  absl::Status s = SetTipState(txn, TxnState::kDead, nullptr);
  Finished(txn);
  return s;
}

absl::Status TxnManager::Commit(uint64_t txn, bool counted) {
  CommitRequest req{txn};
  bool led = false;  // this thread ran the group commit that committed `txn`
  util::MutexLock lk(commit_mu_);
  commit_queue_.push_back(&req);
  while (!req.done) {
    if (!leader_active_) {
      leader_active_ = true;
      led = true;  // the batch holds our request: it is done after this round
      std::vector<CommitRequest*> batch;
      if (commit_queue_.size() <= kMaxGroup) {
        batch.swap(commit_queue_);
      } else {
        const auto cut = commit_queue_.begin() + static_cast<ptrdiff_t>(kMaxGroup);
        batch.assign(commit_queue_.begin(), cut);
        commit_queue_.erase(commit_queue_.begin(), cut);
      }
      lk.Unlock();
      std::vector<uint64_t> ids;
      ids.reserve(batch.size());
      for (CommitRequest* r : batch) ids.push_back(r->txn);
      const uint64_t syncs_before = cache::BufferCache::SyncsByThisThread();
      absl::Status s = CommitGroup(ids);
      const uint64_t syncs = cache::BufferCache::SyncsByThisThread() - syncs_before;
      lk.Lock();
      for (CommitRequest* r : batch) {
        r->status = s;
        r->syncs = syncs;
        r->done = true;
      }
      leader_active_ = false;
      commit_cv_.NotifyAll();
    } else {
      commit_cv_.Wait(lk);
    }
  }
  lk.Unlock();
  // The leader's syncs counted in its own sinks as it issued them; each transaction that waited
  // on them counts them too (Counters::syncs), in the statement and transaction that committed.
  if (!led && req.syncs > 0) util::CountInSinks(util::Counter::kSyncs, req.syncs);
  if (!req.status.ok()) return req.status;
  if (!counted) commits_.fetch_sub(1, std::memory_order_relaxed);
  Finished(txn);
  return absl::OkStatus();
}

// The slot gets its CN before last_cn_ moves past it, so a snapshot either predates the commit
// (and never sees it) or includes it (and sees it from then on).
void TxnManager::Publish(uint64_t txn) {
  util::MutexLock g(cn_mu_);
  const uint64_t cn = last_cn_.load(std::memory_order_relaxed) + 1;
  Slot(txn)->store(cn, std::memory_order_release);
  last_cn_.store(cn, std::memory_order_release);
}

absl::Status TxnManager::CommitNoWrites(uint64_t txn, bool counted) {
  if (absl::Status s = SetTipState(txn, TxnState::kCommitted, nullptr); !s.ok()) return s;
  Publish(txn);
  if (counted) commits_.fetch_add(1, std::memory_order_relaxed);
  Finished(txn);
  return absl::OkStatus();
}

cache::PageRef& TxnManager::HeldTips::For(uint64_t txn, uint64_t per_tip) {
  const auto it = std::find(index.begin(), index.end(), txn / per_tip);
  return refs[static_cast<size_t>(it - index.begin())];
}

absl::StatusOr<TxnManager::HeldTips> TxnManager::LatchTips(const std::vector<uint64_t>& txns) {
  HeldTips h;
  util::MutexLock g(tip_mu_);
  // Every page exists first (Begin made them): EnsureTip flushes the chain, and that flush must
  // not meet a TIP page this loop already holds latched.
  for (uint64_t t : txns) {
    if (absl::Status s = EnsureTip(t); !s.ok()) return s;
  }
  for (uint64_t t : txns) {
    const uint64_t k = t / per_tip_;
    if (std::find(h.index.begin(), h.index.end(), k) != h.index.end()) continue;
    absl::StatusOr<cache::PageRef> r = cache_->Fetch(tips_[k], LatchMode::kExclusive);
    if (!r.ok()) return r.status();
    h.index.push_back(k);
    h.refs.push_back(std::move(*r));
  }
  return h;
}

absl::Status TxnManager::CommitGroup(const std::vector<uint64_t>& txns) {
  // The commit bits go into the TIP pages, latched until the flush has written them: no one else
  // writes a TIP image with them before the transactions' pages are in a durable record.
  absl::StatusOr<HeldTips> tips = LatchTips(txns);
  if (!tips.ok()) return tips.status();
  for (uint64_t t : txns) {
    cache::PageRef& r = tips->For(t, per_tip_);
    page::TipSetState(r.data(), t, TxnState::kCommitted);
    r.Mark(t);
  }
  // Every page the transactions changed, in precedence order, then the TIP pages: with torn-page
  // protection one record (or a few, for a big transaction) and one sync; without, careful
  // write (the pages synced, then the TIP pages).
  const uint64_t sync_failures = cache_->SyncFailures();
  if (absl::Status s = cache_->FlushCommit(txns, tips->refs); !s.ok()) {
    return FailCommit(txns, s, cache_->SyncFailures() != sync_failures, *tips);
  }
  tips->refs.clear();  // unlatch
  // Publish: later snapshots see them.
  for (uint64_t t : txns) Publish(t);
  commits_.fetch_add(txns.size(), std::memory_order_relaxed);
  group_flushes_.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status TxnManager::FailCommit(const std::vector<uint64_t>& txns, const absl::Status& cause,
                                    bool sync_failed, HeldTips& tips) {
  // The commit marks are in the cached TIP pages and, if a sync failed rather than the write,
  // maybe in the file, not known durable: any later sync (another commit, a flush of the
  // collector) could make them so, and the transactions would come back committed after a crash
  // although their commit failed - while this process, taking them for dead, backs their
  // versions out. So they are marked dead, durably, first (with protection, the failed records
  // are void too: later record pages list them).
  for (uint64_t t : txns) {
    cache::PageRef& r = tips.For(t, per_tip_);
    page::TipSetState(r.data(), t, TxnState::kDead);
    r.Mark(t);
  }
  absl::Status s = cache_->FlushHeld(tips.refs);
  tips.refs.clear();
  // A write that failed put nothing of the marks in the file: dead in the cache is enough (the
  // TIP page is written when it can be).
  if (s.ok() || !sync_failed) {
    for (uint64_t t : txns) Slot(t)->store(kCnDead, std::memory_order_release);
    return cause;
  }
  // Neither mark is known durable: after a crash each transaction may read as committed (all of
  // it: its record, or its pages and then its TIP page, may have reached the disk) or as dead.
  // Until a reopen settles it, it stays active here, so nothing backs its versions out.
  {
    util::MutexLock g(active_mu_);
    in_doubt_.insert(txns.begin(), txns.end());
  }
  return absl::UnknownError(
      absl::StrCat("commit in doubt until the database is reopened: ", cause.message(),
                   "; then marking it rolled back failed: ", s.message()));
}

// ---------------------------------------------------------------- waits

absl::StatusOr<uint64_t> TxnManager::WaitFor(uint64_t self, uint64_t other, int64_t timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  util::MutexLock lk(wait_mu_);
  // Deadlock: does `other` (transitively) wait for us?
  for (uint64_t t = other, hops = 0; hops < 1024; ++hops) {
    auto it = waits_for_.find(t);
    if (it == waits_for_.end()) break;
    if (it->second == self) {
      return absl::AbortedError(
          absl::StrCat("deadlock: transaction ", self, " and ", other, " wait for each other"));
    }
    t = it->second;
  }
  waits_for_[self] = other;
  while (StateOf(other) == kCnActive) {
    if (timeout_ms < 0) {
      wait_cv_.WaitFor(lk, std::chrono::milliseconds(100));
    } else if (wait_cv_.WaitUntil(lk, deadline) == std::cv_status::timeout &&
               StateOf(other) == kCnActive) {
      waits_for_.erase(self);
      return absl::DeadlineExceededError(
          absl::StrCat("lock time-out waiting for transaction ", other));
    }
  }
  waits_for_.erase(self);
  return StateOf(other);
}

uint64_t TxnManager::OldestSnapshotCn() const {
  util::MutexLock a(active_mu_);
  uint64_t h = CurrentCn();
  for (const auto& [t, info] : active_) h = std::min(h, info.snapshot);
  return h;
}

TxnCounters TxnManager::counters() const {
  TxnCounters c;
  c.next = next_.load();
  c.commits = commits_.load();
  c.group_flushes = group_flushes_.load();
  util::MutexLock a(active_mu_);
  c.oat = c.next;
  c.ost = c.next;
  for (const auto& [t, info] : active_) {
    c.oat = std::min(c.oat, t);
    c.ost = std::min(c.ost, info.oldest);
  }
  // OIT: oldest transaction that is not committed (dead ones stay interesting until swept).
  // It only moves forward, so the scan resumes where the last one stopped.
  const uint64_t swept = swept_below_.load(std::memory_order_acquire);
  uint64_t t = std::max(base_, oit_scan_.load(std::memory_order_relaxed));
  while (t < c.oat && (IsCommittedCn(StateOf(t)) || (t < swept && StateOf(t) == kCnDead))) ++t;
  oit_scan_.store(t, std::memory_order_relaxed);
  c.oit = t;
  return c;
}

}  // namespace ember::txn
