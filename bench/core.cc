// bench/core: the core operations of EmberDB next to SQLite doing the same work in the same run,
// plus two engine microbenchmarks (buffer cache hit path, group commit).
//
//   tools/dev bench core [--rows=N] [--lookups=N] [--update_txns=N] [--updates_per_txn=N]
//                        [--forced_writes=0|1] [--sqlite_journal=delete|wal]
//                        [--sqlite_rowid_pk=0|1] [common flags, see bench/util/bench_util.h]
//                        [--benchmark_filter=... --benchmark_format=json ...]
//
// The table, in both engines: t(id int64 not null, val int64 not null, pad string of
// --pad_bytes (40) bytes), with a separate unique index on id (EmberDB: records on data pages +
// a B-tree; SQLite: a rowid table + `CREATE UNIQUE INDEX`, the same layout; --sqlite_rowid_pk=1
// makes id SQLite's INTEGER PRIMARY KEY instead, a clustered layout EmberDB does not have).
//
// Rows (one-shot phases: Iterations(1), manual time of the work alone; rows/s = items_per_second):
//   core/insert/{ember,sqlite}  ids 1..rows inserted in ascending order in ONE transaction
//                               (commit included; commit_ms says how much of it the commit was)
//   core/lookup/{ember,sqlite}  --lookups random ids looked up by key in one read-only
//                               transaction, each row read out (val and pad)
//   core/update/{ember,sqlite}  --update_txns transactions of --updates_per_txn updates each
//                               (val = val + 1 by key, random ids), each committed
//   core/scan/{ember,sqlite}    every row read in storage order in one read-only transaction
// Every phase checks its results (rows found, counts) and fails the row (SkipWithError, exit
// code 1) on a wrong answer or an engine error. The phases after insert reuse the databases the
// insert made (loading them untimed when the insert was filtered out); a repeated insert starts
// from a fresh database.
//
// Counters: EmberDB rows carry fetches, marks, reads, writes of the phase (DatabaseStats delta).
// SQLite rows carry its pager's nearest equivalents (sqlite3_db_status): fetches = cache hits +
// misses, reads = misses, writes = pages written to the database file (journal / WAL writes are
// not counted); SQLite has no "marks".
//
// Durability is matched: --forced_writes=1 (default) = EmberDB fsync at commit and SQLite
// synchronous=FULL; 0 = no fsync in EmberDB, synchronous=OFF. SQLite's journal is the default
// rollback journal (journal_mode=DELETE), the closest to careful write (no log); --sqlite_journal=wal
// switches it. Both engines use --page_size and a cache of --cache_pages pages.
//
// Microbenchmarks (engine internals):
//   core/cache_fetch/threads:{1,2}  Fetch(page, kShared) + PageRef release of resident pages on a
//       BufferCache over a small file, each thread cycling over its own --cache_bench_pages pages;
//       ns_per_fetch is per thread (averaged over threads); reads must stay 0 (all hits).
//   core/commit/threads:{1,4,16}  small transactions (Begin, one insert, Commit) with forced writes
//       always on, on a fresh database; commits_per_s over all threads and flushes_per_commit =
//       group_commit_flushes / commits (below 1: commits shared an fsync round).
// At the end a summary table prints EmberDB time / SQLite time per operation (below 1: EmberDB
// faster), wall clock and process CPU time (the steadier one on a shared machine) — on stdout for
// the console format, on stderr otherwise (JSON/CSV stay clean).
#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/util/bench_util.h"
#include "bench/util/sqlite_util.h"
#include "ember/ember.h"
#include "engine/cache/buffer_cache.h"
#include "engine/io/file.h"
#include "engine/page/page.h"

