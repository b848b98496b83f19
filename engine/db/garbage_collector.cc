// The background garbage collector and the database's garbage-collection entry points
// (GarbageCollector, DatabaseImpl::CollectRecords / DropKeys / CollectGarbage / GetTableStats).
#include "engine/db/garbage_collector.h"

#include <chrono>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "engine/blob/blob_format.h"
#include "engine/db/db_state.h"
#include "engine/record/record_format.h"

namespace ember::db {

using internal::IndexState;
using internal::TableState;

GarbageCollector::GarbageCollector(DatabaseImpl* db) : db_(db) {
  thread_ = std::thread([this] { Loop(); });
}

GarbageCollector::~GarbageCollector() { Stop(); }

void GarbageCollector::Stop() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void GarbageCollector::Notify(const std::vector<std::pair<uint32_t, uint32_t>>& pages,
                              uint64_t cn) {
  if (pages.empty()) return;
  {
    std::lock_guard<std::mutex> g(mu_);
    for (const auto& p : pages) {
      uint64_t& at = queue_[p];
      at = std::max(at, cn);
    }
  }
  cv_.notify_one();
}

size_t GarbageCollector::queued() const {
  std::lock_guard<std::mutex> g(mu_);
  return queue_.size() + in_round_;
}

absl::Status GarbageCollector::last_error() const {
  std::lock_guard<std::mutex> g(mu_);
  return last_error_;
}

absl::Status GarbageCollector::RunOnce() {
  std::lock_guard<std::mutex> run(run_mu_);
  const uint64_t horizon = db_->GcHorizon();
  std::vector<std::pair<uint32_t, uint32_t>> ready;
  {
    std::lock_guard<std::mutex> g(mu_);
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (it->second <= horizon) {
        ready.push_back(it->first);
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    in_round_ = ready.size();
  }
  absl::Status first;
  std::vector<record::Unlinked> unlinked;
  TableState* cur = nullptr;
  auto flush = [&]() {
    if (cur && !unlinked.empty()) {
      absl::Status s = cur->relation->FreeUnlinked(&unlinked, kGcMarkTxn);
      if (first.ok()) first = s;
      unlinked.clear();
    }
  };
  std::vector<uint64_t> recs;
  for (const auto& [table, seq] : ready) {
    TableState* t = db_->TableById(table);
    if (t == nullptr) continue;  // dropped meanwhile
    if (t != cur) {
      flush();
      cur = t;
    }
    recs.clear();
    if (absl::Status s = t->relation->ListCollectable(seq, &recs); !s.ok()) {
      if (first.ok()) first = s;
      continue;
    }
    if (absl::Status s = db_->CollectRecords(t, recs, &unlinked); !s.ok() && first.ok()) first = s;
    if (unlinked.size() >= 4096) flush();
  }
  flush();
  std::lock_guard<std::mutex> g(mu_);
  in_round_ = 0;
  if (!first.ok()) last_error_ = first;
  return first;
}

void GarbageCollector::Loop() {
  std::unique_lock<std::mutex> g(mu_);
  while (!stop_) {
    // Wake on notification, and now and then for pages waiting for the horizon to move.
    cv_.wait_for(g, std::chrono::milliseconds(200));
    if (stop_ || queue_.empty()) continue;
    g.unlock();
    (void)RunOnce();  // errors are kept in last_error_; the pages are retried when notified
    g.lock();
  }
}

// ---------------------------------------------------------------- DatabaseImpl

TableState* DatabaseImpl::TableById(uint32_t id) {
  std::shared_lock<std::shared_mutex> g(catalog_mu_);
  return TableByIdLocked(id);
}

TableState* DatabaseImpl::TableByIdLocked(uint32_t id) {
  for (const auto& t : tables_) {
    if (t->id == id) return t.get();
  }
  return nullptr;
}

absl::Status DatabaseImpl::DropKeys(TableState* t, uint64_t rec,
                                    const std::vector<std::string>& going,
                                    const std::vector<std::string>* staying, uint64_t mark_txn,
                                    bool count_as_gc) {
  if (t->indexes.empty() || going.empty()) return absl::OkStatus();
  const size_t ncols = t->schema.columns.size();
  // Keys (per index) of the rows that go.
  std::vector<absl::flat_hash_set<std::string>> drop(t->indexes.size());
  bool any = false;
  std::string key;
  for (const std::string& raw : going) {
    Row row;
    if (!record::DecodeRow(raw, ncols, &row).ok()) continue;
    for (size_t i = 0; i < t->indexes.size(); ++i) {
      internal::EncodeIndexKey(*t->indexes[i], row, &key);
      drop[i].insert(key);
      any = true;
    }
  }
  if (!any) return absl::OkStatus();
  size_t left = 0;
  for (const auto& d : drop) left += d.size();
  auto keep = [&](std::string_view raw) {
    Row row;
    if (!record::DecodeRow(raw, ncols, &row).ok()) return;
    for (size_t i = 0; i < t->indexes.size(); ++i) {
      internal::EncodeIndexKey(*t->indexes[i], row, &key);
      left -= drop[i].erase(key);
    }
  };
  if (staying) {
    for (const std::string& raw : *staying) keep(raw);
  } else {
    absl::Status s = t->relation->ForEachVersion(
        rec, [&](uint64_t writer, bool deleted, std::string_view raw) {
          if (!deleted && txns_->StateOf(writer) != txn::kCnDead) keep(raw);
          return left > 0;
        });
    if (!s.ok() && !absl::IsNotFound(s)) return s;
  }
  for (size_t i = 0; i < t->indexes.size(); ++i) {
    for (const std::string& k : drop[i]) {
      absl::Status s = t->indexes[i]->tree->Remove(internal::IndexEntry(k, rec), mark_txn);
      if (s.ok() && count_as_gc) gc_keys_.fetch_add(1, std::memory_order_relaxed);
      if (!s.ok() && !absl::IsNotFound(s)) return s;
    }
  }
  return absl::OkStatus();
}

void DatabaseImpl::QueueBlobFrees(const TableState* t, const std::vector<std::string>& going,
                                  const std::vector<std::string>& staying, page::PageNo from,
                                  page::PageNo from2, std::vector<record::Unlinked>* unlinked) {
  if (!t->names_blobs()) return;
  absl::flat_hash_set<uint64_t> gone;
  for (const std::string& raw : going) t->AddBlobIds(raw, &gone);
  if (gone.empty()) return;
  absl::flat_hash_set<uint64_t> kept;
  for (const std::string& raw : staying) t->AddBlobIds(raw, &kept);
  for (uint64_t id : gone) {
    if (kept.contains(id)) continue;
    record::Unlinked u;
    u.from = from;
    u.from2 = from2;
    u.blob = id;
    unlinked->push_back(u);
  }
}

absl::Status DatabaseImpl::CollectRecords(TableState* t, std::span<const uint64_t> recs,
                                          std::vector<record::Unlinked>* unlinked,
                                          bool* pending) {
  const uint64_t horizon = GcHorizon();
  std::shared_lock<std::shared_mutex> cat(catalog_mu_);  // the index list must not change
  for (uint64_t rec : recs) {
    std::lock_guard<std::mutex> g(RecordMutex(t->id, rec));
    absl::StatusOr<record::Collected> c = t->relation->Collect(rec, horizon, kGcMarkTxn, unlinked);
    if (!c.ok()) return c.status();
    if (pending && c->pending) *pending = true;
    if (!c->changed) continue;
    gc_versions_.fetch_add(c->versions, std::memory_order_relaxed);
    if (c->record_gone) gc_records_.fetch_add(1, std::memory_order_relaxed);
    if (absl::Status s = DropKeys(t, rec, c->going, &c->staying, kGcMarkTxn, true); !s.ok()) {
      return s;
    }
    QueueBlobFrees(t, c->going, c->staying, c->backout_page, c->cut_page, unlinked);
    if (absl::Status s = t->relation->NoteSpaceFreed(rec, kGcMarkTxn); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status DatabaseImpl::CollectGarbage() {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  std::unique_lock<std::mutex> pause;
  if (gc_) pause = gc_->Pause();
  std::vector<TableState*> tables;
  {
    std::shared_lock<std::shared_mutex> g(catalog_mu_);
    for (const auto& t : tables_) tables.push_back(t.get());
  }
  std::vector<uint64_t> recs;
  std::vector<record::Unlinked> unlinked;
  for (TableState* t : tables) {
    const uint32_t n = t->relation->PageSequences();
    for (uint32_t seq = 0; seq < n; ++seq) {
      recs.clear();
      if (absl::Status s = t->relation->ListCollectable(seq, &recs); !s.ok()) return s;
      if (absl::Status s = CollectRecords(t, recs, &unlinked); !s.ok()) return s;
      if (unlinked.size() >= 4096) {
        if (absl::Status s = t->relation->FreeUnlinked(&unlinked, kGcMarkTxn); !s.ok()) return s;
      }
    }
    if (absl::Status s = t->relation->FreeUnlinked(&unlinked, kGcMarkTxn); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<TableStats> DatabaseImpl::GetTableStats(const Table& table) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  if (!table) return absl::InvalidArgumentError("invalid table handle");
  record::VersionStats v;
  if (absl::Status s = TableState::From(table)->relation->GetVersionStats(&v); !s.ok()) return s;
  TableStats out;
  out.records = v.records;
  out.back_versions = v.back_versions;
  out.back_version_bytes = v.back_version_bytes;
  out.delete_stubs = v.delete_stubs;
  out.dead_versions = v.dead_heads;
  out.data_pages = v.data_pages;
  out.pages_with_garbage = v.garbage_pages;
  return out;
}

}  // namespace ember::db
