// ember::Database: one database file, opened in this process; the entry point of the API.
//
// Thread safety: every method may be called from any thread. Transactions from many threads run
// concurrently.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ember/backup.h"
#include "ember/options.h"
#include "ember/schema.h"
#include "ember/stats.h"
#include "ember/transaction.h"

namespace ember {

struct ValidateOptions {
  // Return unreachable pages to the free list, and free orphan BLOBs (with their pages). Only
  // when the walk found no errors: a damaged page can hide references to pages that then only
  // look unreachable, so with errors nothing is freed.
  bool free_unreachable = false;
};

struct SweepOptions {
  int workers = 0;  // 0: Options::parallel_workers; capped by max_parallel_workers
};

struct ValidationReport {
  uint64_t pages_checked = 0;
  uint64_t records = 0;  // record versions seen
  uint64_t index_entries = 0;
  std::vector<std::string> errors;          // each names the page (and line / key)
  std::vector<uint32_t> unreachable_pages;  // allocated but referenced by nothing
  // Stored BLOBs no record version names, written by a transaction that is no longer active:
  // what a crash between storing a BLOB and writing its record leaves. Not an error.
  std::vector<uint64_t> orphan_blobs;
  uint64_t freed_pages = 0;       // unreachable pages freed (free_unreachable)
  uint64_t freed_blob_pages = 0;  // pages of orphan BLOBs freed (free_unreachable)
  // Pages the open rewrote from their doublewrite copies after a crash (torn, or older than
  // the copy), in page order. Repaired pages are whole again; this is not an error.
  std::vector<uint32_t> repaired_pages;
  bool ok() const { return errors.empty(); }
};

class Database {
 public:
  // Opens (or, with create_if_missing, creates) the database at `path`. The returned handle
  // owns the file until Close (or destruction): it holds a lock on it, so another Open of the
  // same file, from this process (under any path) or another one, fails with
  // Unavailable "database ... is in use: ..." until then. A process that dies releases the
  // lock; a child forked while the database is open shares it until it exits or execs.
  // Errors: NotFound, AlreadyExists (error_if_exists), Unavailable (in use), InvalidArgument
  // ("not an EmberDB database", a directory, bad options, a cache larger than this machine's
  // memory), ResourceExhausted (the cache's memory cannot be allocated), DataLoss (a bad
  // header page, TIP page, last PIP or catalog page), FailedPrecondition (unsupported format
  // version), or the I/O error. A damaged pointer page of a table does not fail the open: that
  // table alone is unusable (every call that needs its pages is DataLoss naming the page,
  // Validate lists it) and the rest of the database works.
  static absl::StatusOr<std::unique_ptr<Database>> Open(const std::string& path,
                                                        const Options& options);
  virtual ~Database() = default;  // closes if still open (errors are dropped: call Close)

  // Ends every transaction still active as rolled back (marked dead: none of its changes is
  // ever visible; its versions are garbage for the collector after the next Open), writes what
  // is dirty, marks the file cleanly closed and releases the file's lock. Afterwards every
  // call on the database and on its transactions, cursors and BLOB readers and writers fails
  // with FailedPrecondition "database ... is closed" (TableNames() is empty, Rollback OK);
  // those objects must still be destroyed before the Database object. Close must not run
  // while another thread is inside a call on this database or its transactions. A second
  // Close returns OK. When the close succeeded, returns the first background error not
  // reported yet (DatabaseStats::background_errors): the file is closed cleanly all the same.
  virtual absl::Status Close() = 0;

  virtual absl::StatusOr<std::unique_ptr<Transaction>> Begin(
      const TransactionOptions& options = {}) = 0;

  // DDL runs in a system transaction of its own and is committed when it returns.
  virtual absl::StatusOr<Table> CreateTable(const TableSchema& schema) = 0;
  // On a populated table the index is built in bulk (scan, sort, merge, bottom-up build) on
  // `build.workers` workers. Readers and writers of other tables go on meanwhile; writers of
  // the indexed table wait until the build ends, readers of it do not. A unique index over
  // duplicate keys is AlreadyExists naming the index and the key, and leaves nothing behind.
  virtual absl::StatusOr<Index> CreateIndex(const IndexSchema& schema,
                                            const IndexBuildOptions& build = {}) = 0;
  // Drops a table with its indexes and its BLOBs. The name is free again at once; a snapshot
  // taken before the drop committed still reads the table (through Get and Scan; its indexes
  // are gone for everyone), and its pages go back to the free list once no such snapshot is
  // left. Writes to it fail with NotFound from the drop on. FailedPrecondition while an
  // active transaction has uncommitted changes in it (commit or roll back first). Handles of
  // a dropped table or index stay valid objects; calls through them fail with NotFound.
  // A damaged table (a pointer page with no good copy: every use of it is DataLoss naming
  // the page) can be dropped: this is how the rest of the database is recovered. Its catalog
  // rows and indexes go; its pages cannot all be found, so none of them is freed (the drop's
  // freeing reports that as a background error, returned by the next CollectGarbage or
  // Close); they are unreachable from then on, and Validate(free_unreachable) frees them.
  virtual absl::Status DropTable(std::string_view name) = 0;
  // Drops an index; its pages are freed once no reader that started before can still use it.
  virtual absl::Status DropIndex(std::string_view name) = 0;
  // Firebird's ALTER INDEX ... INACTIVE / ACTIVE. Inactive: the tree is dropped, writes no
  // longer maintain it (a unique index no longer checks), reads through it fail with
  // FailedPrecondition; GetIndex still finds it and the catalog keeps it across reopens.
  // Active: rebuilt with the bulk build (`build` as for CreateIndex); a unique index over
  // duplicate keys stays inactive and the call fails with AlreadyExists. Setting the state an
  // index has already is OK and does nothing.
  virtual absl::Status SetIndexActive(std::string_view name, bool active,
                                      const IndexBuildOptions& build = {}) = 0;
  // NotFound for an unknown name.
  virtual absl::StatusOr<Table> GetTable(std::string_view name) = 0;
  virtual absl::StatusOr<Index> GetIndex(std::string_view name) = 0;
  virtual std::vector<std::string> TableNames() = 0;

