// bench/mass_update: rows updated again and again in ONE transaction. Two series
// (--series=statements,working_set; both by default):
// - statements: four mass-update statements over a whole table, as in the iBase test lab's
//   2004 mass-UPDATE article (Firebird 1.0 and 1.5, Yaffil, InterBase 7.0 and 7.1). There, with
//   100K rows, Firebird 1.5 and Yaffil ran updates 3 and 4 in about 2.5 s each, while InterBase
//   7.0 took 30 times as long, Firebird 1.0 500 times and InterBase 7.1 750 times: the undo log
//   of the statement savepoints did not scale once more than about 10,000 rows were updated
//   more than once in a transaction. EmberDB keeps one undo entry per record per savepoint
//   (bitmaps over record-number chunks plus the before-images), so every update should cost
//   the same as the first.
// - working_set: the first N rows of a table updated in MANY SMALL STATEMENTS, an application's
//   loop over its working set: each update should cost about what updating one row over and
//   over costs, write nothing before the commit, and leave a transaction as cheap to end as
//   one mass update over the same rows.
//
//   tools/dev bench mass_update [--series=statements,working_set] [--page_sizes=4096,8192]
//       [--no_savepoint=0|1|0,1] [--cache_pages=2048] [--forced_writes=0|1]
//       [--rows=10000,100000,1000000] [--index=1|0|0,1]                  (series statements)
//       [--working_set=1000,10000] [--passes=10] [--ws_table_rows=100000]  (series working_set)
//       [--benchmark_format=json ...]
//
// Both series use the table TST(ID int64 primary key, VAL int64), VAL of row ID loaded as ID *
// 7 mod 1000003, 2048 cache pages (the article's setup). Every configuration runs at each page
// size of --page_sizes: 4096 is the article's, 8192 the one the Firebird 3.0 reference figures
// were measured at (--page_size, the other benchmarks' flag, is refused here). Phases are rows
// of their own, run in order, each reporting seconds (manual time) and the page counters of the
// phase from the database's stats (fetches, marks, reads, writes, dw_writes, cycle_writes); a
// phase whose predecessors did not run (a filter, repetitions) first brings its series to the
// right point untimed. A failed check fails its row, and the binary exits non-zero.
//
// Series statements: with an index on VAL (--index=1) and `update tst set val = val + 0` four
// times in ONE transaction. Per configuration, two series, each on a fresh database filled with
// --rows rows and committed (not timed), then the four updates (each a RunStatement over a
// table scan updating every row):
//   .../series:rollback/update/1..4, .../series:rollback/rollback
//   .../series:commit/update/1..4,   .../series:commit/commit,
//   .../series:commit/gc             a new transaction counts the rows; the scan collects the
//                                    garbage the updates left (cooperative GC), timed
// Row names: mass_update/page_size:P/rows:N/index:0|1/no_savepoint:0|1/series:S/PHASE.
// Update rows add undo_peak_mb (undo log peak, memory) and undo_records; the gc row adds
// gc_versions (versions removed).
// Checks: every update changes every row and the gc row counts them all. The rollback is
// checked twice:
// - Before any benchmark, untimed, on 2,000 rows for every page size / index / no_savepoint
//   combination, the same load and update code with `val = val + 1` (a failure here stops the
//   binary): after four updates and a rollback every row must hold its loaded value, the table
//   statistics must be as below, and (with the undo log) Validate must count only the loaded
//   index keys; after four updates and a commit every row must hold its loaded value plus 4.
//   This is what can tell a rollback from a commit or from a rollback that undid nothing: the
//   article's `val + 0` leaves every value as it was.
// - In the timed rollback series (val + 0), from the table statistics, read before any scan
//   collects garbage: with the undo log the rollback must leave no back version and no dead
//   version behind; without it (no_savepoint:1) the transaction is marked dead and its version
//   of every row stays, dead, until garbage collection. A commit in place of the rollback leaves
//   back versions and no dead ones, so both cases notice it. Then every row must read as
//   loaded. The row reports back_versions_left and dead_versions_left.
//
// Series working_set: the table with its index on VAL and --ws_table_rows rows, of which the
// working set is rows 1..N, for each N of --working_set; each row of it is updated --passes
// times in one transaction, every update `val = val + 1` (so the VAL index key changes each
// time). Patterns, per page size, N and no_savepoint:
//   statements           each update a statement of its own (Transaction::Update), every row of
//                        the working set once per pass, each pass in its own random order (the
//                        same in both series of a configuration)
//   single_row           as many single-row statements (N x passes), all on row 1: one row
//                        updated over and over, the baseline of target (a)
//   mass                 --passes statements, each a RunStatement updating rows 1..N in order:
//                        the mass update over the same distinct rows, the baseline of (c)
//   savepoints_release   as statements, with Savepoint("sp") before every 100 updates and
//                        ReleaseSavepoint after the 100th (no_savepoint:0 only)
//   savepoints_rollback  the same, every other block of 100 rolled back (RollbackToSavepoint)
//                        before its release (no_savepoint:0 only)
// Per pattern two series, each on a fresh database loaded and committed (not timed):
//   .../end:rollback/updates, .../end:rollback/rollback
//   .../end:commit/updates,   .../end:commit/commit
// Row names: mass_update/working_set:N/page_size:P/no_savepoint:0|1/pattern:X/end:E/PHASE.
// The updates rows (all passes) add us_per_update, updates (N x passes in every pattern),
// tx_writes (the transaction's own counters().writes), undo_peak_mb, db_pages (the database's
// size) and rows_changed (working-set rows whose VAL differs from the loaded one); their writes
// are writes before commit, reported and never a failure.
// Checks, untimed after the end: the benchmark keeps the value each working-set row must hold
// (a savepoint rollback restores its block's values). After a commit every row, read in a new
// transaction, must hold it, and the rows outside the working set their loaded values; after a
// rollback every row its loaded value, and the updates must have changed some row (so a
// rollback that undid nothing is noticed). Then Validate: with the undo log, a rollback must
// leave just the loaded index keys.
// Targets, each a ratio in the summary: (a) per update, statements at most 2x single_row;
// (b) no page written before commit while the transaction's pages fit in the cache; (c) the
// commit and the rollback of statements as cheap as those of mass.
//
// At the end, a summary per series that ran. statements: one line per configuration and
// series, 1M against 100K rows per update, no_savepoint against the undo log, and the Firebird
// 3.0 reference at page size 8192. working_set: per page size, N and no_savepoint, each
// pattern's us per update, writes before commit and end times, then the targets' ratios, what
// was written before commit (said plainly when anything was) and the targets missed.
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/mass_update/common.h"

