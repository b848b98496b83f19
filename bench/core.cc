// bench/core: the core operations of EmberDB next to SQLite doing the same work in the same run,
// plus two engine microbenchmarks (buffer cache hit path, group commit).
//
//   tools/dev bench core [--rows=N] [--lookups=N] [--update_txns=N] [--updates_per_txn=N]
//                        [--runs=N] [--forced_writes=0|1] [--sqlite_journal=wal|delete]
//                        [--sqlite_rowid_pk=0|1] [common flags, see bench/util/bench_util.h]
//                        [--benchmark_filter=... --benchmark_format=json ...]
//
// The table, in both engines: t(id int64 not null, val int64 not null, pad string of
// --pad_bytes (40) bytes), with a separate unique index on id (EmberDB: records on data pages +
// a B-tree; SQLite: a rowid table + `CREATE UNIQUE INDEX`, the same layout; --sqlite_rowid_pk=1
// makes id SQLite's INTEGER PRIMARY KEY instead, a clustered layout EmberDB does not have).
//
// Rows (one-shot phases: Iterations(1), manual time of the work alone; rows/s = items_per_second):
//   core/insert/run:R/ENGINE  ids 1..rows inserted in ascending order in ONE transaction
//                             (commit included; commit_ms says how much of it the commit was)
//   core/lookup/run:R/ENGINE  --lookups random ids looked up by key in one read-only
//                             transaction, each row read out (val and pad)
//   core/update/run:R/ENGINE  --update_txns transactions of --updates_per_txn updates each
//                             (val = val + 1 by key, random ids), each committed. SQLite's
//                             UPDATE overwrites the row in place; EmberDB's keeps the old
//                             version behind the new one until garbage collection removes it, so
//                             EmberDB's timed phase ends with Database::CollectGarbage (gc_ms:
//                             that part), and the background collector's work during the phase
//                             is in its CPU time.
//   core/scan/run:R/ENGINE    every row read in storage order in one read-only transaction
// ENGINE is ember, sqlite, or (insert and update) ember_nodw: EmberDB with torn-page protection
// off (Options::doublewrite = false), for the protection's cost in the same run.
// The write phases (insert, update) end with each engine's deferred writes, inside the timed
// phase: SQLite in WAL mode leaves its commits' pages in the WAL, so its phase ends with
// PRAGMA wal_checkpoint(TRUNCATE) (checkpoint_ms: that part); EmberDB with protection leaves its
// commits' pages in the doublewrite area's records, written home lazily, so its phase ends with
// Database::Checkpoint, inside its time (checkpoint_ms is SQLite's only).
//
// Checks, untimed, each failing the row and making the binary exit with 1: every looked-up id
// found with the val its updates so far give it and the pad it was inserted with (a CRC32C of
// each pad read is kept in the timed loop, the same work in both engines); every update found
// its row; a scan sees each id once (count and sum of ids) and the sum of val the updates give.
// The phases after insert reuse the databases the insert made (loading them untimed when the
// insert was filtered out); an insert starts from a fresh database.
//
// Order: every operation runs --runs times on each engine. Run R of an operation takes EmberDB
// first or SQLite first in turn (ABBA, bench/util/compare.h; the first engine also alternates
// from one operation to the next), so that neither always runs on a machine the other warmed.
// The summary pairs run R of EmberDB with run R of SQLite and prints median times and the
// median of the per-run ratios.
//
// CPU: EmberDB rows report the process's CPU over the phase (its collector thread included);
// SQLite rows the CPU of the calling thread, where SQLite does all its work (it starts no thread
// of its own). The EmberDB databases stay open from row to row, but before every row their
// collectors are drained (nothing queued, untimed), so no EmberDB thread works during a SQLite
// phase or during the other EmberDB database's phase.
//
// Counters: EmberDB rows carry fetches, marks, reads, writes (pages written home), dw_writes
// (torn-page protection copies) and syncs (Counters::syncs) of the phase (DatabaseStats delta).
// SQLite rows carry fetches and reads from its pager (sqlite3_db_status: hits + misses, misses),
// and, counted by a VFS layer over the default VFS (bench/util/sqlite_util.h), writes = pages
// written to the database file, journal_writes = bytes written to the WAL (or rollback journal)
// in pages, and syncs (xSync calls, database and WAL or journal). all_writes on both rows is
// every page written: EmberDB writes + dw_writes, SQLite writes + journal_writes; the summary
// puts these side by side. SQLite has no "marks". Both rows also carry commits (transactions of
// the phase), syncs_per_commit (syncs / commits) and page_writes_per_txn (page_writes / commits;
// page_writes: EmberDB writes + dw_writes, SQLite's page-sized xWrite calls to the database and
// the WAL or journal), which the summary's per-transaction table shows for the write phases.
//
// Durability is matched: --forced_writes=1 (default) = EmberDB fsync at commit and SQLite
// synchronous=FULL; 0 = no fsync in EmberDB, synchronous=OFF. SQLite runs in WAL mode
// (journal_mode=WAL): with synchronous=FULL one sync per commit and torn-page safe, how users who
// care about speed run it, so the peer to beat. --sqlite_journal=delete runs the rollback journal
// instead (the default before; no log, the closest to careful write). Both engines use
// --page_size and a cache of --cache_pages pages.
//
// Microbenchmarks (engine internals):
//   core/cache_fetch/threads:{1,2}  Fetch(page, kShared) + PageRef release of resident pages on a
//       BufferCache over a small file, each thread cycling over its own --cache_bench_pages pages;
//       ns_per_fetch is per thread (averaged over threads); reads must stay 0 (all hits).
//   core/commit/dw:{1,0}/threads:{1,4,16}  small transactions (Begin, one insert, Commit) with
//       forced writes always on, on a fresh database, torn-page protection on (dw:1) and off
//       (dw:0); commits_per_s over all threads, flushes_per_commit = group_commit_flushes /
//       commits (below 1: commits shared an fsync round) and syncs_per_commit = the database's
//       syncs (Counters::syncs, each counted once) / commits.
// At the end a summary table per operation (median times, ratios EmberDB / SQLite, below 1:
// EmberDB faster; CPU; page writes), the count of wins, losses and evens, protection on against
// off, syncs per commit and page writes per transaction of the write phases for every engine,
// and the microbenchmarks' results — on stdout for the console format, on stderr otherwise
// (JSON/CSV stay clean).
#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/util/bench_util.h"
#include "bench/util/compare.h"
#include "bench/util/sqlite_util.h"
#include "ember/ember.h"
#include "engine/cache/buffer_cache.h"
#include "engine/io/file.h"
#include "engine/page/page.h"
#include "engine/util/crc32c.h"

