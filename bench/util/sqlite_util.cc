// SQLite helpers for the benchmarks (see sqlite_util.h), and the VFS that counts SQLite's file
// writes by file: a thin layer over the default VFS that forwards every call.
#include "bench/util/sqlite_util.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ember::bench {

Flag FLAGS_sqlite_journal("sqlite_journal", "delete",
                          "SQLite journal_mode: delete (rollback journal, the default), wal, ...");
Flag FLAGS_sqlite_secure_delete(
    "sqlite_secure_delete", false,
    "SQLite secure_delete: 1 overwrites freed pages with zeros (Debian's build default); 0, the "
    "default here, frees them as EmberDB does, without writing them");

absl::Status SqlError(sqlite3* db, std::string_view what) {
  return absl::InternalError(absl::StrCat("sqlite ", std::string(what), ": ", sqlite3_errmsg(db)));
}

absl::Status SqlExec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    absl::Status s = absl::InternalError(absl::StrCat("sqlite ", sql, ": ", err ? err : "?"));
    sqlite3_free(err);
    return s;
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- the counting VFS

namespace {

enum class FileKind { kDb, kJournal, kOther };

struct CountingFile {
  sqlite3_file base;   // first: SQLite sees a CountingFile as a sqlite3_file
  sqlite3_file* real;  // the default VFS's file, allocated right after this struct
  FileKind kind;
};

struct IoCounters {
  std::atomic<uint64_t> db_writes{0}, db_bytes{0}, journal_bytes{0}, db_syncs{0}, journal_syncs{0},
      other_bytes{0};
};
IoCounters g_io;
sqlite3_vfs* g_real_vfs = nullptr;

sqlite3_file* Real(sqlite3_file* f) { return reinterpret_cast<CountingFile*>(f)->real; }

int CClose(sqlite3_file* f) { return Real(f)->pMethods->xClose(Real(f)); }
int CRead(sqlite3_file* f, void* buf, int n, sqlite3_int64 off) {
  return Real(f)->pMethods->xRead(Real(f), buf, n, off);
}
int CWrite(sqlite3_file* f, const void* buf, int n, sqlite3_int64 off) {
  const auto* c = reinterpret_cast<CountingFile*>(f);
  const auto bytes = static_cast<uint64_t>(n);
  switch (c->kind) {
    case FileKind::kDb:
      g_io.db_writes.fetch_add(1, std::memory_order_relaxed);
      g_io.db_bytes.fetch_add(bytes, std::memory_order_relaxed);
      break;
    case FileKind::kJournal: g_io.journal_bytes.fetch_add(bytes, std::memory_order_relaxed); break;
    case FileKind::kOther: g_io.other_bytes.fetch_add(bytes, std::memory_order_relaxed); break;
  }
  return c->real->pMethods->xWrite(c->real, buf, n, off);
}
int CTruncate(sqlite3_file* f, sqlite3_int64 size) {
  return Real(f)->pMethods->xTruncate(Real(f), size);
}
int CSync(sqlite3_file* f, int flags) {
  const auto* c = reinterpret_cast<CountingFile*>(f);
  if (c->kind == FileKind::kDb) g_io.db_syncs.fetch_add(1, std::memory_order_relaxed);
  if (c->kind == FileKind::kJournal) g_io.journal_syncs.fetch_add(1, std::memory_order_relaxed);
  return c->real->pMethods->xSync(c->real, flags);
}
int CFileSize(sqlite3_file* f, sqlite3_int64* size) {
  return Real(f)->pMethods->xFileSize(Real(f), size);
}
int CLock(sqlite3_file* f, int lock) { return Real(f)->pMethods->xLock(Real(f), lock); }
int CUnlock(sqlite3_file* f, int lock) { return Real(f)->pMethods->xUnlock(Real(f), lock); }
int CCheckReservedLock(sqlite3_file* f, int* out) {
  return Real(f)->pMethods->xCheckReservedLock(Real(f), out);
}
int CFileControl(sqlite3_file* f, int op, void* arg) {
  return Real(f)->pMethods->xFileControl(Real(f), op, arg);
}
int CSectorSize(sqlite3_file* f) { return Real(f)->pMethods->xSectorSize(Real(f)); }
int CDeviceCharacteristics(sqlite3_file* f) {
  return Real(f)->pMethods->xDeviceCharacteristics(Real(f));
}
int CShmMap(sqlite3_file* f, int region, int size, int extend, void volatile** out) {
  return Real(f)->pMethods->xShmMap(Real(f), region, size, extend, out);
}
int CShmLock(sqlite3_file* f, int offset, int n, int flags) {
  return Real(f)->pMethods->xShmLock(Real(f), offset, n, flags);
}
void CShmBarrier(sqlite3_file* f) { Real(f)->pMethods->xShmBarrier(Real(f)); }
int CShmUnmap(sqlite3_file* f, int del) { return Real(f)->pMethods->xShmUnmap(Real(f), del); }
int CFetch(sqlite3_file* f, sqlite3_int64 off, int n, void** out) {
  return Real(f)->pMethods->xFetch(Real(f), off, n, out);
}
int CUnfetch(sqlite3_file* f, sqlite3_int64 off, void* p) {
  return Real(f)->pMethods->xUnfetch(Real(f), off, p);
}

// Version 1 for a file of the default VFS without shared memory (journals), 3 otherwise: SQLite
// reads iVersion to know which methods exist, so the layer offers what the real file offers.
sqlite3_io_methods MethodsOf(int version) {
  sqlite3_io_methods m{};
  m.iVersion = version;
  m.xClose = CClose;
  m.xRead = CRead;
  m.xWrite = CWrite;
  m.xTruncate = CTruncate;
  m.xSync = CSync;
  m.xFileSize = CFileSize;
  m.xLock = CLock;
  m.xUnlock = CUnlock;
  m.xCheckReservedLock = CCheckReservedLock;
  m.xFileControl = CFileControl;
  m.xSectorSize = CSectorSize;
  m.xDeviceCharacteristics = CDeviceCharacteristics;
  if (version >= 2) {
    m.xShmMap = CShmMap;
    m.xShmLock = CShmLock;
    m.xShmBarrier = CShmBarrier;
    m.xShmUnmap = CShmUnmap;
  }
  if (version >= 3) {
    m.xFetch = CFetch;
    m.xUnfetch = CUnfetch;
  }
  return m;
}
const sqlite3_io_methods kMethods[4] = {MethodsOf(0), MethodsOf(1), MethodsOf(2), MethodsOf(3)};

int COpen(sqlite3_vfs*, const char* name, sqlite3_file* f, int flags, int* out_flags) {
  auto* c = reinterpret_cast<CountingFile*>(f);
  c->base.pMethods = nullptr;  // SQLite calls no method of a file whose open failed
  c->real = reinterpret_cast<sqlite3_file*>(c + 1);
  c->kind = (flags & SQLITE_OPEN_MAIN_DB)                            ? FileKind::kDb
            : (flags & (SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_WAL)) ? FileKind::kJournal
                                                                     : FileKind::kOther;
  const int rc = g_real_vfs->xOpen(g_real_vfs, name, c->real, flags, out_flags);
  if (rc == SQLITE_OK && c->real->pMethods) {
    c->base.pMethods = &kMethods[std::min(c->real->pMethods->iVersion, 3)];
  }
  return rc;
}

constexpr const char* kVfsName = "ember-bench-counting";

// Registers the layer once (not as the default VFS). Every other method is the default VFS's
// own: they do not depend on the struct they are called through.
const char* CountingVfs() {
  static sqlite3_vfs vfs = [] {
    g_real_vfs = sqlite3_vfs_find(nullptr);
    sqlite3_vfs v = *g_real_vfs;
    v.szOsFile = static_cast<int>(sizeof(CountingFile)) + g_real_vfs->szOsFile;
    v.zName = kVfsName;
    v.pNext = nullptr;
    v.xOpen = COpen;
    return v;
  }();
  static const int rc = sqlite3_vfs_register(&vfs, /*makeDflt=*/0);
  return rc == SQLITE_OK ? kVfsName : nullptr;
}

}  // namespace

