// The engine's implementation of the public API: the database object, its catalog of tables
// and indexes, and the per-table / per-index state behind the public Table and Index handles.
#pragma once
#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <thread>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "ember/database.h"
#include "engine/db/background_errors.h"
#include "engine/cache/buffer_cache.h"
#include "engine/cache/page_space.h"
#include "engine/index/btree.h"
#include "engine/io/file.h"
#include "engine/io/owner_lock.h"
#include "engine/io/temp_space.h"
#include "engine/page/header_page.h"
#include "engine/record/relation.h"
#include "engine/txn/txn_manager.h"
#include "engine/txn/undo_log.h"
#include "engine/worker/worker_pool.h"

namespace ember {
namespace internal {

struct IndexState;

struct TableState {
  uint32_t id = 0;
  uint64_t catalog_rec = 0;  // its row in the catalog (relation 0)
  TableSchema schema;
  // The DDL transaction dropping the table (0: none). Set before that transaction commits,
  // under catalog_mu_ and rows_mu held exclusively: no write starts afterwards, and a
  // snapshot sees the table gone once it sees that transaction committed (DropTable).
  std::atomic<uint64_t> drop_txn{0};
  // Active transactions that have changed rows of the table (a drop waits for none).
  std::atomic<int> writers{0};
  std::unique_ptr<record::Relation> relation;
  // Held shared by every change of the table's rows together with their index entries (a
  // write with its keys, an undo, a collection of its records) and exclusively by a build of
  // one of its indexes: no change misses an index being built, and readers never wait for it.
  // Taken after DatabaseImpl::catalog_mu_ (shared) where both are held.
  mutable std::shared_mutex rows_mu;
  std::vector<IndexState*> indexes;  // guarded by rows_mu (changed only under ddl_mu_ too)
  Table handle() { return Table(this); }
  static TableState* From(const Table& t) { return t.state_; }
  // Whether a row can name a stored BLOB: a BLOB column, or a string/bytes value stored out of
  // line. Tables without such columns skip all BLOB bookkeeping when versions go.
  bool names_blobs() const {
    for (const Column& c : schema.columns) {
      if (c.type == ColumnType::kBlob || c.type == ColumnType::kString ||
          c.type == ColumnType::kBytes) {
        return true;
      }
    }
    return false;
  }
  // The zstd level of column `i` for values it stores out of line (0: uncompressed).
  int zstd_level(size_t i) const {
    return i < schema.columns.size() ? schema.columns[i].zstd_level : 0;
  }
  // Adds the stored BLOBs of this table that raw row `raw` names (BLOB fields and values kept
  // out of line) to `ids`. The error of a row that does not decode (see UndecodableVersion).
  absl::Status AddBlobIds(std::string_view raw, absl::flat_hash_set<uint64_t>* ids) const;
  // The relation's damage (Relation::damage) as the error of `what` ("sweep", "backup") of
  // this table, for the calls that do every other table first; OK when undamaged.
  absl::Status DamageFor(absl::string_view what) const;
};

// DataLoss for a version of record `rec` of table `t` that does not decode as a row (`cause`):
// names the table, the record, and the page and line of the version (`at`; when unknown, those
// of the record's primary version). Every reader that needs a version's columns (index build
// and maintenance, unique checks, garbage collection, Validate) reports such damage this way
// rather than skipping the version.
absl::Status UndecodableVersion(const TableState& t, uint64_t rec,
                                std::optional<std::pair<page::PageNo, uint16_t>> at,
                                const absl::Status& cause);

struct IndexState {
  uint32_t id = 0;
  uint64_t catalog_rec = 0;  // its row in the catalog
  IndexSchema schema;
  TableState* table = nullptr;
  std::vector<size_t> key_columns;  // positions in the table's columns
  // The tree, or null while the index is inactive. Trees of earlier activations stay in
  // `trees` until Close (a reader that started before a deactivation may still hold one; its
  // pages are freed once no snapshot that could read it is left, see DatabaseImpl::ReapDropped).
  index::BTree* btree() const { return tree_.load(std::memory_order_acquire); }
  void SetTree(std::unique_ptr<index::BTree> t) {  // REQUIRES: DatabaseImpl::ddl_mu_ held
    tree_.store(t.get(), std::memory_order_release);
    if (t) trees.push_back(std::move(t));
  }
  std::atomic<index::BTree*> tree_{nullptr};
  std::vector<std::unique_ptr<index::BTree>> trees;
  // False while the index is being built: GetIndex does not find it yet.
  std::atomic<bool> ready{true};
  // Inactive (SetIndexActive false): no tree, not maintained, not usable for reads.
  std::atomic<bool> active{true};
  // The DDL transaction dropping the index (0: none); set as TableState::drop_txn is.
  std::atomic<uint64_t> drop_txn{0};
  std::mutex stats_mu;
  IndexStats stats;  // guarded by stats_mu: its last build's
  Index handle() { return Index(this); }
  static IndexState* From(const Index& ix) { return ix.state_; }
};

// Encodes the key columns of `row` (order-preserving; NULL sorts first). Returns whether any key
// column is NULL (such keys are exempt from uniqueness, as in SQL).
bool EncodeIndexKey(const IndexState& ix, const Row& row, std::string* key);
// Key `key` of `ix` (its encoded key columns, as EncodeIndexKey makes them) as the values it
// holds, for messages: "(name, id)=('alice', 42)"; strings quoted and escaped, bytes in hex,
// both cut at 64 bytes (then "...' (N bytes)").
std::string KeyText(const IndexState& ix, std::string_view key);
// The prefix of a key given as values for the first key columns (for lookups and ranges).
absl::Status EncodeKeyPrefix(const IndexState& ix, const Row& values, std::string* key);
// Full B-tree entry key: the encoded columns, then the record number as a byte count (1-8) and
// that many big-endian bytes (no high zero bytes). Entries order by key, then by record number.
// The tree's value is 0: the key carries the record (docs/format.md, "Index entries").
std::string IndexEntry(std::string_view key, uint64_t rec);
// Appends what IndexEntry puts after the key.
void AppendRecordNumber(uint64_t rec, std::string* entry);
// The longest encoded key (all key columns, before IndexEntry appends the record number) an
// index takes with pages of `page_size` (Database::max_key_size).
uint32_t MaxIndexKey(uint32_t page_size);
// Entries a seek for one key copies from its leaf (lookups, unique checks): that key's entries
// (usually one version's, a few when older versions had the same key) and the next key's,
// which ends the scan.
constexpr size_t kPointSeekBatch = 3;
// Data pages read ahead at a time by a scan and by a rollback's sweep over its records in
// record order (one read per run of consecutive pages: a whole extent).
constexpr uint32_t kReadAhead = 32;
// Splits an entry of `ix` into its key part (the encoded columns) and its record number. False
// when it does not parse.
bool ParseIndexEntry(const IndexState& ix, std::string_view entry, std::string_view* key,
                     uint64_t* rec);

}  // namespace internal

namespace db {

class GarbageCollector;
struct ValidateWalk;  // what Validate has found so far (validate.cc)

// Mark id for pages changed by garbage collection (no transaction owns them).
constexpr uint64_t kGcMarkTxn = record::kNoOwnerMark;

class DatabaseImpl : public Database {
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
  absl::StatusOr<SweepResult> Sweep(const SweepOptions& options) override;
  absl::StatusOr<BackupResult> Backup(const std::string& path,
                                      const BackupOptions& options) override;  // backup/
  absl::Status SetSweepInterval(uint64_t interval) override;
  // At each Begin: starts one background sweep when the gap between the oldest snapshot and
  // the OIT passes the sweep interval in effect (sweep_interval_; 0: never). Cheap when there
  // is nothing to do.
  void MaybeStartAutoSweep(uint64_t txn_id);
  // Close: stops a running automatic sweep and waits for its thread.
  void StopAutoSweep();
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