  // Walks every page: checksums (BLOB pages included), pointer/data page agreement, record
  // chains, that every version decodes, B-tree order, index entries, unreachable pages.
  // Problems go to the report; the status is an error only when the walk itself could not run.
  virtual absl::StatusOr<ValidationReport> Validate(const ValidateOptions& options = {}) = 0;

  virtual DatabaseStats stats() = 0;
  // Firebird's sweep: visits every table's data pages on `workers` workers (0:
  // Options::parallel_workers) and removes every version no snapshot can see (versions of
  // dead transactions, versions below the newest one the oldest snapshot sees, delete stubs
  // everyone sees) with their index entries and BLOBs; then, with those removals on disk,
  // moves the oldest interesting transaction (OIT) past every transaction that had ended when
  // the sweep started: nothing needs the TIP to tell those apart any more. Runs beside readers
  // and writers (no database-wide lock); a snapshot older than some garbage keeps it
  // (SweepResult::records_kept). One sweep at a time: a second caller waits.
  virtual absl::StatusOr<SweepResult> Sweep(const SweepOptions& options = {}) = 0;
  // Firebird's `gfix -housekeeping N`: stores the automatic sweep interval in the header page
  // and syncs it (0: no automatic sweep). Every later open uses it unless its
  // Options::sweep_interval overrides it; this handle uses it from now on, even when it was
  // opened with an override (the call is the newer wish).
  virtual absl::Status SetSweepInterval(uint64_t interval) = 0;
  // Online backup (Firebird's gbak -b): writes every table's rows as one snapshot sees them,
  // with the tables' and indexes' definitions, to a new backup file at `path` (replaced if it
  // exists; include/ember/backup.h, docs/backup-format.md), on `options.workers` workers.
  // Readers and writers go on meanwhile; the backup holds the snapshot of a read-only
  // transaction, so garbage younger than it waits for it as for any reader. DDL is held off
  // only while the definitions are read. The file is synced before Backup returns OK; a backup
  // that fails removes its file. Restore it with ember::Restore (backup.h).
  virtual absl::StatusOr<BackupResult> Backup(const std::string& path,
                                              const BackupOptions& options = {}) = 0;
  // Versions and garbage of a table, counted by walking its pages.
  virtual absl::StatusOr<TableStats> GetTableStats(const Table& table) = 0;
  // What the last build of an index counted and how it went (IndexStats).
  virtual absl::StatusOr<IndexStats> GetIndexStats(const Index& index) = 0;
  // Collects the garbage of every table now (what the background collector and readers do
  // bit by bit): versions no active snapshot can see, dead versions, and their index entries.
  // Returns its own error, or else the first background error not reported yet (see
  // DatabaseStats::background_errors), once.
  virtual absl::Status CollectGarbage() = 0;
  // With torn-page protection a commit's pages are durable in the doublewrite area's record and
  // go home later, in batches (a background writer; Close writes the rest). Checkpoint writes
  // home every page the records still hold and syncs: the deferred work, done now (what
  // SQLite's wal_checkpoint is to its WAL). Afterwards the file itself holds every committed
  // page until the next commit. Errors: the write's or the sync's (the records keep the pages).
  virtual absl::Status Checkpoint() = 0;
  virtual const Options& options() const = 0;
  // The longest index key this database takes, in encoded bytes over all key columns: NULL
  // 1, int64 / double / BLOB 9, string / bytes 3 + length + one per zero byte. It depends on
  // the page size (789 at 4 KB, 1608 at 8 KB). An Insert or Update whose key for some index is
  // longer fails with InvalidArgument and changes nothing; the transaction goes on.
  virtual uint32_t max_key_size() const = 0;
};

}  // namespace ember
