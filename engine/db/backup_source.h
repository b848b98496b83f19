// What an online backup needs of the database, as a narrow interface: the backup itself
// (WriteBackup, in engine/backup/backup.cc, the layer above this one) reads the database only
// through it. DatabaseImpl implements it, and its Database::Backup calls WriteBackup.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ember/backup.h"
#include "ember/transaction.h"
#include "engine/blob/txn_blobs.h"
#include "engine/db/table_state.h"
#include "engine/record/relation.h"
#include "engine/util/mutex.h"
#include "engine/worker/worker_pool.h"

namespace ember::db {

class BackupSource {
 public:
  // One snapshot and the definitions it goes with (no DDL ran between them).
  struct Snapshot {
    std::unique_ptr<Transaction> txn;           // read-only; the backup commits it at the end
    record::ReadView view;                      // txn's snapshot, for reading pages
    std::vector<internal::TableState*> tables;  // every table not dropped
    std::vector<std::pair<IndexSchema, bool>> indexes;  // built indexes, and whether active
  };
  virtual absl::StatusOr<Snapshot> BeginSnapshot() = 0;
  // FailedPrecondition once the database is closed.
  virtual absl::Status CheckOpen() const = 0;
  virtual uint32_t page_size() const = 0;
  // The workers a task asking for `requested` gets (0: Options::parallel_workers), and the pool.
  virtual int WorkersFor(int requested) const = 0;
  virtual worker::WorkerPool* workers() = 0;
  // The BLOBs of transaction `txn`: its temporary ones, and stored ones under its snapshot
  // (a backup makes one per worker).
  virtual std::unique_ptr<blob::TxnBlobs> SnapshotBlobs(uint64_t txn) = 0;
  // The catalog's lock, held shared while a worker reads a table's pages: the catalog does not
  // change under it.
  virtual util::SharedMutex& catalog_mutex() = 0;

 protected:
  ~BackupSource() = default;
};

// Database::Backup (include/ember/database.h) of `db`.
absl::StatusOr<BackupResult> WriteBackup(BackupSource* db, const std::string& path,
                                         const BackupOptions& options);

}  // namespace ember::db
