// SQLite helpers shared by the benchmarks that run the same work on SQLite in the same run.
#pragma once
#include <sqlite3.h>

#include <string_view>

#include "absl/status/status.h"
#include "ember/stats.h"

namespace ember::bench {

// InternalError naming `what` with SQLite's message for `db`.
absl::Status SqlError(sqlite3* db, std::string_view what);

// SQLite's pager counters since the last call (reset on read), as the nearest equivalents of
// ours: fetches = cache hits + misses, reads = misses, writes = pages written. Zero for null.
Counters TakeSqlitePages(sqlite3* db);

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
