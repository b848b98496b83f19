// DatabaseImpl, the engine's implementation of ember::Database: its files, cache, transactions,
// catalog of tables and indexes, DDL, garbage collection, sweep, validation and index builds.
// Defined in database_{impl,open,ddl,gc,sweep,validate,index_build}.cc, one file per part.
#pragma once
#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "ember/database.h"
#include "engine/cache/buffer_cache.h"
#include "engine/cache/page_space.h"
#include "engine/db/background_errors.h"
#include "engine/db/backup_source.h"
#include "engine/db/index_key.h"
#include "engine/db/table_state.h"
#include "engine/index/btree.h"
#include "engine/io/file.h"
#include "engine/io/owner_lock.h"
#include "engine/io/temp_space.h"
#include "engine/page/header_page.h"
#include "engine/record/relation.h"
#include "engine/txn/txn_manager.h"
#include "engine/txn/undo_log.h"
#include "engine/util/mutex.h"
#include "engine/worker/worker_pool.h"

namespace ember {
namespace db {

class GarbageCollector;
struct ValidateWalk;  // what Validate has found so far (database_validate.cc)

// The public form of the engine's page counters: stats() and the transaction's counters.
Counters ToCounters(const util::PageCounters& c);

class DatabaseImpl : public Database, public BackupSource {
 public:
  // Opens over an already opened file (tests pass a fault-injecting one).
  static absl::StatusOr<std::unique_ptr<DatabaseImpl>> OpenFile(std::unique_ptr<io::File> file,
                                                                const Options& options,
                                                                bool create);
  ~DatabaseImpl() override;

  absl::Status Close() override;
  absl::Status DropTable(std::string_view name) override;
  absl::Status DropIndex(std::string_view name) override;
  absl::Status SetIndexActive(std::string_view name, bool active,
                              const IndexBuildOptions& build = {}) override;
  absl::StatusOr<std::unique_ptr<Transaction>> Begin(const TransactionOptions& options) override;
  absl::StatusOr<Table> CreateTable(const TableSchema& schema) override;
  absl::StatusOr<Index> CreateIndex(const IndexSchema& schema,
                                    const IndexBuildOptions& build = {}) override;
  // The index's definition only, inactive (no tree; SetIndexActive builds it): what a restore
  // makes of an index that was inactive, or that it was told not to build.
  absl::StatusOr<Index> CreateInactiveIndex(const IndexSchema& schema);
  absl::StatusOr<Table> GetTable(std::string_view name) override;
  absl::StatusOr<Index> GetIndex(std::string_view name) override;
  std::vector<std::string> TableNames() override;
  absl::StatusOr<ValidationReport> Validate(const ValidateOptions& options) override;
  DatabaseStats stats() override;
  absl::StatusOr<TableStats> GetTableStats(const Table& table) override;
  absl::StatusOr<IndexStats> GetIndexStats(const Index& index) override;
  absl::Status CollectGarbage() override;
  absl::Status Checkpoint() override;
  absl::StatusOr<SweepResult> Sweep(const SweepOptions& options) override;
  absl::StatusOr<BackupResult> Backup(const std::string& path,
                                      const BackupOptions& options) override;
  // BackupSource: what engine/backup reads of the database.
  absl::StatusOr<Snapshot> BeginSnapshot() override;
  uint32_t page_size() const override { return cache_->page_size(); }
  int WorkersFor(int requested) const override;
  std::unique_ptr<blob::TxnBlobs> SnapshotBlobs(uint64_t txn) override;
  util::SharedMutex& catalog_mutex() override ABSL_LOCK_RETURNED(catalog_mu_) {
    return catalog_mu_;
  }
  absl::Status SetSweepInterval(uint64_t interval) override;
  // At each Begin: starts one background sweep when the gap between the oldest snapshot and
  // the OIT passes the sweep interval in effect (sweep_interval_; 0: never). Cheap when there
  // is nothing to do.
  void MaybeStartAutoSweep(uint64_t txn_id);
  // Close: stops a running automatic sweep and waits for its thread.
  void StopAutoSweep();
  // Sweep's stages (database_sweep.cc): every table's data pages in chunks on the workers
  // (flagged: per chunk, the pages MarkSwept flagged), the catalog's dead rows, and the
  // pointer-page slots of the flagged pages once those are on disk.
  struct SweepPlan {
    std::vector<internal::TableState*> tables;  // the undamaged tables (Chunk::part indexes)
    std::vector<worker::Chunk> chunks;
    std::vector<std::vector<uint32_t>> flagged;
  };
  absl::Status SweepTables(int workers, SweepPlan* plan, SweepResult* out);
  absl::Status SweepCatalog(SweepResult* out);
  absl::Status FlagSweptSlots(const SweepPlan& plan, SweepResult* out);
  // Sweep's last step on data pages [first, end) of `t`: flags swept those left with nothing
  // but versions every snapshot sees (Relation::MarkSwept), adding them to `*flagged` (their
  // pointer-page slots follow once they are on disk).
  absl::Status MarkSwept(internal::TableState* t, uint32_t first, uint32_t end,
                         std::vector<uint32_t>* flagged);
  const Options& options() const override { return options_; }
  uint32_t max_key_size() const override;
  // Whether a transaction reading at snapshot `cn` still sees table `t` (a snapshot older
  // than its drop does); NotFound naming it if not.
  absl::Status CheckTableVisible(const internal::TableState& t, uint64_t cn) const;
  // Whether index `ix` can be read now: NotFound once a drop of it (or its table) began,
  // FailedPrecondition while it is inactive, its table's damage (Relation::damage) if any.
  absl::Status CheckIndexUsable(const internal::IndexState& ix) const;
  // After a transaction ended: frees what drops left once nothing can read it (cheap when no
  // drop waits).
  void AfterTransactionEnd() {
    if (pending_drop_count_.load(std::memory_order_acquire) > 0) ReapDropped(false);
  }

