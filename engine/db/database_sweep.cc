// Database::Sweep: Firebird's sweep on the worker pool. Every table's data pages, cut into
// chunks (many more than workers), are collected as the background collector collects a page
// (CollectRecords under each record's lock, so the sweep, the collector and readers never
// remove the same version twice); then the catalog; then, once the removals are on disk, the
// oldest interesting transaction moves past every transaction that had ended when the sweep
// started (architecture.md, "Sweep").
#include <chrono>

#include "absl/strings/str_cat.h"
#include "engine/db/database_impl.h"
#include "engine/db/garbage_collector.h"

namespace ember::db {

using internal::TableState;

namespace {

// Data page sequences per work item: one read-ahead extent.
constexpr uint32_t kChunk = internal::kReadAhead;
// Lines unlinked by a worker are freed in batches of this many (each batch writes the pages
// that pointed at them first).
constexpr size_t kFreeBatch = 4096;

}  // namespace

absl::StatusOr<SweepResult> DatabaseImpl::Sweep(const SweepOptions& options) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  if (options.workers < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sweep: workers ", options.workers, " (0 or more)"));
  }
  util::MutexLock one(sweep_mu_);
  const auto t0 = std::chrono::steady_clock::now();
  SweepResult out;
  // Every transaction below this one has ended: once the pages are swept, no version of a dead
  // one among them is left.
  const txn::TxnCounters start = txns_->counters();
  const uint64_t floor = start.oat;
  out.oit_before = start.oit;

  SweepPlan plan;
  // A table whose pages are unknown (a damaged pointer-page chain) cannot be swept: the others
  // are, and the sweep then fails with its DataLoss without moving the OIT, since the dead
  // transactions' versions may still be in that table.
  absl::Status damaged;
  {
    util::ReaderLock g(catalog_mu_);
    std::vector<uint32_t> sizes;
    for (const auto& t : tables_) {
      if (absl::Status d = t->DamageFor("sweep"); !d.ok()) {
        if (damaged.ok()) damaged = std::move(d);
        continue;
      }
      plan.tables.push_back(t.get());
      sizes.push_back(t->relation->PageSequences());
    }
    plan.chunks = worker::CutChunks(sizes, kChunk);
  }
  if (absl::Status s = SweepTables(options.workers, &plan, &out); !s.ok()) return s;
  if (absl::Status s = SweepCatalog(&out); !s.ok()) return s;
  if (!damaged.ok()) {
    // What was removed reaches the disk as any collection's does; the slots of the pages
    // flagged swept stay unflagged (a hint: the next sweep flags them).
    if (absl::Status s = cache_->FlushAll(); !s.ok()) return s;
    return damaged;
  }

  // The removals must be on disk before the header says nothing below the new OIT is dead:
  // below the OIT, a reopened database reads every transaction as committed.
  if (absl::Status s = cache_->FlushAll(); !s.ok()) return s;
  txns_->SetSweptBelow(floor);
  if (absl::Status s = FlagSweptSlots(plan, &out); !s.ok()) return s;
  if (absl::Status s = cache_->FlushAll(); !s.ok()) return s;
  if (absl::Status s = WriteHeader(/*clean=*/false); !s.ok()) return s;
  out.oit_after = txns_->counters().oit;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  sweeps_.fetch_add(1, std::memory_order_relaxed);
  return out;
}