absl::Status OpenSqlite(const std::string& path, sqlite3** db) {
  *db = nullptr;
  const char* vfs = CountingVfs();
  if (vfs == nullptr) return absl::InternalError("sqlite: cannot register the counting VFS");
  if (sqlite3_open_v2(path.c_str(), db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      vfs) != SQLITE_OK) {
    return SqlError(*db, absl::StrCat("open ", path));
  }
  for (const std::string& sql :
       {absl::StrCat("PRAGMA page_size=", FLAGS_page_size.i64()),
        absl::StrCat("PRAGMA cache_size=", FLAGS_cache_pages.i64()),
        absl::StrCat("PRAGMA journal_mode=", FLAGS_sqlite_journal.str()),
        std::string(FLAGS_forced_writes.b() ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=OFF"),
        absl::StrCat("PRAGMA secure_delete=", FLAGS_sqlite_secure_delete.b() ? 1 : 0)}) {
    if (absl::Status s = SqlExec(*db, sql); !s.ok()) return s;
  }
  return absl::OkStatus();
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

SqliteIo TakeSqliteIo() {
  SqliteIo io;
  io.db_writes = g_io.db_writes.exchange(0);
  io.db_bytes = g_io.db_bytes.exchange(0);
  io.journal_bytes = g_io.journal_bytes.exchange(0);
  io.db_syncs = g_io.db_syncs.exchange(0);
  io.journal_syncs = g_io.journal_syncs.exchange(0);
  io.other_bytes = g_io.other_bytes.exchange(0);
  return io;
}

uint64_t JournalPages(const SqliteIo& io) {
  const auto ps = static_cast<uint64_t>(FLAGS_page_size.i64());
  return (io.journal_bytes + ps - 1) / ps;
}

void SetSqliteCounters(benchmark::State& state, const Counters& pages, const SqliteIo& io) {
  auto set = [&](const char* name, uint64_t v) {
    state.counters[name] = benchmark::Counter(static_cast<double>(v));
  };
  set("fetches", pages.fetches);
  set("reads", pages.reads);
  set("writes", io.db_writes);
  set("journal_writes", JournalPages(io));
  set("all_writes", io.db_writes + JournalPages(io));
  set("syncs", io.db_syncs + io.journal_syncs);
}

void SetAllWrites(benchmark::State& state, const Counters& pages) {
  state.counters["all_writes"] =
      benchmark::Counter(static_cast<double>(pages.writes + pages.dw_writes));
}

void AddSqliteContext() {
  benchmark::AddCustomContext("sqlite_journal", FLAGS_sqlite_journal.str());
  benchmark::AddCustomContext("sqlite_secure_delete", FLAGS_sqlite_secure_delete.str());
}

absl::Status Stmt::Prepare(sqlite3* db, const char* sql) {
  if (sqlite3_prepare_v2(db, sql, -1, &s_, nullptr) != SQLITE_OK) return SqlError(db, sql);
  return absl::OkStatus();
}

}  // namespace ember::bench
