// ember::Options: every tunable of a database, with its default. Also readable from a
// Firebird-style configuration file (`Name = Value`, `#` comments; names as in firebird.conf).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ember {

enum class GcPolicy { kCooperative, kBackground, kCombined };

struct Options {
  // --- creating and opening
  bool create_if_missing = false;  // create the file when it does not exist
  bool error_if_exists = false;    // with create_if_missing: fail if the file exists
  uint32_t page_size = 8192;       // PageSize: 4096..32768, a power of two; fixed at create
  // --- cache and durability
  uint32_t cache_pages = 2048;  // DefaultDbCachePages: buffer cache size in pages (>= 16)
  bool forced_writes = true;    // ForcedWrites: fsync at commit (off: the OS decides)
  bool use_io_uring = true;     // batch page writes through io_uring when available
  // Doublewrite: torn-page protection and the one-sync commit. Every page the cache overwrites
  // goes first into a record in the doublewrite area of the file (synced with forced writes),
  // then home (a page written for the first time goes home with the record that names it); a
  // commit's pages and its commit mark share one record and one sync. A write torn by a
  // crash or a power loss is repaired at the next open. Turn off only on a file system that
  // writes a whole page atomically (ZFS, btrfs with data checksums, a device with atomic 8 KiB
  // writes): then a torn page cannot happen, the copies only cost writes, and a commit costs two
  // syncs or more (careful write). Off or on, open applies what an earlier session recorded.
  bool doublewrite = true;
  // After an unclean end (DatabaseStats::opened_after_crash), Open walks the whole database as
  // Validate does and frees the pages and orphan BLOBs the crash leaked, unless the walk finds
  // damage (then it frees nothing and reports it, see DatabaseStats::background_errors). It
  // reads every page once: off, Open stays fast for a very large file, and the leaks stay
  // until Validate(free_unreachable).
  bool reclaim_after_crash = true;
  // --- temp space: undo-log overflow, temporary BLOBs and index-build sorts
  std::vector<std::string> temp_directories;  // TempDirectories; EMBER_TMP overrides; default /tmp
  uint64_t temp_cache_limit = 64ull << 20;    // TempCacheLimit in bytes
  int blob_temp_space = 1;                    // BlobTempSpace: 0, 1 or 2 (architecture.md)
  // --- workers and garbage collection
  int parallel_workers = 1;      // ParallelWorkers
  int max_parallel_workers = 1;  // MaxParallelWorkers (up to 64)
  // WorkerIdleTimeout (seconds in the file): a worker thread ends after this long unused.
  uint64_t worker_idle_timeout_ms = 60000;
  GcPolicy gc_policy = GcPolicy::kCombined;  // GCPolicy
  // --- savepoints
  bool no_savepoint = false;  // every transaction without an undo log
  // SortMemoryLimit: memory an index build's sort holds (its workers together) before it
  // writes sorted runs to temp space (at least 64 KB). Each worker sorts in an equal share of
  // at least 64 KB: below 64 KB per worker, the build runs on fewer workers.
  uint64_t sort_memory_limit = 64ull << 20;
  uint64_t undo_memory_limit = 64ull << 20;  // UndoMemoryLimit: before-images in memory per
                                             // transaction before they spill to temp space
  // SweepInterval: the automatic sweep starts when the oldest snapshot is this many
  // transactions past the oldest interesting one (0: never). The database keeps its own value
  // in the header page, as Firebird does (20000 at create; Database::SetSweepInterval and
  // `ember-fix -sweep_interval N` change it); set here, it overrides that value for this open
  // only and nothing is written. DatabaseStats::sweep_interval says which one is in effect.
  std::optional<uint64_t> sweep_interval;
  // --- lock table. Not in effect yet: the lock table is in-process, and these size the shared
  // one planned; they are read from a config file and checked, and change nothing.
  uint32_t lock_hash_slots = 8191;      // LockHashSlots
  uint64_t lock_mem_size = 1ull << 20;  // LockMemSize

  // Reads a Firebird-style file over these defaults. Unknown names and bad values are
  // InvalidArgument errors naming the file and line.
  static absl::StatusOr<Options> FromConfigFile(const std::string& path);
  // The same from text (for tests and embedding); `source` names it in errors.
  static absl::StatusOr<Options> FromConfigText(std::string_view text, std::string_view source);
};

}  // namespace ember