namespace ember::bench {
namespace {

Flag FLAGS_rows("rows", int64_t{1000000}, "rows in the table (bulk insert in one transaction)");
Flag FLAGS_lookups("lookups", int64_t{100000}, "point lookups by random id");
Flag FLAGS_update_txns("update_txns", int64_t{1000}, "update transactions");
Flag FLAGS_updates_per_txn("updates_per_txn", int64_t{10}, "updates (random ids) per transaction");
Flag FLAGS_pad_bytes("pad_bytes", int64_t{40}, "bytes of the pad string column");
Flag FLAGS_seed("seed", int64_t{42}, "seed of the random ids and values");
Flag FLAGS_sqlite_rowid_pk("sqlite_rowid_pk", false,
                           "SQLite: id as INTEGER PRIMARY KEY (clustered) instead of a unique "
                           "index over a rowid table");
Flag FLAGS_cache_bench_pages("cache_bench_pages", int64_t{64},
                             "resident pages per thread in the cache microbenchmark");

// ---------------------------------------------------------------- data

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

// What a lookup read for one id: kept in the timed loop, checked after it.
struct Seen {
  int64_t val = 0;
  uint32_t pad_crc = 0;
  uint32_t pad_len = 0;
};

// What the table must hold: ids 1..rows with val = ValOf(id) plus one per update of that id so
// far (the same for both engines: their updates use the same ids).
struct Expected {
  int64_t rows = 0;                             // rows loaded (0: not loaded)
  absl::flat_hash_map<int64_t, int64_t> bumps;  // id -> updates applied
  uint64_t total_bumps = 0;

  void Reset(int64_t n) {
    rows = n;
    bumps.clear();
    total_bumps = 0;
  }
  void Updated(const std::vector<int64_t>& ids) {
    for (int64_t id : ids) ++bumps[id];
    total_bumps += ids.size();
  }
  int64_t Val(int64_t id) const {
    auto it = bumps.find(id);
    return ValOf(id) + (it == bumps.end() ? 0 : it->second);
  }
};

absl::Status CheckLookups(const Expected& x, const std::vector<int64_t>& ids,
                          const std::vector<Seen>& seen) {
  if (seen.size() != ids.size()) {
    return Wrong(absl::StrCat(seen.size(), " lookups answered of ", ids.size()));
  }
  std::string pad;
  for (size_t i = 0; i < ids.size(); ++i) {
    MakePad(ids[i], &pad);
    if (seen[i].val != x.Val(ids[i])) {
      return Wrong(
          absl::StrCat("id ", ids[i], ": val ", seen[i].val, " where ", x.Val(ids[i]), " was due"));
    }
    if (seen[i].pad_len != pad.size() || seen[i].pad_crc != util::Crc32c(pad.data(), pad.size())) {
      return Wrong(absl::StrCat("id ", ids[i], ": pad differs from the one inserted"));
    }
  }
  return absl::OkStatus();
}

// Sums a scan keeps: each id once (count and sum of ids), and the vals.
struct ScanSums {
  int64_t n = 0;
  uint64_t ids = 0, vals = 0;  // wrap around: compared modulo 2^64
};

absl::Status CheckScan(const Expected& x, const ScanSums& got) {
  ScanSums want;
  want.n = x.rows;
  for (int64_t id = 1; id <= x.rows; ++id) {
    want.ids += static_cast<uint64_t>(id);
    want.vals += static_cast<uint64_t>(ValOf(id));
  }
  want.vals += x.total_bumps;
  if (got.n != want.n) return Wrong(absl::StrCat("scan saw ", got.n, " rows of ", want.n));
  if (got.ids != want.ids) return Wrong("scan: the ids are not 1..rows, each once");
  if (got.vals != want.vals) return Wrong("scan: the sum of val is not what the updates give");
  return absl::OkStatus();
}

// ---------------------------------------------------------------- EmberDB

struct EmberCore {
  std::string path;
  std::unique_ptr<Database> db;
  Table table;
  Index pk;
  Expected x;

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
    x.Reset(0);
    return s;
  }
  Counters Pages() const { return db ? db->stats().pages : Counters{}; }

