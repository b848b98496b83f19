// DatabaseImpl (database_impl.h): the handles' accessors, lookups in the catalog, statistics,
// Begin and the pool of undo logs. Open and close are in database_open.cc, DDL in
// database_ddl.cc.
#include "engine/db/database_impl.h"

#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/blob/blob_codec.h"
#include "engine/blob/stored_blobs.h"
#include "engine/db/garbage_collector.h"
#include "engine/db/transaction_impl.h"
#include "engine/io/owner_lock.h"
#include "engine/page/doublewrite_page.h"
#include "engine/page/pip.h"
#include "engine/record/record_format.h"
#include "engine/util/coding.h"

namespace ember {

uint32_t Table::id() const { return state_->id; }
const TableSchema& Table::schema() const { return state_->schema; }
const IndexSchema& Index::schema() const { return state_->schema; }

namespace db {

using cache::LatchMode;
using internal::IndexState;
using internal::TableState;

absl::Status DatabaseImpl::CheckOpen() const {
  if (!open_.load(std::memory_order_acquire)) {
    return absl::FailedPreconditionError(absl::StrCat("database ", file_->path(), " is closed"));
  }
  return absl::OkStatus();
}

std::unique_ptr<txn::UndoLog> DatabaseImpl::TakeUndoLog() {
  {
    util::MutexLock g(undo_pool_mu_);
    if (!undo_pool_.empty()) {
      std::unique_ptr<txn::UndoLog> log = std::move(undo_pool_.back());
      undo_pool_.pop_back();
      return log;
    }
  }
  return std::make_unique<txn::UndoLog>(temp_.get(), options_.undo_memory_limit);
}

void DatabaseImpl::ReturnUndoLog(std::unique_ptr<txn::UndoLog> log) {
  if (log == nullptr || log->Reset() > kUndoPoolKeep) return;  // a huge one gives its memory back
  util::MutexLock g(undo_pool_mu_);
  if (undo_pool_.size() < kUndoPoolLogs) undo_pool_.push_back(std::move(log));
}

// ---------------------------------------------------------------- catalog

TableState* DatabaseImpl::TableById(uint32_t id) {
  util::ReaderLock g(catalog_mu_);
  return TableByIdLocked(id);
}

TableState* DatabaseImpl::TableByIdLocked(uint32_t id) {
  for (const auto& t : tables_) {
    if (t->id == id) return t.get();
  }
  return nullptr;
}

absl::Status DatabaseImpl::Checkpoint() {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  return cache_->Checkpoint();
}

absl::StatusOr<IndexStats> DatabaseImpl::GetIndexStats(const Index& index) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  if (!index) return absl::InvalidArgumentError("invalid index handle");
  IndexState* ix = IndexState::From(index);
  if (ix->drop_txn.load() != 0 && txn::IsCommittedCn(txns_->StateOf(ix->drop_txn.load()))) {
    return absl::NotFoundError(absl::StrCat("index ", ix->schema.name, " was dropped"));
  }
  util::MutexLock g(ix->stats_mu);
  return ix->stats;
}

absl::StatusOr<Table> DatabaseImpl::GetTable(std::string_view name) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  util::ReaderLock g(catalog_mu_);
  auto it = table_by_name_.find(absl::string_view(name.data(), name.size()));
  if (it == table_by_name_.end()) {
    return absl::NotFoundError(absl::StrCat("no table ", std::string(name)));
  }
  return it->second->handle();
}

absl::StatusOr<Index> DatabaseImpl::GetIndex(std::string_view name) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  util::ReaderLock g(catalog_mu_);
  auto it = index_by_name_.find(absl::string_view(name.data(), name.size()));
  if (it == index_by_name_.end() || !it->second->ready.load()) {
    return absl::NotFoundError(absl::StrCat("no index ", std::string(name)));
  }
  return it->second->handle();
}

std::vector<std::string> DatabaseImpl::TableNames() {
  std::vector<std::string> out;
  if (!CheckOpen().ok()) return out;  // a closed database has no tables to offer
  util::ReaderLock g(catalog_mu_);
  for (const auto& t : tables_) out.push_back(t->schema.name);
  return out;
}

Counters ToCounters(const util::PageCounters& c) {
  return {c.fetches, c.marks, c.reads, c.writes, c.dw_writes, c.cycle_writes, c.syncs};
}