  // Database::Open's lock on the file (io/owner_lock.h), released by Close (or SimulateCrash).
  void TakeOwnerLock(std::unique_ptr<io::OwnerLock> lock) { owner_lock_ = std::move(lock); }

  // For crash tests: drops the cache and everything in memory without writing anything, as if
  // the process died. The object is unusable afterwards.
  void SimulateCrash();
  // Tests: called by every index build once it holds the table (to run things beside it).
  void SetIndexBuildHookForTest(std::function<void()> hook) { build_hook_ = std::move(hook); }
  // Stores a BLOB of no bytes as a BLOB record, as builds before the empty BLOB was id 0 did:
  // tests make the databases those builds left (set before any transaction stores a BLOB).
  bool TEST_store_empty_blobs = false;

  cache::BufferCache* cache() { return cache_.get(); }
  cache::PageSpace* space() { return space_.get(); }
  txn::TxnManager* txns() { return txns_.get(); }
  io::File* file() { return file_.get(); }
  io::TempSpace* temp_space() { return temp_.get(); }
  // The parallel workers of index builds (and sweeps).
  worker::WorkerPool* workers() { return workers_.get(); }
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
  internal::TableState* TableByIdLocked(uint32_t id);  // REQUIRES: catalog_mu_ held

  // The lock of a record (striped): held by a writer from its version write until its index
  // entries are in, and by garbage collection of the record, so a collector never removes an
  // entry that a concurrent writer found present and relied on.
  std::mutex& RecordMutex(uint32_t table, uint64_t rec) {
    return record_mu_[(rec * 0x9E3779B97F4A7C15ull + table) >> 55];
  }
  // Removes the index entries of `rec` whose keys some row of `going` has and no row of
  // `staying` has (`staying` null: the record's current versions, read now).
  // `removed`, if given, is raised by the entries removed.
  absl::Status DropKeys(internal::TableState* t, uint64_t rec,
                        const std::vector<std::string>& going,
                        const std::vector<std::string>* staying, uint64_t mark_txn,
                        uint64_t* removed = nullptr);
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
  absl::Status CheckOpen() const;

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
                                                      page::PageNo first_pp,
                                                      uint64_t catalog_rec);
  // `root` 0: an inactive index.
  absl::StatusOr<internal::IndexState*> AddIndexState(uint32_t id, const IndexSchema& schema,
                                                      page::PageNo root, uint64_t catalog_rec);
  // The catalog row of an index as it is now (its tree, or inactive).
  std::string IndexCatalogRow(const internal::IndexState& ix) const;
  // DDL (ddl.cc). Replaces (raw null: deletes) catalog record `rec` for DDL transaction `txn`.
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
    uint64_t cn = 0;                          // the DDL's commit
    internal::TableState* table = nullptr;    // a dropped table: its relation and BLOBs
    std::vector<index::BTree*> trees;         // dropped or deactivated trees
    std::string what;                         // for errors: "table T", "index I"
  };
  // Frees the pages of `d`; the walk first, then the frees under catalog_mu_ (Validate sees
  // the pages either reachable through pending_drops_ or free).
  absl::Status FreeDropped(const PendingDrop& d);
  // The bulk build of `ix` over its table for DDL transaction `txn` (index_build.cc): nothing
  // for an empty table, the table's damage (Relation::damage) for a damaged one.
  // REQUIRES: the table's rows lock held exclusively.
  absl::Status BuildIndex(internal::IndexState* ix, uint64_t txn, const IndexBuildOptions& opt,
                          IndexStats* stats);
  absl::Status BuildIndexByInserts(internal::IndexState* ix, uint64_t txn, IndexStats* stats);
  // CollectGarbage's work: every table's garbage, now.
  absl::Status CollectAll();
  // Validate's steps (validate.cc), in order, each adding what it finds to the walk.
  // The pages every database has: the header, the PIPs and the TIP chain.
  void ListFixedPages(ValidateWalk* w);
  // REQUIRES catalog_mu_ held (this and the next). The catalog's and every table's relation
  // (Relation::Check), the pages of the tables' stored BLOBs, and the orphan BLOBs.
  absl::Status CheckRelations(ValidateWalk* w);
  // Every index's B-tree and the form of its entries.
  absl::Status CheckIndexes(ValidateWalk* w);
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
  // Undo logs of ended transactions with the memory they grew (see TakeUndoLog).
  std::function<void()> build_hook_;  // SetIndexBuildHookForTest
  // CreateIndex (`active`: built) and CreateInactiveIndex.
  absl::StatusOr<Index> DefineIndex(const IndexSchema& schema, const IndexBuildOptions& build,
                                    bool active);
  std::mutex undo_pool_mu_;
  std::vector<std::unique_ptr<txn::UndoLog>> undo_pool_;  // guarded by undo_pool_mu_