  // Waits (untimed) until the background collector has nothing queued (WaitForCollector).
  absl::Status Quiesce() const { return db ? WaitForCollector(*db, path) : absl::OkStatus(); }
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
    if (!r.ok()) return With(r.status(), absl::StrCat("insert id ", id));
  }
  const auto c0 = Clock::now();
  if (absl::Status s = (*txn)->Commit(); !s.ok()) return s;
  *commit_s = Seconds(c0, Clock::now());
  e.x.Reset(rows);
  return With(e.db->Checkpoint(), "Checkpoint after the insert");  // the deferred writes
}

absl::Status EmberLookup(EmberCore& e, const std::vector<int64_t>& ids, std::vector<Seen>* seen) {
  TransactionOptions ro;
  ro.read_only = true;
  auto txn = e.db->Begin(ro);
  if (!txn.ok()) return txn.status();
  for (int64_t id : ids) {
    auto r = (*txn)->Lookup(e.pk, {id});
    if (!r.ok()) return r.status();
    if (!r->has_value()) return Wrong(absl::StrCat("id ", id, " not found"));
    const Row& row = (*r)->second;
    if (std::get<int64_t>(row[0]) != id)
      return Wrong(absl::StrCat("lookup ", id, " gave another row"));
    const std::string& pad = std::get<std::string>(row[2]);
    seen->push_back({std::get<int64_t>(row[1]), util::Crc32c(pad.data(), pad.size()),
                     static_cast<uint32_t>(pad.size())});
  }
  return (*txn)->Commit();
}

// The updates, then the collection of the versions they left behind (*gc_s: that part).
absl::Status EmberUpdate(EmberCore& e, const std::vector<int64_t>& ids, int64_t per_txn,
                         double* gc_s) {
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
        return With(s, absl::StrCat("update id ", ids[k]));
      }
    }
    if (absl::Status s = (*txn)->Commit(); !s.ok()) return s;
  }
  const auto g0 = Clock::now();
  absl::Status s = With(e.db->CollectGarbage(), "CollectGarbage after the updates");
  *gc_s = Seconds(g0, Clock::now());
  if (s.ok()) s = With(e.db->Checkpoint(), "Checkpoint after the updates");  // deferred writes
  return s;
}

absl::Status EmberScan(EmberCore& e, ScanSums* sums) {
  TransactionOptions ro;
  ro.read_only = true;
  auto txn = e.db->Begin(ro);
  if (!txn.ok()) return txn.status();
  auto cur = (*txn)->Scan(e.table);
  if (!cur.ok()) return cur.status();
  int64_t pad_bytes = 0;
  while ((*cur)->Valid()) {
    const Row& row = (*cur)->row();
    sums->ids += static_cast<uint64_t>(std::get<int64_t>(row[0]));
    sums->vals += static_cast<uint64_t>(std::get<int64_t>(row[1]));
    pad_bytes += static_cast<int64_t>(std::get<std::string>(row[2]).size());
    ++sums->n;
    if (absl::Status s = (*cur)->Next(); !s.ok()) return s;
  }
  benchmark::DoNotOptimize(pad_bytes);
  cur->reset();
  return (*txn)->Commit();
}

// ---------------------------------------------------------------- SQLite

struct SqliteCore {
  std::string path;
  sqlite3* db = nullptr;
  Expected x;

  absl::Status Exec(const std::string& sql) { return SqlExec(db, sql); }
  absl::Status Create() {
    (void)Drop();
    path = NewDbPath("core-sqlite", ".sqlite");
    if (absl::Status s = OpenSqlite(path, &db); !s.ok()) return s;
    return Exec(FLAGS_sqlite_rowid_pk.b()
                    ? "CREATE TABLE t(id INTEGER PRIMARY KEY, val INTEGER NOT NULL, "
                      "pad TEXT NOT NULL)"
                    : "CREATE TABLE t(id INTEGER NOT NULL, val INTEGER NOT NULL, "
                      "pad TEXT NOT NULL); CREATE UNIQUE INDEX t_pk ON t(id)");
  }
  absl::Status Drop() {
    absl::Status s;
    if (db && sqlite3_close(db) != SQLITE_OK) s = SqlError(db, "close");
    db = nullptr;
    if (!path.empty()) RemoveDbFiles(path);
    path.clear();
    x.Reset(0);
    return s;
  }
};