DatabaseStats DatabaseImpl::stats() {
  DatabaseStats s;
  s.pages = ToCounters(cache_->counters());
  txn::TxnCounters t = txns_->counters();
  s.next_transaction = t.next;
  s.oldest_interesting = t.oit;
  s.oldest_active = t.oat;
  s.oldest_snapshot = t.ost;
  s.commits = t.commits;
  s.group_commit_flushes = t.group_flushes;
  s.doublewrite_stalls = cache_->doublewrite_stalls();
  s.page_count = space_->page_count();
  s.pages_repaired_at_open = repaired_pages_.size();
  s.torn_pages_repaired_at_open = torn_pages_repaired_;
  io::TempSpaceStats ts = temp_->stats();
  s.temp_bytes_in_memory = ts.bytes_in_memory;
  s.temp_bytes_on_disk = ts.bytes_on_disk;
  s.temp_spills = ts.spills;
  s.gc_versions_removed = gc_versions_.load(std::memory_order_relaxed);
  s.gc_records_removed = gc_records_.load(std::memory_order_relaxed);
  s.gc_index_entries_removed = gc_keys_.load(std::memory_order_relaxed);
  s.gc_pages_queued = gc_ ? gc_->queued() : 0;
  s.sweeps = sweeps_.load(std::memory_order_relaxed);
  s.automatic_sweeps = auto_sweeps_.load(std::memory_order_relaxed);
  s.sweep_interval = sweep_interval_.load(std::memory_order_relaxed);
  s.background_errors = bg_errors_.count();
  s.last_background_error = bg_errors_.last();
  s.opened_after_crash = opened_after_crash_;
  s.pages_reclaimed_at_open = pages_reclaimed_;
  s.blob_pages_reclaimed_at_open = blob_pages_reclaimed_;
  return s;
}

record::Relation* DatabaseImpl::RelationById(uint32_t id) {
  if (id == 0) return catalog_.get();
  util::ReaderLock g(catalog_mu_);
  for (const auto& t : tables_) {
    if (t->id == id) return t->relation.get();
  }
  // A BLOB of a dropped table, read by a snapshot older than the drop.
  for (const auto& t : dropped_tables_) {
    if (t->id == id) return t->relation.get();
  }
  return nullptr;
}

uint32_t DatabaseImpl::max_key_size() const { return internal::MaxIndexKey(options_.page_size); }

absl::StatusOr<std::unique_ptr<Transaction>> DatabaseImpl::Begin(const TransactionOptions& o) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  absl::StatusOr<txn::TxnManager::Started> t = txns_->Begin();
  if (!t.ok()) return t.status();
  MaybeStartAutoSweep(t->id);
  return std::unique_ptr<Transaction>(new TransactionImpl(this, o, t->id, t->snapshot));
}

// ---------------------------------------------------------------- backup (backup_source.h)

absl::StatusOr<BackupResult> DatabaseImpl::Backup(const std::string& path,
                                                  const BackupOptions& options) {
  return WriteBackup(this, path, options);
}

absl::StatusOr<BackupSource::Snapshot> DatabaseImpl::BeginSnapshot() {
  Snapshot snap;
  // The snapshot and the definitions it goes with: no DDL between them.
  util::MutexLock ddl(ddl_mu_);
  TransactionOptions to;
  to.read_only = true;
  absl::StatusOr<std::unique_ptr<Transaction>> t = Begin(to);
  if (!t.ok()) return t.status();
  snap.txn = std::move(*t);
  snap.view = static_cast<TransactionImpl*>(snap.txn.get())->View();
  util::ReaderLock g(catalog_mu_);
  for (const auto& table : tables_) {
    if (table->drop_txn.load(std::memory_order_acquire) == 0) snap.tables.push_back(table.get());
  }
  for (const auto& ix : indexes_) {
    if (ix->drop_txn.load(std::memory_order_acquire) != 0 ||
        !ix->ready.load(std::memory_order_acquire)) {
      continue;
    }
    snap.indexes.emplace_back(ix->schema, ix->active.load(std::memory_order_acquire));
  }
  return snap;
}

int DatabaseImpl::WorkersFor(int requested) const {
  return workers_->WorkersFor(requested > 0 ? requested : options_.parallel_workers);
}

std::unique_ptr<blob::TxnBlobs> DatabaseImpl::SnapshotBlobs(uint64_t txn) {
  return std::make_unique<blob::TxnBlobs>(
      cache_.get(), space_.get(), temp_.get(), options_.blob_temp_space, txn,
      [this](uint32_t rel) { return RelationById(rel); }, &next_temp_blob_);
}

}  // namespace db
}  // namespace ember