namespace ember::bench {
namespace {



Flag FLAGS_rows("rows", int64_t{1000000}, "rows in the table (bulk insert in one transaction)");
Flag FLAGS_lookups("lookups", int64_t{100000}, "point lookups by random id");
Flag FLAGS_update_txns("update_txns", int64_t{1000}, "update transactions");
Flag FLAGS_updates_per_txn("updates_per_txn", int64_t{10}, "updates (random ids) per transaction");
Flag FLAGS_pad_bytes("pad_bytes", int64_t{40}, "bytes of the pad string column");
Flag FLAGS_seed("seed", int64_t{42}, "seed of the random ids and values");
Flag FLAGS_sqlite_journal("sqlite_journal", "delete", "SQLite journal_mode: delete, wal, ...");
Flag FLAGS_sqlite_rowid_pk("sqlite_rowid_pk", false,
                           "SQLite: id as INTEGER PRIMARY KEY (clustered) instead of a unique "
                           "index over a rowid table");
Flag FLAGS_cache_bench_pages("cache_bench_pages", int64_t{64},
                             "resident pages per thread in the cache microbenchmark");

// ---------------------------------------------------------------- data

uint64_t Mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

int64_t ValOf(int64_t id) { return static_cast<int64_t>(Mix(id) % 1000000007); }

void MakePad(int64_t id, std::string* out) {
  out->resize(static_cast<size_t>(FLAGS_pad_bytes.i64()));
  uint64_t h = Mix(~static_cast<uint64_t>(id));
  for (size_t i = 0; i < out->size(); ++i) {
    if (i % 8 == 0 && i != 0) h = Mix(h);
    (*out)[i] = static_cast<char>('a' + ((h >> ((i % 8) * 8)) & 0xFF) % 26);
  }
}

// Random ids in [1, rows], the same for both engines.
std::vector<int64_t> RandomIds(int64_t n, int64_t rows, uint64_t salt) {
  std::mt19937_64 rng(static_cast<uint64_t>(FLAGS_seed.i64()) ^ salt);
  std::uniform_int_distribution<int64_t> dist(1, std::max<int64_t>(1, rows));
  std::vector<int64_t> ids(static_cast<size_t>(std::max<int64_t>(0, n)));
  for (int64_t& id : ids) id = dist(rng);
  return ids;
}

absl::Status Wrong(std::string_view what) {
  return absl::InternalError(absl::StrCat("wrong result: ", std::string(what)));
}

// ---------------------------------------------------------------- EmberDB

struct EmberCore {
  std::string path;
  std::unique_ptr<Database> db;
  Table table;
  Index pk;
  int64_t rows = 0;  // rows loaded (0: not loaded)

