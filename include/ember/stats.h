// Counters as Firebird's trace reports them, per statement, transaction and database.
#pragma once
#include <cstdint>
#include <string>

namespace ember {

struct Counters {
  uint64_t fetches = 0;  // logical page fetches (a page pinned in the cache)
  uint64_t marks = 0;    // times a page was marked dirty
  uint64_t reads = 0;    // physical page reads
  // Physical page writes (pages written home). With torn-page protection most go home later,
  // from the doublewrite area's writer: those count for the database only, not for the
  // statement or transaction whose commit made them.
  uint64_t writes = 0;
  // Pages written into the doublewrite area: the images of the pages a record holds and the
  // record pages that list them (Options::doublewrite). Add to `writes` for the total.
  uint64_t dw_writes = 0;
  // Pages written before their time because careful write required it: a write-precedence
  // cycle broken by writing one of its pages at once, or a page written so that what it stopped
  // pointing at could be freed. Part of `writes`. Commits and cache evictions do not count.
  uint64_t cycle_writes = 0;
  // Syncs (fdatasync) of the database file: careful write's, the doublewrite area's (copies and
  // markers), commits', the header's, Close's. The database counts each sync once; a statement or
  // transaction counts the syncs it issued and those of the group commit that committed it, so a
  // sync shared by N committers counts N times over their transactions.
  // DatabaseStats::group_commit_flushes counts the group commits (rounds) instead: each round
  // issues its own syncs, shared by every transaction of the round: with forced writes and
  // torn-page protection one (its record's; one more per record past the first, for a round
  // larger than a record, and a marker's when the ring has to be declared free), without
  // protection two or more (its pages', one more for each set of them that must be durable
  // before the next is written, then its TIP page's), none without forced writes.
  uint64_t syncs = 0;
};

struct DatabaseStats {
  Counters pages;
  uint64_t next_transaction = 0;
  uint64_t oldest_interesting = 0;  // OIT
  uint64_t oldest_active = 0;       // OAT
  uint64_t oldest_snapshot = 0;     // OST
  uint64_t page_count = 0;
  // Torn-page protection at the last open: pages rewritten from the doublewrite area, and how
  // many of them were torn (the rest were valid but older than their copy: a lost write).
  uint64_t pages_repaired_at_open = 0;
  uint64_t torn_pages_repaired_at_open = 0;
  uint64_t commits = 0;
  uint64_t group_commit_flushes = 0;  // flush+fsync rounds; < commits when commits were grouped
                                      // (their syncs: Counters::syncs)
  // Torn-page protection: the pages of a commit's record go home lazily, written by a
  // background writer (counted in Counters::writes, the database's only). A flush that found
  // the area full and waited for that writer (and a sync) counts here.
  uint64_t doublewrite_stalls = 0;
  uint64_t temp_bytes_in_memory = 0;  // temp space held in memory
  uint64_t temp_bytes_on_disk = 0;    // temp space spilled to files
  uint64_t temp_spills = 0;           // spill blocks created
  // Garbage collection since open.
  uint64_t gc_versions_removed = 0;  // back versions and dead versions removed
  uint64_t gc_records_removed = 0;   // deleted records removed entirely
  uint64_t gc_index_entries_removed = 0;
  uint64_t gc_pages_queued = 0;  // data pages waiting for (or in) the background collector
  // Sweeps since open (Database::Sweep and automatic ones), and how many of them the sweep
  // interval started (sweep_interval below).
  uint64_t sweeps = 0;
  uint64_t automatic_sweeps = 0;
  // The sweep interval in effect: Options::sweep_interval when set, else the header's
  // (Database::SetSweepInterval). 0: no automatic sweep.
  uint64_t sweep_interval = 0;
  // Errors no call could return when they happened, since open: the background collector's
  // (a page it failed on is retried by its next round), cleanup after a commit that was
  // already durable (Transaction::Commit), a rollback run by a Transaction's destructor, and
  // damage that kept the reclamation after a crash from freeing anything. The first one not
  // yet reported is also returned by the next Database::CollectGarbage or Close.
  uint64_t background_errors = 0;
  std::string last_background_error;  // the newest of them ("" if none)
  // The file was not closed cleanly last time (a crash, a kill, a power loss). Pages such an
  // end leaks (allocated, referenced by nothing) and orphan BLOBs are freed at open when
  // Options::reclaim_after_crash is set and the walk that finds them finds no damage.
  bool opened_after_crash = false;
  uint64_t pages_reclaimed_at_open = 0;       // leaked pages freed at open
  uint64_t blob_pages_reclaimed_at_open = 0;  // pages of orphan BLOBs freed at open
};

// Versions and garbage of one table (Database::GetTableStats walks its pages).
struct TableStats {
  uint64_t records = 0;             // primary records (delete stubs included)
  uint64_t back_versions = 0;       // older versions kept behind the newest ones
  uint64_t back_version_bytes = 0;  // their stored bytes
  uint64_t delete_stubs = 0;
  uint64_t dead_versions = 0;  // newest versions written by rolled-back transactions
  uint64_t data_pages = 0;
  uint64_t pages_with_garbage = 0;  // flagged as possibly holding garbage
  uint64_t swept_pages = 0;         // flagged swept: a sweep skips them (docs/format.md)
};

// What Database::Sweep did.
struct SweepResult {
  int workers = 0;
  uint64_t pages_visited = 0;  // primary data pages read (the catalog's included)
  uint64_t pages_skipped = 0;  // data pages skipped as swept (flagged by a sweep)
  // Data pages this sweep flagged swept (in their pointer-page slots): the next sweep skips
  // them unless they change.
  uint64_t pages_flagged = 0;
  uint64_t versions_removed = 0;  // back versions, dead versions and delete stubs
  uint64_t records_removed = 0;   // records that went whole (a delete everyone sees)
  uint64_t index_entries_removed = 0;
  uint64_t blobs_removed = 0;  // stored BLOBs only removed versions named
  // Records whose garbage a snapshot older than it still needed: kept for a later sweep or
  // collection.
  uint64_t records_kept = 0;
  uint64_t oit_before = 0, oit_after = 0;  // the oldest interesting transaction
  double seconds = 0;
};

// An index as its last build found it (Database::GetIndexStats): Firebird's selectivity is
// 1 / distinct_keys. Counted by the bulk build (CreateIndex on a populated table); an index
// created on an empty table, or since changed by writes, is not recounted (`built` false for
// the former).
struct IndexStats {
  bool built = false;          // a bulk build ran (the figures below are its)
  uint64_t entries = 0;        // index entries (one per key of each non-dead version)
  uint64_t distinct_keys = 0;  // distinct key values among them
  uint64_t leaf_pages = 0;
  uint64_t internal_pages = 0;
  uint32_t depth = 0;  // levels, the leaves included
  int workers = 0;     // workers the build ran on
  // Its phases: reading the table (scan), sorting the workers' runs (sort), merging key ranges
  // while writing their leaves (merge), linking the ranges and building the levels above
  // (finish).
  double scan_seconds = 0, sort_seconds = 0, merge_seconds = 0, finish_seconds = 0;
  uint64_t sort_runs = 0;         // sorted runs (one per worker, more when the memory filled)
  uint64_t spill_bytes = 0;       // bytes of runs written to temp space
  uint64_t sort_peak_memory = 0;  // bytes the sort held at most, all workers together
                                  // (within sort_memory_limit)
};

// A transaction's undo log (Transaction::undo_stats). The database hands an ended
// transaction's log, with the memory it grew, to a later transaction (up to 128 MB each, two
// logs), so memory_bytes may start above zero.
struct UndoLogStats {
  uint64_t records = 0;       // entries over all savepoints now
  uint64_t memory_bytes = 0;  // hash and image slots and arena bytes the log holds now
  uint64_t peak_memory_bytes = 0;
  uint64_t spilled_bytes = 0;  // before-images in temp space now
  uint64_t peak_spilled_bytes = 0;
};

}  // namespace ember