  std::mutex header_mu_;
  page::HeaderFields header_;  // guarded by header_mu_

  mutable std::shared_mutex catalog_mu_;
  std::vector<std::unique_ptr<internal::TableState>> tables_;  // guarded by catalog_mu_
  std::vector<std::unique_ptr<internal::IndexState>> indexes_;  // guarded by catalog_mu_
  absl::flat_hash_map<std::string, internal::TableState*> table_by_name_;
  absl::flat_hash_map<std::string, internal::IndexState*> index_by_name_;
  // Dropped tables and indexes, kept until Close so that handles never dangle.
  std::vector<std::unique_ptr<internal::TableState>> dropped_tables_;  // guarded by catalog_mu_
  std::vector<std::unique_ptr<internal::IndexState>> dropped_indexes_;  // guarded by catalog_mu_
  std::vector<PendingDrop> pending_drops_;  // guarded by catalog_mu_
  std::atomic<size_t> pending_drop_count_{0};
  uint32_t next_relation_id_ = 1;  // guarded by catalog_mu_
  std::mutex ddl_mu_;              // one DDL at a time
  std::mutex sweep_mu_;            // one sweep at a time
  // The automatic sweep (sweep.cc): at most one thread, started by MaybeStartAutoSweep.
  std::mutex auto_sweep_mu_;
  std::thread auto_sweep_;                  // guarded by auto_sweep_mu_
  std::atomic<bool> auto_sweep_running_{false};
  std::atomic<bool> stop_sweeps_{false};    // Close: a running sweep stops at its next chunk
  std::atomic<uint64_t> sweeps_{0}, auto_sweeps_{0};
  std::atomic<uint64_t> sweep_checked_at_{0};  // next transaction id at the last exact check
  // The interval in effect: Options::sweep_interval, else the header's (set at open, and by
  // SetSweepInterval).
  std::atomic<uint64_t> sweep_interval_{page::kDefaultSweepInterval};

  std::array<std::mutex, 512> record_mu_;
  std::atomic<uint64_t> next_temp_blob_{1};  // temporary BLOB ids, unique in the database
  std::unique_ptr<GarbageCollector> gc_;  // background collector (policy background/combined)
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