  absl::Status Create(const Options& options = DefaultOptions()) {
    (void)Drop();
    path = NewDbPath("core-ember");
    auto d = Database::Open(path, options);
    if (!d.ok()) return d.status();
    db = std::move(*d);
    auto t = db->CreateTable({"t",
                              {{"id", ColumnType::kInt64, false},
                               {"val", ColumnType::kInt64, false},
                               {"pad", ColumnType::kString, false}}});
    if (!t.ok()) return t.status();
    table = *t;
    auto ix = db->CreateIndex({"t_pk", "t", {"id"}, /*unique=*/true});
    if (!ix.ok()) return ix.status();
    pk = *ix;
    return absl::OkStatus();
  }
  absl::Status Drop() {
    absl::Status s;
    if (db) s = db->Close();
    db.reset();
    if (!path.empty()) RemoveDbFiles(path);
    path.clear();
    rows = 0;
    return s;
  }
  Counters Pages() const { return db ? db->stats().pages : Counters{}; }
};

absl::Status EmberInsert(EmberCore& e, int64_t rows, double* commit_s) {
  auto txn = e.db->Begin();
  if (!txn.ok()) return txn.status();
  Row row = {int64_t{0}, int64_t{0}, std::string()};
  for (int64_t id = 1; id <= rows; ++id) {
    row[0] = id;
    row[1] = ValOf(id);
    MakePad(id, &std::get<std::string>(row[2]));
    auto r = (*txn)->Insert(e.table, row);
    if (!r.ok()) return absl::Status(r.status().code(), absl::StrCat("insert id ", id, ": ", r.status().message()));
  }
  const auto c0 = Clock::now();
  if (absl::Status s = (*txn)->Commit(); !s.ok()) return s;
  *commit_s = Seconds(c0, Clock::now());
  e.rows = rows;
  return absl::OkStatus();
}

absl::Status EmberLookup(EmberCore& e, const std::vector<int64_t>& ids) {
  TransactionOptions ro;
  ro.read_only = true;
  auto txn = e.db->Begin(ro);
  if (!txn.ok()) return txn.status();
  int64_t sum = 0;
  for (int64_t id : ids) {
    auto r = (*txn)->Lookup(e.pk, {id});
    if (!r.ok()) return r.status();
    if (!r->has_value()) return Wrong(absl::StrCat("id ", id, " not found"));
    const Row& row = (*r)->second;
    if (std::get<int64_t>(row[0]) != id) return Wrong(absl::StrCat("lookup ", id, " gave another row"));
    sum += std::get<int64_t>(row[1]) + static_cast<int64_t>(std::get<std::string>(row[2]).size());
  }
  benchmark::DoNotOptimize(sum);
  return (*txn)->Commit();
}

absl::Status EmberUpdate(EmberCore& e, const std::vector<int64_t>& ids, int64_t per_txn) {
  for (size_t i = 0; i < ids.size(); i += static_cast<size_t>(per_txn)) {
    auto txn = e.db->Begin();
    if (!txn.ok()) return txn.status();
    const size_t end = std::min(ids.size(), i + static_cast<size_t>(per_txn));
    for (size_t k = i; k < end; ++k) {
      auto r = (*txn)->Lookup(e.pk, {ids[k]});
      if (!r.ok()) return r.status();
      if (!r->has_value()) return Wrong(absl::StrCat("id ", ids[k], " not found for update"));
      Row row = std::move((*r)->second);
      row[1] = std::get<int64_t>(row[1]) + 1;
      if (absl::Status s = (*txn)->Update(e.table, (*r)->first, row); !s.ok()) {
        return absl::Status(s.code(), absl::StrCat("update id ", ids[k], ": ", s.message()));
      }
    }
    if (absl::Status s = (*txn)->Commit(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status EmberScan(EmberCore& e) {
  TransactionOptions ro;
  ro.read_only = true;
  auto txn = e.db->Begin(ro);
  if (!txn.ok()) return txn.status();
  auto cur = (*txn)->Scan(e.table);
  if (!cur.ok()) return cur.status();
  int64_t n = 0, sum = 0;
  while ((*cur)->Valid()) {
    const Row& row = (*cur)->row();
    sum += std::get<int64_t>(row[1]) + static_cast<int64_t>(std::get<std::string>(row[2]).size());
    ++n;
    if (absl::Status s = (*cur)->Next(); !s.ok()) return s;
  }
  benchmark::DoNotOptimize(sum);
  if (n != e.rows) return Wrong(absl::StrCat("scan saw ", n, " rows of ", e.rows));
  cur->reset();
  return (*txn)->Commit();
}

// ---------------------------------------------------------------- SQLite

struct SqliteCore {
  std::string path;
  sqlite3* db = nullptr;
  int64_t rows = 0;

  absl::Status Exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      absl::Status s = absl::InternalError(absl::StrCat("sqlite ", sql, ": ", err ? err : "?"));
      sqlite3_free(err);
      return s;
    }
    return absl::OkStatus();
  }
  absl::Status Create() {
    (void)Drop();
    path = NewDbPath("core-sqlite", ".sqlite");
    if (sqlite3_open_v2(path.c_str(), &db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        nullptr) != SQLITE_OK) {
      return SqlError(db, "open");
    }
    const char* table = FLAGS_sqlite_rowid_pk.b()
                            ? "CREATE TABLE t(id INTEGER PRIMARY KEY, val INTEGER NOT NULL, "
                              "pad TEXT NOT NULL)"
                            : "CREATE TABLE t(id INTEGER NOT NULL, val INTEGER NOT NULL, "
                              "pad TEXT NOT NULL); CREATE UNIQUE INDEX t_pk ON t(id)";
    for (const std::string& sql :
         {absl::StrCat("PRAGMA page_size=", FLAGS_page_size.i64()),
          absl::StrCat("PRAGMA cache_size=", FLAGS_cache_pages.i64()),
          absl::StrCat("PRAGMA journal_mode=", FLAGS_sqlite_journal.str()),
          std::string(FLAGS_forced_writes.b() ? "PRAGMA synchronous=FULL"
                                              : "PRAGMA synchronous=OFF"),
          std::string(table)}) {
      if (absl::Status s = Exec(sql); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  absl::Status Drop() {
    absl::Status s;
    if (db && sqlite3_close(db) != SQLITE_OK) s = SqlError(db, "close");
    db = nullptr;
    if (!path.empty()) RemoveDbFiles(path);
    path.clear();
    rows = 0;
    return s;
  }
  // The pager's counters since the last call (reset on read).
  Counters TakePages() { return TakeSqlitePages(db); }
};

absl::Status SqliteInsert(SqliteCore& q, int64_t rows, double* commit_s) {
  if (absl::Status s = q.Exec("BEGIN"); !s.ok()) return s;
  Stmt ins;
  if (absl::Status s = ins.Prepare(q.db, "INSERT INTO t(id, val, pad) VALUES(?1, ?2, ?3)"); !s.ok()) {
    return s;
  }
  std::string pad;
  sqlite3_stmt* st = ins.get();
  for (int64_t id = 1; id <= rows; ++id) {
    MakePad(id, &pad);
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, ValOf(id));
    sqlite3_bind_text(st, 3, pad.data(), static_cast<int>(pad.size()), SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE) return SqlError(q.db, absl::StrCat("insert id ", id));
    sqlite3_reset(st);
  }
  const auto c0 = Clock::now();
  if (absl::Status s = q.Exec("COMMIT"); !s.ok()) return s;
  *commit_s = Seconds(c0, Clock::now());
  q.rows = rows;
  return absl::OkStatus();
}

absl::Status SqliteLookup(SqliteCore& q, const std::vector<int64_t>& ids) {
  Stmt sel;
  if (absl::Status s = sel.Prepare(q.db, "SELECT id, val, pad FROM t WHERE id = ?1"); !s.ok()) {
    return s;
  }
  if (absl::Status s = q.Exec("BEGIN"); !s.ok()) return s;
  sqlite3_stmt* st = sel.get();
  int64_t sum = 0;
  for (int64_t id : ids) {
    sqlite3_bind_int64(st, 1, id);
    const int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) return Wrong(absl::StrCat("id ", id, " not found"));
    if (rc != SQLITE_ROW) return SqlError(q.db, "lookup");
    if (sqlite3_column_int64(st, 0) != id) return Wrong(absl::StrCat("lookup ", id, " gave another row"));
    sum += sqlite3_column_int64(st, 1);
    const unsigned char* pad = sqlite3_column_text(st, 2);
    sum += pad ? sqlite3_column_bytes(st, 2) : 0;
    sqlite3_reset(st);
  }
  benchmark::DoNotOptimize(sum);
  return q.Exec("COMMIT");
}

absl::Status SqliteUpdate(SqliteCore& q, const std::vector<int64_t>& ids, int64_t per_txn) {
  Stmt upd;
  if (absl::Status s = upd.Prepare(q.db, "UPDATE t SET val = val + 1 WHERE id = ?1"); !s.ok()) {
    return s;
  }
  sqlite3_stmt* st = upd.get();
  for (size_t i = 0; i < ids.size(); i += static_cast<size_t>(per_txn)) {
    if (absl::Status s = q.Exec("BEGIN"); !s.ok()) return s;
    const size_t end = std::min(ids.size(), i + static_cast<size_t>(per_txn));
    for (size_t k = i; k < end; ++k) {
      sqlite3_bind_int64(st, 1, ids[k]);
      if (sqlite3_step(st) != SQLITE_DONE) return SqlError(q.db, "update");
      if (sqlite3_changes(q.db) != 1) return Wrong(absl::StrCat("id ", ids[k], " not updated"));
      sqlite3_reset(st);
    }
    if (absl::Status s = q.Exec("COMMIT"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status SqliteScan(SqliteCore& q) {
  Stmt sel;
  if (absl::Status s = sel.Prepare(q.db, "SELECT id, val, pad FROM t"); !s.ok()) return s;
  if (absl::Status s = q.Exec("BEGIN"); !s.ok()) return s;
  sqlite3_stmt* st = sel.get();
  int64_t n = 0, sum = 0;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    sum += sqlite3_column_int64(st, 0) + sqlite3_column_int64(st, 1);
    const unsigned char* pad = sqlite3_column_text(st, 2);
    sum += pad ? sqlite3_column_bytes(st, 2) : 0;
    ++n;
  }
  if (rc != SQLITE_DONE) return SqlError(q.db, "scan");
  benchmark::DoNotOptimize(sum);
  sqlite3_reset(st);
  if (n != q.rows) return Wrong(absl::StrCat("scan saw ", n, " rows of ", q.rows));
  return q.Exec("COMMIT");
}

// ---------------------------------------------------------------- the core phases

enum class Op { kInsert, kLookup, kUpdate, kScan };
// kEmberNoDw: EmberDB with torn-page protection off (Options::doublewrite = false), for the
// protection's cost: the same work as kEmber, in the same run.
enum class Engine { kEmber, kSqlite, kEmberNoDw };
constexpr const char* kEngineNames[] = {"ember", "sqlite", "ember_nodw"};
constexpr const char* kOpNames[] = {"insert", "lookup", "update", "scan"};

EmberCore g_ember;
EmberCore g_ember_nodw;
SqliteCore g_sqlite;

EmberCore& EmberOf(Engine e) { return e == Engine::kEmberNoDw ? g_ember_nodw : g_ember; }
Options EmberOptions(Engine e) {
  Options o = DefaultOptions();
  o.doublewrite = e != Engine::kEmberNoDw;
  return o;
}

struct PhaseResult {
  double seconds = 0;      // wall clock (the benchmark's manual time)
  double cpu_seconds = 0;  // process CPU time
  int64_t items = 0;
  Counters pages;
};
std::map<std::pair<int, int>, PhaseResult> g_phase;  // (op, engine) -> last measured run

int64_t Rows() { return std::max<int64_t>(1, FLAGS_rows.i64()); }

// Makes sure the engine's database exists and holds Rows() rows (untimed).
absl::Status EnsureLoaded(Engine e) {
  double commit_s = 0;
  if (e != Engine::kSqlite) {
    EmberCore& g = EmberOf(e);
    if (g.db && g.rows == Rows()) return absl::OkStatus();
    std::fprintf(stderr, "bench: loading %lld rows into EmberDB (%s, untimed)\n",
                 (long long)Rows(), kEngineNames[static_cast<int>(e)]);
    if (absl::Status s = g.Create(EmberOptions(e)); !s.ok()) return s;
    return EmberInsert(g, Rows(), &commit_s);
  }
  if (g_sqlite.db && g_sqlite.rows == Rows()) return absl::OkStatus();
  std::fprintf(stderr, "bench: loading %lld rows into SQLite (untimed)\n", (long long)Rows());
  if (absl::Status s = g_sqlite.Create(); !s.ok()) return s;
  return SqliteInsert(g_sqlite, Rows(), &commit_s);
}

void BM_Core(benchmark::State& state, Op op, Engine engine) {
  const bool ember = engine != Engine::kSqlite;
  EmberCore& mine = EmberOf(engine);  // this row's EmberDB database
  const std::string what = absl::StrCat("core/", kOpNames[static_cast<int>(op)], "/",
                                        kEngineNames[static_cast<int>(engine)]);
  const int64_t rows = Rows();
  const int64_t per_txn = std::max<int64_t>(1, FLAGS_updates_per_txn.i64());
  std::vector<int64_t> ids;
  if (op == Op::kInsert) {
    absl::Status s = ember ? mine.Create(EmberOptions(engine)) : g_sqlite.Create();
    if (Failed(state, s, what + " create")) return;
  } else {
    if (Failed(state, EnsureLoaded(engine), what + " load")) return;
    if (op == Op::kLookup) ids = RandomIds(FLAGS_lookups.i64(), rows, 1);
    if (op == Op::kUpdate) ids = RandomIds(FLAGS_update_txns.i64() * per_txn, rows, 2);
  }
  int64_t items = 0;
  double commit_s = 0;
  for (auto _ : state) {
    const Counters before = ember ? mine.Pages() : g_sqlite.TakePages();
    const double cpu0 = ProcessCpuSeconds();
    const auto t0 = Clock::now();
    absl::Status s;
    switch (op) {
      case Op::kInsert:
        s = ember ? EmberInsert(mine, rows, &commit_s) : SqliteInsert(g_sqlite, rows, &commit_s);
        items = rows;
        break;
      case Op::kLookup:
        s = ember ? EmberLookup(mine, ids) : SqliteLookup(g_sqlite, ids);
        items = static_cast<int64_t>(ids.size());
        break;
      case Op::kUpdate:
        s = ember ? EmberUpdate(mine, ids, per_txn) : SqliteUpdate(g_sqlite, ids, per_txn);
        items = static_cast<int64_t>(ids.size());
        break;
      case Op::kScan:
        s = ember ? EmberScan(mine) : SqliteScan(g_sqlite);
        items = rows;
        break;
    }
    const double secs = Seconds(t0, Clock::now());
    const double cpu_secs = ProcessCpuSeconds() - cpu0;
    if (Failed(state, s, what)) {
      // A half-done insert or update leaves the database in an unknown state: start over next time.
      (void)(ember ? mine.Drop() : g_sqlite.Drop());
      return;
    }
    state.SetIterationTime(secs);
    const Counters pages = ember ? mine.Pages() - before : g_sqlite.TakePages();
    SetPageCounters(state, pages);
    if (!ember) {
      state.counters.erase("marks");      // SQLite has no equivalent
      state.counters.erase("dw_writes");  // its journal writes are not counted (see above)
    }
    g_phase[{static_cast<int>(op), static_cast<int>(engine)}] = {secs, cpu_secs, items, pages};
  }
  state.SetItemsProcessed(items);
  if (op == Op::kInsert) state.counters["commit_ms"] = commit_s * 1e3;
  if (op == Op::kUpdate) {
    state.counters["txns_per_s"] =
        benchmark::Counter(static_cast<double>(FLAGS_update_txns.i64()), benchmark::Counter::kIsRate);
  }
}

// ---------------------------------------------------------------- buffer cache fetch+release

constexpr int kMaxCacheThreads = 2;

struct CacheFixture {
  std::string path;
  std::unique_ptr<io::File> file;
  std::unique_ptr<cache::BufferCache> cache;
  absl::Status status;
  ~CacheFixture() {
    cache.reset();
    file.reset();
    if (!path.empty()) RemoveDbFiles(path);
  }
};
std::mutex g_cache_mu;
std::unique_ptr<CacheFixture> g_cache;
std::map<int, double> g_cache_ns;  // threads -> ns per fetch, averaged over threads (last run)
double g_cache_ns_sum = 0;         // guarded by g_cache_mu: the run in progress
int g_cache_ns_threads = 0;

absl::Status MakeCacheFixture(CacheFixture& f, uint32_t pages) {
  f.path = NewDbPath("cache", ".pages");
  io::FileOptions fo;
  fo.mode = io::OpenMode::kCreateNew;
  auto file = io::OpenPosixFile(f.path, fo);
  if (!file.ok()) return file.status();
  f.file = std::move(*file);
  const uint32_t ps = static_cast<uint32_t>(FLAGS_page_size.i64());
  std::vector<uint8_t> buf(ps);
  for (page::PageNo no = 0; no < pages; ++no) {
    page::InitPage(buf.data(), ps, page::PageType::kData, no);
    page::SealPage(buf.data(), ps);
    if (absl::Status s = f.file->Write(uint64_t{no} * ps, buf.data(), ps); !s.ok()) return s;
  }
  cache::CacheOptions co;
  co.page_size = ps;
  co.capacity = std::max<uint32_t>(pages + 16, static_cast<uint32_t>(FLAGS_cache_pages.i64()));
  co.forced_writes = false;
  f.cache = std::make_unique<cache::BufferCache>(f.file.get(), co);
  // Made resident here, in page order, so every thread's pages sit in frames of their own
  // (consecutive frames), whichever thread count runs first.
  for (page::PageNo no = 1; no < pages; ++no) {
    auto r = f.cache->Fetch(no, cache::LatchMode::kShared);
    if (!r.ok()) return r.status();
  }
  return absl::OkStatus();
}

void BM_CacheFetch(benchmark::State& state) {
  const uint32_t per_thread = static_cast<uint32_t>(std::max<int64_t>(1, FLAGS_cache_bench_pages.i64()));
  cache::BufferCache* cache = nullptr;
  {
    std::lock_guard<std::mutex> g(g_cache_mu);
    if (!g_cache) {
      g_cache = std::make_unique<CacheFixture>();
      g_cache->status = MakeCacheFixture(*g_cache, 1 + kMaxCacheThreads * per_thread);
    }
    if (Failed(state, g_cache->status, "core/cache_fetch setup")) return;
    cache = g_cache->cache.get();
  }
  // This thread's pages (resident since the fixture was made).
  const page::PageNo first = 1 + static_cast<page::PageNo>(state.thread_index()) * per_thread;
  const util::PageCounters before = cache->counters();
  uint32_t i = 0;
  const auto t0 = Clock::now();
  for (auto _ : state) {
    absl::StatusOr<cache::PageRef> r = cache->Fetch(first + i, cache::LatchMode::kShared);
    if (!r.ok()) {
      Failed(state, r.status(), "core/cache_fetch");
      break;
    }
    benchmark::DoNotOptimize(r->data());
    i = i + 1 == per_thread ? 0 : i + 1;
  }  // the PageRef is released at the end of every iteration
  const double ns = Seconds(t0, Clock::now()) * 1e9 / static_cast<double>(std::max<int64_t>(1, state.iterations()));
  state.SetItemsProcessed(state.iterations());
  state.counters["ns_per_fetch"] = benchmark::Counter(ns, benchmark::Counter::kAvgThreads);
  if (state.thread_index() == 0) {
    // Cache-wide: every thread's reads show here, and there must be none (all hits).
    state.counters["reads"] = static_cast<double>(cache->counters().reads - before.reads);
  }
  std::lock_guard<std::mutex> g(g_cache_mu);
  g_cache_ns_sum += ns;
  if (++g_cache_ns_threads == state.threads()) {
    g_cache_ns[state.threads()] = g_cache_ns_sum / state.threads();
    g_cache_ns_sum = 0;
    g_cache_ns_threads = 0;
  }
}

// ---------------------------------------------------------------- group commit

struct CommitFixture {
  EmberCore db;
  std::atomic<int64_t> next_id{1};
  DatabaseStats before;
  Clock::time_point t0;
  absl::Status status;
};
std::unique_ptr<CommitFixture> g_commit;
struct CommitResult {
  double commits_per_s = 0, flushes_per_commit = 0;
};
std::map<std::pair<int, int>, CommitResult> g_commit_results;  // (threads, dw) -> result

absl::Status MakeCommitFixture(CommitFixture& f, bool doublewrite) {
  // Forced writes always on here: group commit is about sharing the fsync.
  Options o = DefaultOptions();
  o.forced_writes = true;
  o.doublewrite = doublewrite;
  if (absl::Status s = f.db.Create(o); !s.ok()) return s;
  f.before = f.db.db->stats();
  return absl::OkStatus();
}

void BM_Commit(benchmark::State& state) {
  // Thread 0 sets up before the loop; the loop's start barrier publishes it to the others.
  if (state.thread_index() == 0) {
    g_commit = std::make_unique<CommitFixture>();
    g_commit->status = MakeCommitFixture(*g_commit, state.range(0) != 0);
    g_commit->t0 = Clock::now();
  }
  Row row = {int64_t{0}, int64_t{0}, std::string()};
  for (auto _ : state) {
    CommitFixture& f = *g_commit;
    if (Failed(state, f.status, "core/commit setup")) break;
    const int64_t id = f.next_id.fetch_add(1, std::memory_order_relaxed);
    row[0] = id;
    row[1] = ValOf(id);
    MakePad(id, &std::get<std::string>(row[2]));
    auto txn = f.db.db->Begin();
    if (Failed(state, txn.status(), "core/commit begin")) break;
    if (Failed(state, (*txn)->Insert(f.db.table, row).status(), absl::StrCat("core/commit insert id ", id))) break;
    if (Failed(state, (*txn)->Commit(), absl::StrCat("core/commit commit of id ", id))) break;
  }
  // The loop's end barrier: every thread is done committing here.
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    CommitFixture& f = *g_commit;
    if (f.status.ok() && f.db.db) {
      const double secs = Seconds(f.t0, Clock::now());
      const DatabaseStats after = f.db.db->stats();
      const double commits = static_cast<double>(after.commits - f.before.commits);
      const double flushes = static_cast<double>(after.group_commit_flushes - f.before.group_commit_flushes);
      CommitResult r{commits / secs, commits > 0 ? flushes / commits : 0};
      state.counters["commits_per_s"] = r.commits_per_s;
      state.counters["flushes_per_commit"] = r.flushes_per_commit;
      state.counters["commits"] = commits;
      SetPageCounters(state, after.pages - f.before.pages);
      g_commit_results[{state.threads(), static_cast<int>(state.range(0))}] = r;
    }
    if (absl::Status s = f.db.Drop(); !s.ok()) Failed(state, s, "core/commit close");
    g_commit.reset();
  }
}

// ---------------------------------------------------------------- summary

// Torn-page protection on against off for the phases that write (commit throughput is printed
// with the commit results).
void PrintDoublewriteCost(std::FILE* out) {
  bool header = false;
  for (Op op : {Op::kInsert, Op::kUpdate}) {
    auto on = g_phase.find({static_cast<int>(op), static_cast<int>(Engine::kEmber)});
    auto off = g_phase.find({static_cast<int>(op), static_cast<int>(Engine::kEmberNoDw)});
    if (on == g_phase.end() || off == g_phase.end()) continue;
    if (!header) {
      std::fprintf(out, "\ntorn-page protection (doublewrite) on vs off, same work:\n");
      std::fprintf(out, "%-8s %10s %10s %7s %10s %10s %10s %10s %10s\n", "op", "on s", "off s",
                   "on/off", "on cpu", "off cpu", "on writes", "dw_writes", "off writes");
      header = true;
    }
    const PhaseResult& a = on->second;
    const PhaseResult& b = off->second;
    std::fprintf(out, "%-8s %10.4f %10.4f %7.2f %10.4f %10.4f %10llu %10llu %10llu\n",
                 kOpNames[static_cast<int>(op)], a.seconds, b.seconds,
                 b.seconds > 0 ? a.seconds / b.seconds : 0.0, a.cpu_seconds, b.cpu_seconds,
                 static_cast<unsigned long long>(a.pages.writes),
                 static_cast<unsigned long long>(a.pages.dw_writes),
                 static_cast<unsigned long long>(b.pages.writes));
  }
  if (header) {
    std::fprintf(out, "on writes = pages written home; dw_writes = protection copies and their "
                      "record pages, written on top of them\n");
  }
}

void PrintSummary() {
  std::FILE* out = SummaryStream();
  if (!g_phase.empty()) {
    std::fprintf(out,
                 "\ncore: EmberDB vs SQLite, same work (rows=%lld, forced_writes=%s -> SQLite "
                 "synchronous=%s, journal_mode=%s, %s)\n",
                 (long long)Rows(), FLAGS_forced_writes.str().c_str(),
                 FLAGS_forced_writes.b() ? "FULL" : "OFF", FLAGS_sqlite_journal.str().c_str(),
                 FLAGS_sqlite_rowid_pk.b() ? "SQLite id = INTEGER PRIMARY KEY"
                                           : "unique index on id in both");
    std::fprintf(out, "%-8s %-20s %11s %11s %14s %14s %7s %11s %11s %9s\n", "op", "work",
                 "EmberDB s", "SQLite s", "EmberDB ops/s", "SQLite ops/s", "ratio", "EmberDB cpu",
                 "SQLite cpu", "cpu ratio");
    for (int op = 0; op < 4; ++op) {
      auto e = g_phase.find({op, 0});
      auto q = g_phase.find({op, 1});
      if (e == g_phase.end() && q == g_phase.end()) continue;
      std::string work;
      switch (static_cast<Op>(op)) {
        case Op::kInsert: work = absl::StrCat(Rows(), " rows/1 txn"); break;
        case Op::kLookup: work = absl::StrCat(FLAGS_lookups.i64(), " lookups"); break;
        case Op::kUpdate:
          work = absl::StrCat(FLAGS_update_txns.i64(), " txns x ", FLAGS_updates_per_txn.i64());
          break;
        case Op::kScan: work = absl::StrCat(Rows(), " rows"); break;
      }
      auto secs = [](auto it, auto end) {
        return it == end ? std::string("-") : absl::StrFormat("%.4f", it->second.seconds);
      };
      auto rate = [](auto it, auto end) {
        return it == end || it->second.seconds <= 0
                   ? std::string("-")
                   : absl::StrFormat("%.0f", it->second.items / it->second.seconds);
      };
      auto cpu = [](auto it, auto end) {
        return it == end ? std::string("-") : absl::StrFormat("%.4f", it->second.cpu_seconds);
      };
      std::string ratio = "-", cpu_ratio = "-";
      if (e != g_phase.end() && q != g_phase.end()) {
        if (q->second.seconds > 0) {
          ratio = absl::StrFormat("%.2f", e->second.seconds / q->second.seconds);
        }
        if (q->second.cpu_seconds > 0) {
          cpu_ratio = absl::StrFormat("%.2f", e->second.cpu_seconds / q->second.cpu_seconds);
        }
      }
      std::fprintf(out, "%-8s %-20s %11s %11s %14s %14s %7s %11s %11s %9s\n", kOpNames[op],
                   work.c_str(), secs(e, g_phase.end()).c_str(), secs(q, g_phase.end()).c_str(),
                   rate(e, g_phase.end()).c_str(), rate(q, g_phase.end()).c_str(), ratio.c_str(),
                   cpu(e, g_phase.end()).c_str(), cpu(q, g_phase.end()).c_str(),
                   cpu_ratio.c_str());
    }
    std::fprintf(out,
                 "ratio = EmberDB time / SQLite time, wall clock (below 1: EmberDB faster); "
                 "cpu = process CPU seconds of the phase\n");
  }
  PrintDoublewriteCost(out);
  if (!g_cache_ns.empty()) {
    std::fprintf(out, "\ncache fetch+release of resident pages:");
    for (auto [t, ns] : g_cache_ns) std::fprintf(out, "  %d thread(s) %.1f ns/fetch", t, ns);
    std::fprintf(out, "\n");
  }
  if (!g_commit_results.empty()) {
    std::fprintf(out, "commit of one-insert transactions (forced writes):\n");
    for (auto [key, r] : g_commit_results) {
      std::fprintf(out, "  %2d thread(s), doublewrite %s: %8.0f commits/s, %.3f flushes per commit",
                   key.first, key.second ? "on " : "off", r.commits_per_s, r.flushes_per_commit);
      auto off = g_commit_results.find({key.first, 0});
      if (key.second && off != g_commit_results.end() && r.commits_per_s > 0) {
        // Time per commit with protection over time per commit without it.
        std::fprintf(out, "  (on/off: %.2f)", off->second.commits_per_s / r.commits_per_s);
      }
      std::fprintf(out, "\n");
    }
  }
  std::fflush(out);
}

void Register() {
  for (Op op : {Op::kInsert, Op::kLookup, Op::kUpdate, Op::kScan}) {
    // Protection off beside on for the phases that write, in alternating order (insert: on
    // first; update: off first).
    std::vector<Engine> engines = {Engine::kEmber, Engine::kSqlite};
    if (op == Op::kInsert) engines = {Engine::kEmber, Engine::kEmberNoDw, Engine::kSqlite};
    if (op == Op::kUpdate) engines = {Engine::kEmberNoDw, Engine::kEmber, Engine::kSqlite};
    for (Engine e : engines) {
      benchmark::RegisterBenchmark(absl::StrCat("core/", kOpNames[static_cast<int>(op)], "/",
                                                kEngineNames[static_cast<int>(e)])
                                       .c_str(),
                                   BM_Core, op, e)
          ->Iterations(1)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  auto* cache = benchmark::RegisterBenchmark("core/cache_fetch", BM_CacheFetch);
  for (int t = 1; t <= kMaxCacheThreads; ++t) cache->Threads(t);
  cache->UseRealTime();
  // dw:1 / dw:0: torn-page protection on / off, alternating per thread count.
  for (int threads : {1, 4, 16}) {
    for (int dw : threads == 4 ? std::vector<int>{0, 1} : std::vector<int>{1, 0}) {
      benchmark::RegisterBenchmark("core/commit", BM_Commit)
          ->ArgName("dw")
          ->Arg(dw)
          ->Threads(threads)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) {
  using namespace ember::bench;
  if (!Init(&argc, argv)) return 1;
  Register();
  benchmark::RunSpecifiedBenchmarks();
  bool ok = !AnyFailed();
  for (EmberCore* e : {&g_ember, &g_ember_nodw}) {
    if (absl::Status s = e->Drop(); !s.ok()) {
      std::fprintf(stderr, "bench: FAILED: closing the EmberDB database: %s\n",
                   s.ToString().c_str());
      ok = false;
    }
  }
  if (absl::Status s = g_sqlite.Drop(); !s.ok()) {
    std::fprintf(stderr, "bench: FAILED: closing the SQLite database: %s\n", s.ToString().c_str());
    ok = false;
  }
  g_cache.reset();
  PrintSummary();
  Finish();
  return ok ? 0 : 1;
}