  // Database::Open's lock on the file (io/owner_lock.h), released by Close (or TEST_SimulateCrash).
  void TakeOwnerLock(std::unique_ptr<io::OwnerLock> lock) { owner_lock_ = std::move(lock); }

  // For crash tests: drops the cache and everything in memory without writing anything, as if
  // the process died. The object is unusable afterwards.
  void TEST_SimulateCrash();
  // Tests: called by every index build once it holds the table (to run things beside it).
  void TEST_SetIndexBuildHook(std::function<void()> hook) { build_hook_ = std::move(hook); }
  // Stores a BLOB of no bytes as a BLOB record, as builds before the empty BLOB was id 0 did:
  // tests make the databases those builds left (set before any transaction stores a BLOB).
  bool TEST_store_empty_blobs = false;

  cache::BufferCache* cache() { return cache_.get(); }
  cache::PageSpace* space() { return space_.get(); }
  txn::TxnManager* txns() { return txns_.get(); }
  io::File* file() { return file_.get(); }
  io::TempSpace* temp_space() { return temp_.get(); }
  // The parallel workers of index builds, sweeps and backups.
  worker::WorkerPool* workers() override { return workers_.get(); }
  // An empty undo log for a new transaction: one an ended transaction gave back, with its
  // memory (image vectors, chunk maps, arena) still mapped and faulted in, so that a
  // transaction's statements cost the same whatever the allocator, the kernel's huge pages and
  // earlier transactions left behind; else a new one. ReturnUndoLog keeps a few of them, each
  // up to kUndoPoolKeep bytes.
  std::unique_ptr<txn::UndoLog> TakeUndoLog();
  void ReturnUndoLog(std::unique_ptr<txn::UndoLog> log);
  static constexpr size_t kUndoPoolLogs = 2;
  static constexpr uint64_t kUndoPoolKeep = uint64_t{128} << 20;
  // The relation with this id (catalog included), or nullptr.
  record::Relation* RelationById(uint32_t id);
  internal::TableState* TableById(uint32_t id);
  internal::TableState* TableByIdLocked(uint32_t id) ABSL_SHARED_LOCKS_REQUIRED(catalog_mu_);