namespace mass_update {

eb::Flag FLAGS_page_sizes("page_sizes", "4096,8192",
                          "page sizes, each configuration runs at every one (4096: the 2004 "
                          "article's; 8192: the Firebird 3.0 reference figures')");
eb::Flag FLAGS_no_savepoint("no_savepoint", "0,1", "undo log off: 0, 1 or 0,1");
eb::Flag FLAGS_series("series", "statements,working_set",
                      "the series that run: statements (the four mass-update statements), "
                      "working_set (rows updated in many small statements), or both");

int Main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--page_size" || arg.starts_with("--page_size=")) {
      std::fprintf(stderr,
                   "mass_update: runs every configuration at each of --page_sizes "
                   "(default 4096,8192); use --page_sizes=N instead of --page_size\n");
      return 1;
    }
  }
  if (!eb::Init(&argc, argv)) return 1;
  std::vector<int64_t> page_sizes, no_savepoint;
  if (!ParseList(FLAGS_page_sizes, &page_sizes) || !ParseList(FLAGS_no_savepoint, &no_savepoint)) {
    return 1;
  }
  for (int64_t ps : page_sizes) {
    if (ps < 4096 || ps > 32768 || (ps & (ps - 1)) != 0) {
      std::fprintf(stderr, "mass_update: page size %lld: must be a power of two in 4096..32768\n",
                   static_cast<long long>(ps));
      return 1;
    }
  }
  benchmark::AddCustomContext(
      "page_sizes", absl::StrCat(FLAGS_page_sizes.str(),
                                 " (mass_update: each row's name gives its page size; the "
                                 "page_size and cache_bytes lines do not apply)"));
  bool statements = false, working_set = false;
  for (absl::string_view v : absl::StrSplit(FLAGS_series.str(), ',', absl::SkipWhitespace())) {
    if (v == "statements") {
      statements = true;
    } else if (v == "working_set") {
      working_set = true;
    } else {
      std::fprintf(stderr, "mass_update: --series=%s: '%s' is not statements or working_set\n",
                   FLAGS_series.str().c_str(), std::string(v).c_str());
      return 1;
    }
  }
  if (!statements && !working_set) {
    std::fprintf(stderr, "mass_update: --series names no series\n");
    return 1;
  }
  auto drop_all = [] {
    DropStatements();
    DropWorkingSet();
    eb::Finish();
  };
  if ((statements && !SetUpStatements(page_sizes, no_savepoint)) ||
      (working_set && !SetUpWorkingSet(page_sizes, no_savepoint))) {
    drop_all();
    return 1;
  }
  std::unique_ptr<benchmark::BenchmarkReporter> display(benchmark::CreateDefaultDisplayReporter());
  ResultReporter reporter(display.get());
  benchmark::RunSpecifiedBenchmarks(&reporter);
  PrintStatementsSummary();
  PrintWorkingSetSummary();
  drop_all();
  return eb::AnyFailed() ? 1 : 0;
}

}  // namespace mass_update

int main(int argc, char** argv) { return mass_update::Main(argc, argv); }