absl::Status DatabaseImpl::SweepTables(int workers, SweepPlan* plan, SweepResult* out) {
  struct Local {
    CollectTally tally;
    uint64_t visited = 0, skipped = 0;
  };
  std::vector<Local> locals;
  out->workers = WorkersFor(workers);
  plan->flagged.assign(plan->chunks.size(), {});
  absl::Status s = worker::RunWithLocals(
      workers_.get(), out->workers, plan->chunks.size(), &locals,
      [&](size_t i, const worker::TaskContext& ctx, Local& local) -> absl::Status {
        const worker::Chunk& it = plan->chunks[i];
        TableState* t = plan->tables[it.part];
        record::Relation* rel = t->relation.get();
        std::vector<uint64_t> recs;
        std::vector<record::Unlinked> unlinked;
        absl::Status st;
        rel->PrefetchPages(it.first, it.end - it.first, /*skip_swept=*/true);
        if (stop_sweeps_.load(std::memory_order_acquire)) {
          return absl::CancelledError("sweep stopped: the database is closing");
        }
        for (uint32_t seq = it.first; seq < it.end && st.ok() && !ctx.cancelled(); ++seq) {
          if (rel->IsSecondary(seq)) continue;  // reached through the primary pages' chains
          if (rel->IsSwept(seq)) {
            ++local.skipped;
            continue;
          }
          recs.clear();
          st = rel->ListCollectable(seq, &recs);
          ++local.visited;
          if (st.ok() && !recs.empty()) {
            st = CollectRecords(t, recs, &unlinked, nullptr, nullptr, &local.tally);
          }
          if (st.ok() && unlinked.size() >= kFreeBatch) st = FreeCollected(t, &unlinked);
          if (!st.ok()) {
            st = absl::Status(st.code(), absl::StrCat("sweep of table ", t->schema.name,
                                                      " data page ", seq, ": ", st.message()));
          }
        }
        // What was unlinked goes even after an error (or is kept for the collector to retry).
        absl::Status fs = FreeCollected(t, &unlinked);
        if (!fs.ok() && gc_) gc_->KeepUnfreed(t->id, &unlinked);
        if (st.ok()) st = fs;
        if (st.ok() && !ctx.cancelled()) st = MarkSwept(t, it.first, it.end, &plan->flagged[i]);
        return st;
      });
  for (const Local& l : locals) {
    out->versions_removed += l.tally.versions;
    out->records_removed += l.tally.records;
    out->index_entries_removed += l.tally.index_entries;
    out->blobs_removed += l.tally.blobs;
    out->records_kept += l.tally.kept;
    out->pages_visited += l.visited;
    out->pages_skipped += l.skipped;
  }
  return s;
}

absl::Status DatabaseImpl::SweepCatalog(SweepResult* out) {
  // Dead rows of DDL that failed (no indexes, no BLOBs). DDL writes the catalog one at a time,
  // under ddl_mu_.
  util::MutexLock ddl(ddl_mu_);
  const uint64_t horizon = GcHorizon();
  std::vector<uint64_t> recs;
  std::vector<record::Unlinked> unlinked;
  for (uint32_t seq = 0; seq < catalog_->PageSequences(); ++seq) {
    recs.clear();
    if (absl::Status s = catalog_->ListCollectable(seq, &recs); !s.ok()) return s;
    ++out->pages_visited;
    for (uint64_t rec : recs) {
      absl::StatusOr<record::Collected> c =
          catalog_->Collect(rec, horizon, cache::kNoOwnerMark, &unlinked);
      if (!c.ok()) return c.status();
      out->versions_removed += c->versions;
      if (c->pending) ++out->records_kept;
    }
  }
  return catalog_->FreeUnlinked(&unlinked, cache::kNoOwnerMark);
}

absl::Status DatabaseImpl::FlagSweptSlots(const SweepPlan& plan, SweepResult* out) {
  // The pages flagged swept are on disk now (unless changed since): their pointer-page slots
  // can say so (Relation::FlagSweptSlots), and go to disk with the header.
  util::ReaderLock cat(catalog_mu_);
  for (size_t i = 0; i < plan.chunks.size();) {
    const uint32_t part = plan.chunks[i].part;
    TableState* t = plan.tables[part];
    std::vector<uint32_t> seqs;
    for (; i < plan.chunks.size() && plan.chunks[i].part == part; ++i) {
      seqs.insert(seqs.end(), plan.flagged[i].begin(), plan.flagged[i].end());
    }
    if (t->drop_txn.load(std::memory_order_acquire) != 0) continue;
    uint32_t n = 0;
    if (absl::Status s = t->relation->FlagSweptSlots(seqs, &n); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("sweep of table ", t->schema.name,
                                                 ": flagging pages swept: ", s.message()));
    }
    out->pages_flagged += n;
  }
  return absl::OkStatus();
}