// A write phase of SQLite ends with SqliteCheckpoint: in WAL mode the pages its commits left in
// the WAL are written to the database file then, inside the timed phase (*checkpoint_s: that part).
absl::Status SqliteInsert(SqliteCore& q, int64_t rows, double* commit_s, double* checkpoint_s) {
  if (absl::Status s = q.Exec("BEGIN"); !s.ok()) return s;
  Stmt ins;
  if (absl::Status s = ins.Prepare(q.db, "INSERT INTO t(id, val, pad) VALUES(?1, ?2, ?3)");
      !s.ok()) {
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
  const auto k0 = Clock::now();
  *commit_s = Seconds(c0, k0);
  q.x.Reset(rows);
  absl::Status s = SqliteCheckpoint(q.db);
  *checkpoint_s = Seconds(k0, Clock::now());
  return s;
}

absl::Status SqliteLookup(SqliteCore& q, const std::vector<int64_t>& ids, std::vector<Seen>* seen) {
  Stmt sel;
  if (absl::Status s = sel.Prepare(q.db, "SELECT id, val, pad FROM t WHERE id = ?1"); !s.ok()) {
    return s;
  }
  if (absl::Status s = q.Exec("BEGIN"); !s.ok()) return s;
  sqlite3_stmt* st = sel.get();
  for (int64_t id : ids) {
    sqlite3_bind_int64(st, 1, id);
    const int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) return Wrong(absl::StrCat("id ", id, " not found"));
    if (rc != SQLITE_ROW) return SqlError(q.db, "lookup");
    if (sqlite3_column_int64(st, 0) != id)
      return Wrong(absl::StrCat("lookup ", id, " gave another row"));
    const unsigned char* pad = sqlite3_column_text(st, 2);
    const int n = sqlite3_column_bytes(st, 2);
    seen->push_back({sqlite3_column_int64(st, 1), util::Crc32c(pad, static_cast<size_t>(n)),
                     static_cast<uint32_t>(n)});
    sqlite3_reset(st);
  }
  return q.Exec("COMMIT");
}

absl::Status SqliteUpdate(SqliteCore& q, const std::vector<int64_t>& ids, int64_t per_txn,
                          double* checkpoint_s) {
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
  const auto k0 = Clock::now();
  absl::Status s = SqliteCheckpoint(q.db);
  *checkpoint_s = Seconds(k0, Clock::now());
  return s;
}

absl::Status SqliteScan(SqliteCore& q, ScanSums* sums) {
  Stmt sel;
  if (absl::Status s = sel.Prepare(q.db, "SELECT id, val, pad FROM t"); !s.ok()) return s;
  if (absl::Status s = q.Exec("BEGIN"); !s.ok()) return s;
  sqlite3_stmt* st = sel.get();
  int64_t pad_bytes = 0;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    sums->ids += static_cast<uint64_t>(sqlite3_column_int64(st, 0));
    sums->vals += static_cast<uint64_t>(sqlite3_column_int64(st, 1));
    const unsigned char* pad = sqlite3_column_text(st, 2);
    pad_bytes += pad ? sqlite3_column_bytes(st, 2) : 0;
    ++sums->n;
  }
  if (rc != SQLITE_DONE) return SqlError(q.db, "scan");
  benchmark::DoNotOptimize(pad_bytes);
  sqlite3_reset(st);
  return q.Exec("COMMIT");
}

// ---------------------------------------------------------------- the core phases

enum class Op { kInsert, kLookup, kUpdate, kScan };
enum class Engine { kEmber, kSqlite, kEmberNoDw };
constexpr const char* kEngineNames[] = {"ember", "sqlite", "ember_nodw"};
constexpr const char* kOpNames[] = {"insert", "lookup", "update", "scan"};
constexpr int kOps = 4, kEngineCount = 3;

EmberCore g_ember;
EmberCore g_ember_nodw;
SqliteCore g_sqlite;

EmberCore& EmberOf(Engine e) { return e == Engine::kEmberNoDw ? g_ember_nodw : g_ember; }
Options EmberOptions(Engine e) {
  Options o = DefaultOptions();
  o.doublewrite = e != Engine::kEmberNoDw;
  return o;
}

// Per operation: EmberDB against SQLite, and EmberDB with protection on against off.
Comparison g_vs_sqlite[kOps];
Comparison g_dw_on_off[kOps];
// (op, engine) -> all_writes of each run (pages: EmberDB home + doublewrite, SQLite database +
// journal), and EmberDB's writes and dw_writes for the protection table.
std::map<std::pair<int, int>, std::vector<double>> g_all_writes;
std::map<std::pair<int, int>, std::vector<double>> g_home_writes, g_dw_writes;
// (op, engine) -> per transaction of each run of a write phase: syncs per commit (EmberDB:
// Counters::syncs; SQLite: xSync calls on the database and the WAL or journal) and pages
// written (EmberDB writes + dw_writes; SQLite xWrite calls of a page, database and WAL or
// journal), SQLite's checkpoint at the end of the phase included.
std::map<std::pair<int, int>, std::vector<double>> g_syncs_per_commit, g_page_writes_per_txn;

