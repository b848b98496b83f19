// Online backup and restore (Firebird's gbak): a database's content as of one snapshot written
// to a portable backup file, and a new database made from such a file.
//
// The backup file (docs/backup-format.md) holds the tables' and indexes' definitions and every
// row visible to the snapshot, BLOBs included, in zstd-compressed frames, each checksummed. It
// depends neither on the page size nor on the database's byte layout: a restore may choose any
// page size. Indexes are not copied; a restore rebuilds them with the bulk build.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ember/options.h"

namespace ember {

// Progress of a long backup or restore: `done` of `total` units (data pages for a backup,
// bytes of the backup file for a restore). Called from the thread running the call, now and
// then (not for every unit); it must not call into the database.
using ProgressFn = std::function<void(uint64_t done, uint64_t total)>;

struct BackupOptions {
  int workers = 0;      // 0: Options::parallel_workers; capped by max_parallel_workers
  int zstd_level = 1;   // 1..19: higher makes a smaller file, more slowly
  ProgressFn progress;  // optional
};

struct BackupResult {
  uint64_t snapshot = 0;  // the transaction whose snapshot the backup holds
  uint64_t tables = 0, indexes = 0;
  uint64_t rows = 0;
  uint64_t blobs = 0, blob_bytes = 0;  // BLOB values written (not empty), and their bytes
  uint64_t raw_bytes = 0;              // frame payloads before compression
  uint64_t bytes = 0;                  // the backup file's size
  uint64_t pages = 0;                  // data pages read
  int workers = 0;
  double seconds = 0;
};

struct RestoreOptions {
  int workers = 0;       // 0: Options::parallel_workers; capped by max_parallel_workers
  bool replace = false;  // replace an existing database file (else AlreadyExists)
  // Every index restored inactive: its definition kept, no tree built (gbak -i). Gets the rows
  // back when an index cannot be built; Database::SetIndexActive builds it later.
  bool deactivate_indexes = false;
  // An active index that cannot be built from the restored rows (a unique index over
  // duplicate keys, a key longer than the new page size's max_key_size) fails the restore,
  // leaving no database. Without it such an index is restored inactive, the rows are restored
  // and RestoreResult::warnings names the index and why.
  bool strict = false;
  ProgressFn progress;  // optional
};

struct RestoreResult {
  uint64_t tables = 0;
  uint64_t indexes = 0;        // index definitions restored
  uint64_t indexes_built = 0;  // of them active (the rest: inactive in the backup, deactivated
                               // by deactivate_indexes, or named in `warnings`)
  uint64_t rows = 0;
  uint64_t blobs = 0, blob_bytes = 0;
  uint64_t bytes_read = 0;  // of the backup file
  int workers = 0;
  double load_seconds = 0;   // reading the backup and loading the rows
  double index_seconds = 0;  // building the indexes
  double seconds = 0;        // all of it, the final flush and rename included
  // One line per index that was active in the backup and could not be built, so was restored
  // inactive (never with `strict`): "index NAME restored inactive: WHY".
  std::vector<std::string> warnings;
};

// Makes a new database at `path` (page size and every other setting from `options`;
// create_if_missing and error_if_exists are ignored) from the backup file `backup`. The
// database is built under `path` + ".restoring" and renamed to `path` only once it is complete
// and on disk, so a restore that fails or is interrupted never leaves a database at `path`
// that looks complete (a stale ".restoring" file is replaced by the next restore).
// Indexes the backup holds as inactive are restored inactive and not built (their
// definitions kept), as are all of them with `deactivate_indexes`.
// Errors: NotFound (no backup file), AlreadyExists (`path` exists and not `replace`),
// DataLoss naming the frame and offset for a damaged or truncated backup file,
// FailedPrecondition for a backup format version this build does not read, InvalidArgument
// for bad options, or the I/O error. With `strict`, an index that cannot be built:
// AlreadyExists (duplicate key) or InvalidArgument (key too long), naming the index.
absl::StatusOr<RestoreResult> Restore(const std::string& backup, const std::string& path,
                                      const Options& options, const RestoreOptions& restore = {});

}  // namespace ember