absl::Status DatabaseImpl::MarkSwept(TableState* t, uint32_t first, uint32_t end,
                                     std::vector<uint32_t>* flagged) {
  // Shared: a dropped table's pages are not freed (and reused) under the flagging.
  util::ReaderLock cat(catalog_mu_);
  if (t->drop_txn.load(std::memory_order_acquire) != 0) return absl::OkStatus();
  const uint64_t horizon = GcHorizon();
  for (uint32_t seq = first; seq < end; ++seq) {
    absl::StatusOr<bool> marked = t->relation->MarkSwept(seq, horizon);
    if (!marked.ok()) {
      return absl::Status(marked.status().code(),
                          absl::StrCat("sweep of table ", t->schema.name, " data page ", seq, ": ",
                                       marked.status().message()));
    }
    if (*marked) flagged->push_back(seq);
  }
  return absl::OkStatus();
}

void DatabaseImpl::MaybeStartAutoSweep(uint64_t txn_id) {
  const uint64_t interval = sweep_interval_.load(std::memory_order_relaxed);
  if (interval == 0 || auto_sweep_running_.load(std::memory_order_acquire)) return;
  // Cheap first: the OIT is at least where its last scan stopped, and the oldest snapshot at
  // most this transaction. The exact check (a look at every active transaction) runs at most
  // once per 64 transactions while only the cheap one passes.
  if (txn_id <= txns_->oit_lower_bound() + interval) return;
  uint64_t last = sweep_checked_at_.load(std::memory_order_relaxed);
  if (txn_id < last + 64 && last != 0) return;
  if (!sweep_checked_at_.compare_exchange_strong(last, txn_id)) return;
  const txn::TxnCounters c = txns_->counters();
  if (c.ost <= c.oit || c.ost - c.oit <= interval) return;
  util::MutexLock g(auto_sweep_mu_);
  if (stop_sweeps_.load() || auto_sweep_running_.exchange(true)) return;
  if (auto_sweep_.joinable()) auto_sweep_.join();  // the last one, finished
  auto_sweeps_.fetch_add(1, std::memory_order_relaxed);
  auto_sweep_ = std::thread([this] {
    absl::StatusOr<SweepResult> r = Sweep(SweepOptions{});
    if (!r.ok() && !absl::IsCancelled(r.status())) {
      bg_errors_.Add(
          absl::Status(r.status().code(), absl::StrCat("automatic sweep: ", r.status().message())));
    }
    auto_sweep_running_.store(false, std::memory_order_release);
  });
}

void DatabaseImpl::StopAutoSweep() {
  stop_sweeps_.store(true, std::memory_order_release);
  util::MutexLock g(auto_sweep_mu_);
  if (auto_sweep_.joinable()) auto_sweep_.join();
}

absl::Status DatabaseImpl::SetSweepInterval(uint64_t interval) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  {
    util::MutexLock g(header_mu_);
    header_.sweep_interval = interval;
  }
  // In effect at once, before it is durable: a failed write below leaves this handle with the
  // new interval and the file with the old one, which the next open reads; both are safe.
  sweep_interval_.store(interval, std::memory_order_relaxed);
  sweep_checked_at_.store(0, std::memory_order_relaxed);  // a lower interval counts from now
  if (absl::Status s = WriteHeader(/*clean=*/false); !s.ok()) return s;
  // Synced even without forced writes: the caller (ember-fix) exits right after.
  return file_->Sync();
}

}  // namespace ember::db