int64_t Rows() { return std::max<int64_t>(1, FLAGS_rows.i64()); }

// Makes sure the engine's database exists and holds Rows() rows (untimed).
absl::Status EnsureLoaded(Engine e) {
  double commit_s = 0;
  if (e != Engine::kSqlite) {
    EmberCore& g = EmberOf(e);
    if (g.db && g.x.rows == Rows()) return absl::OkStatus();
    std::fprintf(stderr, "bench: loading %lld rows into EmberDB (%s, untimed)\n", (long long)Rows(),
                 kEngineNames[static_cast<int>(e)]);
    if (absl::Status s = g.Create(EmberOptions(e)); !s.ok()) return s;
    return EmberInsert(g, Rows(), &commit_s);
  }
  if (g_sqlite.db && g_sqlite.x.rows == Rows()) return absl::OkStatus();
  std::fprintf(stderr, "bench: loading %lld rows into SQLite (untimed)\n", (long long)Rows());
  if (absl::Status s = g_sqlite.Create(); !s.ok()) return s;
  double checkpoint_s = 0;
  return SqliteInsert(g_sqlite, Rows(), &commit_s, &checkpoint_s);
}

// Before a phase: no EmberDB collector has anything left to do (see the file comment).
absl::Status QuiesceAll() {
  for (const EmberCore* e : {&g_ember, &g_ember_nodw}) {
    if (absl::Status s = e->Quiesce(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

void BM_Core(benchmark::State& state, Op op, Engine engine, int run) {
  const bool ember = engine != Engine::kSqlite;
  EmberCore& mine = EmberOf(engine);  // this row's EmberDB database
  Expected& x = ember ? mine.x : g_sqlite.x;
  const std::string what = absl::StrCat("core/", kOpNames[static_cast<int>(op)], "/run:", run, "/",
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
  if (Failed(state, QuiesceAll(), what + " quiesce")) return;
  std::vector<Seen> seen;
  seen.reserve(ids.size());
  ScanSums sums;
  int64_t items = 0;
  double commit_s = 0, gc_s = 0, checkpoint_s = 0;
  // Transactions the phase commits (the read-only ones commit one that writes nothing).
  const int64_t commits =
      op == Op::kUpdate ? (static_cast<int64_t>(ids.size()) + per_txn - 1) / per_txn : 1;
  const bool writes = op == Op::kInsert || op == Op::kUpdate;
  for (auto _ : state) {
    const Counters before = ember ? mine.Pages() : TakeSqlitePages(g_sqlite.db);
    (void)TakeSqliteIo();
    const double cpu0 = ember ? ProcessCpuSeconds() : ThreadCpuSeconds();
    const auto t0 = Clock::now();
    absl::Status s;
    switch (op) {
      case Op::kInsert:
        s = ember ? EmberInsert(mine, rows, &commit_s)
                  : SqliteInsert(g_sqlite, rows, &commit_s, &checkpoint_s);
        items = rows;
        break;
      case Op::kLookup:
        s = ember ? EmberLookup(mine, ids, &seen) : SqliteLookup(g_sqlite, ids, &seen);
        items = static_cast<int64_t>(ids.size());
        break;
      case Op::kUpdate:
        s = ember ? EmberUpdate(mine, ids, per_txn, &gc_s)
                  : SqliteUpdate(g_sqlite, ids, per_txn, &checkpoint_s);
        items = static_cast<int64_t>(ids.size());
        break;
      case Op::kScan:
        s = ember ? EmberScan(mine, &sums) : SqliteScan(g_sqlite, &sums);
        items = rows;
        break;
    }
    const double secs = Seconds(t0, Clock::now());
    const double cpu_secs = (ember ? ProcessCpuSeconds() : ThreadCpuSeconds()) - cpu0;
    const Counters pages = ember ? mine.Pages() - before : TakeSqlitePages(g_sqlite.db);
    const SqliteIo io = TakeSqliteIo();
    if (s.ok() && op == Op::kUpdate) x.Updated(ids);
    if (s.ok() && op == Op::kLookup) s = CheckLookups(x, ids, seen);
    if (s.ok() && op == Op::kScan) s = CheckScan(x, sums);
    if (s.ok() && ember) s = mine.Quiesce();
    if (Failed(state, s, what)) {
      // A half-done insert or update leaves the database in an unknown state: start over next time.
      (void)(ember ? mine.Drop() : g_sqlite.Drop());
      return;
    }
    state.SetIterationTime(secs);
    state.counters["cpu_s"] = cpu_secs;
    double all_writes = 0, syncs = 0, page_writes = 0;
    if (ember) {
      SetPageCounters(state, pages);
      SetAllWrites(state, pages);
      all_writes = static_cast<double>(pages.writes + pages.dw_writes);
      syncs = static_cast<double>(pages.syncs);
      page_writes = all_writes;
      state.counters["page_writes"] = page_writes;
      g_home_writes[{static_cast<int>(op), static_cast<int>(engine)}].push_back(
          static_cast<double>(pages.writes));
      g_dw_writes[{static_cast<int>(op), static_cast<int>(engine)}].push_back(
          static_cast<double>(pages.dw_writes));
    } else {
      SetSqliteCounters(state, pages, io);
      all_writes = static_cast<double>(io.db_writes + JournalPages(io));
      syncs = static_cast<double>(Syncs(io));
      page_writes = static_cast<double>(PageWrites(io));
    }
    g_all_writes[{static_cast<int>(op), static_cast<int>(engine)}].push_back(all_writes);
    const double n_commits = static_cast<double>(std::max<int64_t>(1, commits));
    state.counters["commits"] = n_commits;
    state.counters["syncs_per_commit"] = syncs / n_commits;
    state.counters["page_writes_per_txn"] = page_writes / n_commits;
    if (writes) {
      const std::pair<int, int> key{static_cast<int>(op), static_cast<int>(engine)};
      g_syncs_per_commit[key].push_back(syncs / n_commits);
      g_page_writes_per_txn[key].push_back(page_writes / n_commits);
    }
    const Sample sample{secs, cpu_secs};
    if (engine != Engine::kEmberNoDw) {
      g_vs_sqlite[static_cast<int>(op)].Set(ember, run, sample);
    }
    if (engine != Engine::kSqlite) {
      g_dw_on_off[static_cast<int>(op)].Set(engine == Engine::kEmber, run, sample);
    }
  }
  state.SetItemsProcessed(items);
  if (op == Op::kInsert) state.counters["commit_ms"] = commit_s * 1e3;
  if (writes && !ember && SqliteWal()) state.counters["checkpoint_ms"] = checkpoint_s * 1e3;
  if (op == Op::kUpdate) {
    if (ember) state.counters["gc_ms"] = gc_s * 1e3;
    state.counters["txns_per_s"] = benchmark::Counter(static_cast<double>(FLAGS_update_txns.i64()),
                                                      benchmark::Counter::kIsRate);
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
  const uint32_t per_thread =
      static_cast<uint32_t>(std::max<int64_t>(1, FLAGS_cache_bench_pages.i64()));
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
  const double ns = Seconds(t0, Clock::now()) * 1e9 /
                    static_cast<double>(std::max<int64_t>(1, state.iterations()));
  state.SetItemsProcessed(state.iterations());
  state.counters["ns_per_fetch"] = benchmark::Counter(ns, benchmark::Counter::kAvgThreads);
  if (state.thread_index() == 0) {
    // Cache-wide: every thread's reads show here, and there must be none (all hits).
    const uint64_t reads = cache->counters().reads - before.reads;
    state.counters["reads"] = static_cast<double>(reads);
    if (reads != 0) {
      Failed(state, Wrong(absl::StrCat(reads, " reads: a resident page was not a hit")),
             "core/cache_fetch");
    }
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
  double commits_per_s = 0, flushes_per_commit = 0, syncs_per_commit = 0;
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
    if (Failed(state, (*txn)->Insert(f.db.table, row).status(),
               absl::StrCat("core/commit insert id ", id)))
      break;
    if (Failed(state, (*txn)->Commit(), absl::StrCat("core/commit commit of id ", id))) break;
  }
  // No deferred writes yet (Commit writes its pages home); once it defers, flush them here.
  // The loop's end barrier: every thread is done committing here.
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    CommitFixture& f = *g_commit;
    if (f.status.ok() && f.db.db) {
      const double secs = Seconds(f.t0, Clock::now());
      const DatabaseStats after = f.db.db->stats();
      const double commits = static_cast<double>(after.commits - f.before.commits);
      const double flushes =
          static_cast<double>(after.group_commit_flushes - f.before.group_commit_flushes);
      // The database's syncs (each counted once, however many commits shared it).
      const double syncs = static_cast<double>(after.pages.syncs - f.before.pages.syncs);
      CommitResult r{commits / secs, commits > 0 ? flushes / commits : 0,
                     commits > 0 ? syncs / commits : 0};
      state.counters["commits_per_s"] = r.commits_per_s;
      state.counters["flushes_per_commit"] = r.flushes_per_commit;
      state.counters["syncs_per_commit"] = r.syncs_per_commit;
      state.counters["commits"] = commits;
      SetPageCounters(state, after.pages - f.before.pages);
      g_commit_results[{state.threads(), static_cast<int>(state.range(0))}] = r;
    }
    if (absl::Status s = f.db.Drop(); !s.ok()) Failed(state, s, "core/commit close");
    g_commit.reset();
  }
}

// ---------------------------------------------------------------- summary

double MedianOf(const std::map<std::pair<int, int>, std::vector<double>>& m, Op op, Engine e) {
  auto it = m.find({static_cast<int>(op), static_cast<int>(e)});
  return it == m.end() ? 0 : Median(it->second);
}

std::string WorkOf(Op op) {
  switch (op) {
    case Op::kInsert: return absl::StrCat(Rows(), " rows/1 txn");
    case Op::kLookup: return absl::StrCat(FLAGS_lookups.i64(), " lookups");
    case Op::kUpdate:
      return absl::StrCat(FLAGS_update_txns.i64(), " txns x ", FLAGS_updates_per_txn.i64());
    case Op::kScan: return absl::StrCat(Rows(), " rows");
  }
  return "";
}

// Torn-page protection on against off for the phases that write (commit throughput is printed
// with the commit results).
void PrintDoublewriteCost(std::FILE* out) {
  bool header = false;
  for (Op op : {Op::kInsert, Op::kUpdate}) {
    const Paired p = Pair(g_dw_on_off[static_cast<int>(op)]);
    if (p.runs == 0) continue;
    if (!header) {
      std::fprintf(out, "\ntorn-page protection (doublewrite) on vs off, same work (medians):\n");
      std::fprintf(out, "%-8s %10s %10s %7s %10s %10s %10s %10s %10s\n", "op", "on s", "off s",
                   "on/off", "on cpu", "off cpu", "on writes", "dw_writes", "off writes");
      header = true;
    }
    std::fprintf(out, "%-8s %10.4f %10.4f %7.2f %10.4f %10.4f %10.0f %10.0f %10.0f\n",
                 kOpNames[static_cast<int>(op)], p.ember_s, p.other_s, p.ratio, p.ember_cpu,
                 p.other_cpu, MedianOf(g_home_writes, op, Engine::kEmber),
                 MedianOf(g_dw_writes, op, Engine::kEmber),
                 MedianOf(g_home_writes, op, Engine::kEmberNoDw));
  }
  if (header) {
    std::fprintf(out,
                 "on writes = pages written home; dw_writes = protection copies and their "
                 "record pages, written on top of them\n");
  }
}

// Syncs per commit and pages written per transaction of the write phases, every engine (SQLite's
// checkpoint at the end of the phase included, EmberDB's CollectGarbage after its updates too).
void PrintPerTransaction(std::FILE* out) {
  bool header = false;
  for (Op op : {Op::kInsert, Op::kUpdate}) {
    const int o = static_cast<int>(op);
    bool any = false;
    for (Engine e : {Engine::kEmber, Engine::kEmberNoDw, Engine::kSqlite}) {
      any |= g_syncs_per_commit.contains({o, static_cast<int>(e)});
    }
    if (!any) continue;
    if (!header) {
      std::fprintf(out, "\nper transaction, write phases (medians; SQLite journal_mode=%s):\n",
                   FLAGS_sqlite_journal.str().c_str());
      std::fprintf(out, "%-8s %6s %13s %13s %13s %13s %13s %13s\n", "op", "txns", "ember sync/c",
                   "nodw sync/c", "sqlite sync/c", "ember pw/txn", "nodw pw/txn", "sqlite pw/txn");
      header = true;
    }
    auto cell = [&](const std::map<std::pair<int, int>, std::vector<double>>& m, Engine e) {
      auto it = m.find({o, static_cast<int>(e)});
      return it == m.end() ? std::string("-") : absl::StrFormat("%.2f", Median(it->second));
    };
    std::fprintf(out, "%-8s %6lld %13s %13s %13s %13s %13s %13s\n", kOpNames[o],
                 static_cast<long long>(op == Op::kUpdate ? FLAGS_update_txns.i64() : 1),
                 cell(g_syncs_per_commit, Engine::kEmber).c_str(),
                 cell(g_syncs_per_commit, Engine::kEmberNoDw).c_str(),
                 cell(g_syncs_per_commit, Engine::kSqlite).c_str(),
                 cell(g_page_writes_per_txn, Engine::kEmber).c_str(),
                 cell(g_page_writes_per_txn, Engine::kEmberNoDw).c_str(),
                 cell(g_page_writes_per_txn, Engine::kSqlite).c_str());
  }
  if (header) {
    std::fprintf(out,
                 "sync/c: syncs of the phase per commit (EmberDB: Counters::syncs; SQLite: "
                 "xSync calls on the database and the WAL or journal); pw/txn: pages "
                 "written per transaction (EmberDB home + doublewrite copies; SQLite "
                 "page-sized writes to the database and the WAL or journal); SQLite's "
                 "checkpoint and EmberDB's CollectGarbage after its updates included\n");
  }
}

void PrintSummary() {
  std::FILE* out = SummaryStream();
  bool any = false;
  for (const Comparison& c : g_vs_sqlite) any |= Pair(c).runs > 0;
  if (any) {
    std::fprintf(out,
                 "\ncore: EmberDB vs SQLite, same work (rows=%lld, forced_writes=%s -> SQLite "
                 "synchronous=%s, journal_mode=%s, %s; %d run%s, alternating which engine goes "
                 "first)\n",
                 (long long)Rows(), FLAGS_forced_writes.str().c_str(),
                 FLAGS_forced_writes.b() ? "FULL" : "OFF", FLAGS_sqlite_journal.str().c_str(),
                 FLAGS_sqlite_rowid_pk.b() ? "SQLite id = INTEGER PRIMARY KEY"
                                           : "unique index on id in both",
                 Runs(), Runs() == 1 ? "" : "s");
    std::fprintf(out, "%-7s %-19s %10s %10s %12s %12s %6s %11s %10s %10s %6s %9s %9s\n", "op",
                 "work", "EmberDB s", "SQLite s", "EmberDB op/s", "SQLite op/s", "ratio", "(lo-hi)",
                 "EmberDB cpu", "SQLite cpu", "cpu", "EmberDB w", "SQLite w");
    Tally tally;
    for (Op op : {Op::kInsert, Op::kLookup, Op::kUpdate, Op::kScan}) {
      const Paired p = Pair(g_vs_sqlite[static_cast<int>(op)]);
      if (p.runs == 0) continue;
      const double n = static_cast<double>(
          op == Op::kInsert || op == Op::kScan ? Rows()
          : op == Op::kLookup
              ? FLAGS_lookups.i64()
              : FLAGS_update_txns.i64() * std::max<int64_t>(1, FLAGS_updates_per_txn.i64()));
      std::fprintf(out,
                   "%-7s %-19s %10.4f %10.4f %12.0f %12.0f %6.2f %11s %10.4f %10.4f %6.2f %9.0f "
                   "%9.0f\n",
                   kOpNames[static_cast<int>(op)], WorkOf(op).c_str(), p.ember_s, p.other_s,
                   p.ember_s > 0 ? n / p.ember_s : 0, p.other_s > 0 ? n / p.other_s : 0, p.ratio,
                   p.runs > 1 ? absl::StrFormat("%.2f-%.2f", p.ratio_lo, p.ratio_hi).c_str() : "",
                   p.ember_cpu, p.other_cpu, p.cpu_ratio,
                   MedianOf(g_all_writes, op, Engine::kEmber),
                   MedianOf(g_all_writes, op, Engine::kSqlite));
      tally.Add(kOpNames[static_cast<int>(op)], p);
    }
    std::fprintf(out,
                 "EmberDB s, SQLite s: median wall-clock seconds; ratio: median of the per-run "
                 "ratios EmberDB / SQLite (below 1: EmberDB faster), lo-hi their range; cpu: "
                 "EmberDB's process CPU (its collector thread included) and SQLite's thread CPU, "
                 "medians and the median ratio; w: pages written (EmberDB home + doublewrite "
                 "copies, SQLite database + journal). EmberDB's update includes collecting the "
                 "versions it left (gc_ms in its rows).\n");
    tally.Print(out, "operations");
  }
  if (AnyFailed()) {
    std::fprintf(
        out, "Some rows FAILED (see 'bench: FAILED' on stderr): they are not in the summary.\n");
  }
  PrintDoublewriteCost(out);
  PrintPerTransaction(out);
  if (!g_cache_ns.empty()) {
    std::fprintf(out, "\ncache fetch+release of resident pages:");
    for (auto [t, ns] : g_cache_ns) std::fprintf(out, "  %d thread(s) %.1f ns/fetch", t, ns);
    std::fprintf(out, "\n");
  }
  if (!g_commit_results.empty()) {
    std::fprintf(out, "commit of one-insert transactions (forced writes):\n");
    for (auto [key, r] : g_commit_results) {
      std::fprintf(out,
                   "  %2d thread(s), doublewrite %s: %8.0f commits/s, %.3f flushes per commit, "
                   "%.3f syncs per commit",
                   key.first, key.second ? "on " : "off", r.commits_per_s, r.flushes_per_commit,
                   r.syncs_per_commit);
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
  // The first engine alternates from run to run and from one operation to the next (insert and
  // scan start with EmberDB in run 0, lookup and update with SQLite). Protection off runs between
  // the two, so on and off alternate as well.
  const int salt[kOps] = {0, 1, 1, 0};
  for (Op op : {Op::kInsert, Op::kLookup, Op::kUpdate, Op::kScan}) {
    const bool writes = op == Op::kInsert || op == Op::kUpdate;
    for (int run = 0; run < Runs(); ++run) {
      std::vector<Engine> engines = {Engine::kEmber, Engine::kSqlite};
      if (writes) engines = {Engine::kEmber, Engine::kEmberNoDw, Engine::kSqlite};
      if (!EmberFirst(run, salt[static_cast<int>(op)]))
        std::reverse(engines.begin(), engines.end());
      for (Engine e : engines) {
        benchmark::RegisterBenchmark(absl::StrCat("core/", kOpNames[static_cast<int>(op)], "/run:",
                                                  run, "/", kEngineNames[static_cast<int>(e)])
                                         .c_str(),
                                     BM_Core, op, e, run)
            ->Iterations(1)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
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
  if (!CheckNoRepetitions(argc, argv) || !Init(&argc, argv)) return 1;
  benchmark::AddCustomContext("runs", FLAGS_runs.str());
  AddSqliteContext();
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