  // The lock of a record (striped): held by a writer from its version write until its index
  // entries are in, and by garbage collection of the record, so a collector never removes an
  // entry that a concurrent writer found present and relied on. A std::mutex: it guards no
  // field (the analysis could not tell which stripe is whose), and WriteVersion hands its lock
  // back to the caller as a std::unique_lock.
  std::mutex& RecordMutex(uint32_t table, uint64_t rec) {
    return record_mu_[(rec * 0x9E3779B97F4A7C15ull + table) >> 55];
  }
  // Removes the index entries of `rec` whose keys some row of `going` has and no row of
  // `staying` has (`staying` null: the record's current versions, read now).
  // `removed`, if given, is raised by the entries removed.
  absl::Status DropKeys(internal::TableState* t, uint64_t rec,
                        const std::vector<std::string>& going,
                        const std::vector<std::string>* staying, uint64_t mark_txn,
                        uint64_t* removed = nullptr) ABSL_SHARED_LOCKS_REQUIRED(t->rows_mu);
  // Queues (in `unlinked`, freed once `from` and `from2` are written) the stored BLOBs of table
  // `t` that some row of `going` names and no row of `staying` does. A stored BLOB belongs to
  // one record (a row naming another record's BLOB gets a copy), and a version can only keep
  // the BLOBs of the version it replaced, so these are referenced by nothing else.
  // (`rec`: the record the versions belong to, named if one of them does not decode.)
  absl::Status QueueBlobFrees(const internal::TableState* t, uint64_t rec,
                              const std::vector<std::string>& going,
                              const std::vector<std::string>& staying, page::PageNo from,
                              page::PageNo from2, std::vector<record::Unlinked>* unlinked);
  // Garbage collection of records of one table (under their record locks); lines to free on
  // other pages are appended to `unlinked` (free them with Relation::FreeUnlinked). Sets
  // `*pending` if some garbage could not be collected yet (an active snapshot still sees it).
  // With `busy`, a table whose rows lock a build holds is left alone (and `*busy` set) instead
  // of waiting for the build.
  // `tally`, if given, is raised by what was removed (and the records kept as pending).
  struct CollectTally {
    uint64_t versions = 0, records = 0, index_entries = 0, blobs = 0, kept = 0;
  };
  // Frees the lines a collection of `t` unlinked (Relation::FreeUnlinked), unless the table is
  // being dropped: then they wait in the relation (Relation::FreeLater) for the drop's freeing,
  // which takes them before it frees the table's pages. A collector that holds no snapshot (the
  // background collector, a sweep) may otherwise free lines on pages the drop has freed and
  // someone has reused meanwhile. `when_written`: as Relation::FreeUnlinked's.
  absl::Status FreeCollected(internal::TableState* t, std::vector<record::Unlinked>* unlinked,
                             bool when_written = false);
  absl::Status CollectRecords(internal::TableState* t, std::span<const uint64_t> recs,
                              std::vector<record::Unlinked>* unlinked, bool* pending = nullptr,
                              bool* busy = nullptr, CollectTally* tally = nullptr);
  // The horizon for garbage collection now.
  uint64_t GcHorizon() const { return txns_->OldestSnapshotCn(); }
  GarbageCollector* gc() { return gc_.get(); }
  // Errors no caller waits for (background_errors.h).
  BackgroundErrors* background_errors() { return &bg_errors_; }
  bool open_for_gc() const { return open_.load(std::memory_order_acquire); }
  // FailedPrecondition "database ... is closed" after Close: what every call on the database,
  // its transactions, cursors and BLOB readers and writers returns from then on.
  absl::Status CheckOpen() const override;

