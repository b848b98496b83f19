// SQLite helpers for the benchmarks (see sqlite_util.h).
#include "bench/util/sqlite_util.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace ember::bench {

absl::Status SqlError(sqlite3* db, std::string_view what) {
  return absl::InternalError(absl::StrCat("sqlite ", std::string(what), ": ", sqlite3_errmsg(db)));
}

Counters TakeSqlitePages(sqlite3* db) {
  int cur = 0, hi = 0;
  Counters c;
  if (!db) return c;
  sqlite3_db_status(db, SQLITE_DBSTATUS_CACHE_HIT, &cur, &hi, 1);
  c.fetches = static_cast<uint64_t>(cur);
  sqlite3_db_status(db, SQLITE_DBSTATUS_CACHE_MISS, &cur, &hi, 1);
  c.fetches += static_cast<uint64_t>(cur);
  c.reads = static_cast<uint64_t>(cur);
  sqlite3_db_status(db, SQLITE_DBSTATUS_CACHE_WRITE, &cur, &hi, 1);
  c.writes = static_cast<uint64_t>(cur);
  return c;
}

absl::Status Stmt::Prepare(sqlite3* db, const char* sql) {
  if (sqlite3_prepare_v2(db, sql, -1, &s_, nullptr) != SQLITE_OK) return SqlError(db, sql);
  return absl::OkStatus();
}

}  // namespace ember::bench
