// SQLite helpers shared by the benchmarks that run the same work on SQLite in the same run: one
// way to open a database with settings matched to EmberDB's, statements, and SQLite's counters,
// including the writes to its journal, which its own pager counters leave out.
#pragma once
#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "bench/util/bench_util.h"
#include "ember/stats.h"

namespace ember::bench {

// --sqlite_journal (journal_mode; default delete, the rollback journal: no log, the closest to
// EmberDB's careful write) and --sqlite_secure_delete (default 0).
extern Flag FLAGS_sqlite_journal;
extern Flag FLAGS_sqlite_secure_delete;

// InternalError naming `what` with SQLite's message for `db`.
absl::Status SqlError(sqlite3* db, std::string_view what);
// Runs `sql` (one or more statements, no results).
absl::Status SqlExec(sqlite3* db, const std::string& sql);

// Creates a SQLite database at `path` through the counting VFS (below), set up as EmberDB's
// databases are: --page_size, a cache of --cache_pages pages, synchronous=FULL with
// --forced_writes=1 (else OFF), journal_mode=--sqlite_journal, and secure_delete=
// --sqlite_secure_delete. Debian builds SQLite with secure delete on by default, which
// overwrites every freed page with zeros (and journals it); EmberDB does not zero freed pages,
// so the benchmarks turn it off unless asked. On error *db may be set and must be closed.
absl::Status OpenSqlite(const std::string& path, sqlite3** db);

// SQLite's pager counters since the last call (reset on read), as the nearest equivalents of
// ours: fetches = cache hits + misses, reads = misses, writes = pages written. Zero for null.
Counters TakeSqlitePages(sqlite3* db);

// File writes and syncs of every database opened by OpenSqlite, counted by its VFS, by file:
// the database file, and its journal (rollback journal or WAL).
struct SqliteIo {
  uint64_t db_writes = 0;  // xWrite calls on the database file (SQLite writes whole pages)
  uint64_t db_bytes = 0;
  uint64_t journal_bytes = 0;  // bytes written to the journal or WAL (page images and headers)
  uint64_t db_syncs = 0, journal_syncs = 0;  // xSync calls
  uint64_t other_bytes = 0;                  // temp files, statement journals
};
SqliteIo TakeSqliteIo();  // since the last call

// The journal's bytes in pages of the database's page size, rounded up: SQLite writes a page
// image into the journal as several calls (page number, image, checksum), so bytes are counted
// and converted, the counterpart of EmberDB's doublewrite copies (Counters::dw_writes).
uint64_t JournalPages(const SqliteIo& io);

// Puts SQLite's counters of a phase on a benchmark row: fetches, reads (pager), writes (pages
// written to the database file), journal_writes (JournalPages), all_writes (the two added: the
// counterpart of EmberDB's writes + dw_writes), syncs (database + journal).
void SetSqliteCounters(benchmark::State& state, const Counters& pages, const SqliteIo& io);
// The same total for EmberDB rows: all_writes = writes + dw_writes.
void SetAllWrites(benchmark::State& state, const Counters& pages);

// Adds sqlite_journal and sqlite_secure_delete to the benchmark context.
void AddSqliteContext();

// A prepared statement, finalized on destruction.
class Stmt {
 public:
  Stmt() = default;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt() { sqlite3_finalize(s_); }
  absl::Status Prepare(sqlite3* db, const char* sql);
  sqlite3_stmt* get() const { return s_; }

 private:
  sqlite3_stmt* s_ = nullptr;
};

}  // namespace ember::bench