 private:
  friend class TransactionImpl;
  DatabaseImpl(std::unique_ptr<io::File> file, const Options& options);
  absl::Status MakeCache(uint32_t page_size);  // cache_ for options_.cache_pages
  absl::Status CreateNew();
  absl::Status OpenExisting();
  absl::Status LoadCatalog();
  absl::Status WriteHeader(bool clean);
  absl::Status PersistNext(uint64_t next);
  absl::StatusOr<internal::TableState*> AddTableState(uint32_t id, const TableSchema& schema,
                                                      page::PageNo first_pp, uint64_t catalog_rec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(catalog_mu_);
  // `root` 0: an inactive index.
  absl::StatusOr<internal::IndexState*> AddIndexState(uint32_t id, const IndexSchema& schema,
                                                      page::PageNo root, uint64_t catalog_rec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(catalog_mu_);
  // CreateIndex (`active`: built) and CreateInactiveIndex.
  absl::StatusOr<Index> DefineIndex(const IndexSchema& schema, const IndexBuildOptions& build,
                                    bool active);
  // The catalog row of an index as it is now (its tree, or inactive).
  std::string IndexCatalogRow(const internal::IndexState& ix) const;
  // DDL (database_ddl.cc). Replaces (raw null: deletes) catalog record `rec` for DDL transaction
  // `txn`.
  absl::Status WriteCatalogRow(uint64_t txn, uint64_t rec, const std::string* raw);
  // The index `name` for a DDL call (ready, not dropped), or NotFound.
  absl::StatusOr<internal::IndexState*> IndexForDdl(std::string_view name);
  // Pages of dropped tables and of dropped or deactivated trees wait in pending_drops_ until
  // no snapshot can read them (the horizon has reached the DDL's CN), then go back to the free
  // list. `force`: all of them (Close: nothing reads any more). Runs where the DDL lock is
  // free: called after each DDL, by every transaction end while drops wait, by
  // CollectGarbage and by Close.
  void ReapDropped(bool force);
  struct PendingDrop {
    uint64_t cn = 0;                        // the DDL's commit
    internal::TableState* table = nullptr;  // a dropped table: its relation and BLOBs
    std::vector<index::BTree*> trees;       // dropped or deactivated trees
    std::string what;                       // for errors: "table T", "index I"
  };
  // Frees the pages of `d`; the walk first, then the frees under catalog_mu_ (Validate sees
  // the pages either reachable through pending_drops_ or free).
  absl::Status FreeDropped(const PendingDrop& d);
  // The bulk build of `ix` over its table `t` (ix->table, named apart so that the analysis can
  // check its rows lock) for DDL transaction `txn` (database_index_build.cc): nothing for an
  // empty table, the table's damage (Relation::damage) for a damaged one.
  absl::Status BuildIndex(internal::TableState* t, internal::IndexState* ix, uint64_t txn,
                          const IndexBuildOptions& opt, IndexStats* stats)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(t->rows_mu);
  absl::Status BuildIndexByInserts(internal::IndexState* ix, uint64_t txn, IndexStats* stats);
  // CollectGarbage's work: every table's garbage, now.
  absl::Status CollectAll();
  // Validate's steps (database_validate.cc), in order, each adding what it finds to the walk.
  // The pages every database has: the header, the PIPs and the TIP chain.
  void ListFixedPages(ValidateWalk* w);
  // The catalog's and every table's relation (Relation::Check), the pages of the tables'
  // stored BLOBs, and the orphan BLOBs.
  absl::Status CheckRelations(ValidateWalk* w) ABSL_SHARED_LOCKS_REQUIRED(catalog_mu_);
  // Every index's B-tree and the form of its entries.
  absl::Status CheckIndexes(ValidateWalk* w) ABSL_SHARED_LOCKS_REQUIRED(catalog_mu_);
  // Every page reached must be allocated in its PIP; allocated pages reached by nothing are
  // unreachable.
  absl::Status CheckPageSpace(ValidateWalk* w);
  // With options.free_unreachable: frees the unreachable pages and the orphan BLOBs.
  absl::Status FreeUnreferenced(const ValidateOptions& options, ValidateWalk* w);
  // After an unclean end (at open, before anything else runs): Validate(free_unreachable),
  // which frees nothing when it finds damage; the damage is then a background error.
  void ReclaimAfterCrash();

  std::unique_ptr<io::OwnerLock> owner_lock_;  // before file_: released after it is closed
  std::unique_ptr<io::File> file_;
  Options options_;
  std::unique_ptr<cache::BufferCache> cache_;
  std::unique_ptr<cache::PageSpace> space_;
  std::unique_ptr<txn::TxnManager> txns_;
  std::unique_ptr<record::Relation> catalog_;  // relation 0
  std::unique_ptr<io::TempSpace> temp_;
  std::unique_ptr<worker::WorkerPool> workers_;
  std::function<void()> build_hook_;  // TEST_SetIndexBuildHook
  // Undo logs of ended transactions with the memory they grew (see TakeUndoLog).
  util::Mutex undo_pool_mu_;
  std::vector<std::unique_ptr<txn::UndoLog>> undo_pool_ ABSL_GUARDED_BY(undo_pool_mu_);

  util::Mutex header_mu_;
  page::HeaderFields header_ ABSL_GUARDED_BY(header_mu_);

  mutable util::SharedMutex catalog_mu_;
  std::vector<std::unique_ptr<internal::TableState>> tables_ ABSL_GUARDED_BY(catalog_mu_);
  std::vector<std::unique_ptr<internal::IndexState>> indexes_ ABSL_GUARDED_BY(catalog_mu_);
  absl::flat_hash_map<std::string, internal::TableState*> table_by_name_
      ABSL_GUARDED_BY(catalog_mu_);
  absl::flat_hash_map<std::string, internal::IndexState*> index_by_name_
      ABSL_GUARDED_BY(catalog_mu_);
  // Dropped tables and indexes, kept until Close so that handles never dangle.
  std::vector<std::unique_ptr<internal::TableState>> dropped_tables_ ABSL_GUARDED_BY(catalog_mu_);
  std::vector<std::unique_ptr<internal::IndexState>> dropped_indexes_ ABSL_GUARDED_BY(catalog_mu_);
  std::vector<PendingDrop> pending_drops_ ABSL_GUARDED_BY(catalog_mu_);
  std::atomic<size_t> pending_drop_count_{0};
  uint32_t next_relation_id_ ABSL_GUARDED_BY(catalog_mu_) = 1;
  util::Mutex ddl_mu_ ABSL_ACQUIRED_BEFORE(catalog_mu_);  // one DDL at a time
  util::Mutex sweep_mu_;                                  // one sweep at a time
  // The automatic sweep (database_sweep.cc): at most one thread, started by MaybeStartAutoSweep.
  util::Mutex auto_sweep_mu_;
  std::thread auto_sweep_ ABSL_GUARDED_BY(auto_sweep_mu_);
  std::atomic<bool> auto_sweep_running_{false};
  std::atomic<bool> stop_sweeps_{false};  // Close: a running sweep stops at its next chunk
  std::atomic<uint64_t> sweeps_{0}, auto_sweeps_{0};
  std::atomic<uint64_t> sweep_checked_at_{0};  // next transaction id at the last exact check
  // The interval in effect: Options::sweep_interval, else the header's (set at open, and by
  // SetSweepInterval).
  std::atomic<uint64_t> sweep_interval_{page::kDefaultSweepInterval};

  std::array<std::mutex, 512> record_mu_;
  std::atomic<uint64_t> next_temp_blob_{1};  // temporary BLOB ids, unique in the database
  std::unique_ptr<GarbageCollector> gc_;     // background collector (policy background/combined)
  BackgroundErrors bg_errors_;
  bool opened_after_crash_ = false;  // set at open (the header's clean-shutdown flag)
  uint64_t pages_reclaimed_ = 0, blob_pages_reclaimed_ = 0;  // by ReclaimAfterCrash
  std::atomic<uint64_t> gc_versions_{0}, gc_records_{0}, gc_keys_{0};

  std::atomic<bool> open_{false};
  std::atomic<int> active_txns_{0};
  // What the doublewrite recovery at open rewrote (set before the database is shared).
  std::vector<uint32_t> repaired_pages_;
  uint64_t torn_pages_repaired_ = 0;
};

}  // namespace db
}  // namespace ember
