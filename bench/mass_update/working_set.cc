// bench/mass_update, series "working_set": the first N rows of a table updated again and again
// in many small statements of one transaction, an application's loop over its working set (see
// main.cc for the patterns, rows, checks and summary).
#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/mass_update/common.h"

namespace mass_update {

eb::Flag FLAGS_working_set("working_set", "1000,10000",
                           "series working_set: rows updated, the first N of the table "
                           "(comma-separated)");
eb::Flag FLAGS_passes("passes", int64_t{10},
                      "series working_set: times each row of the working set is updated");
eb::Flag FLAGS_ws_table_rows("ws_table_rows", int64_t{100000},
                             "series working_set: rows of the table");

namespace {

using eb::Clock;
using ember::Row;
using eb::operator-;
using eb::Seconds;

// Updates between a savepoint and its release.
constexpr int64_t kSavepointEvery = 100;
// Target (c) asks for a ratio of about 1; the summary flags ratios above kAboutOne when the
// two times are more than kNoiseMs apart (a rollback without an undo log takes microseconds).
constexpr double kAboutOne = 1.5;
constexpr double kNoiseMs = 1.0;

enum class Pattern { kStatements, kSingleRow, kMass, kSavepointsRelease, kSavepointsRollback };
constexpr Pattern kPatterns[] = {Pattern::kStatements, Pattern::kSingleRow, Pattern::kMass,
                                 Pattern::kSavepointsRelease, Pattern::kSavepointsRollback};
const char* PatternName(Pattern p) {
  switch (p) {
    case Pattern::kStatements: return "statements";
    case Pattern::kSingleRow: return "single_row";
    case Pattern::kMass: return "mass";
    case Pattern::kSavepointsRelease: return "savepoints_release";
    case Pattern::kSavepointsRollback: return "savepoints_rollback";
  }
  return "?";
}
bool UsesSavepoints(Pattern p) {
  return p == Pattern::kSavepointsRelease || p == Pattern::kSavepointsRollback;
}

struct WsConfig {
  int64_t page_size;
  int64_t n;  // the working set: rows 1..n
  bool no_savepoint;
  std::string Group() const {
    return absl::StrCat("mass_update/working_set:", n, "/page_size:", page_size,
                        "/no_savepoint:", no_savepoint ? 1 : 0);
  }
  // The series' name without its end: .../pattern:P.
  std::string Name(Pattern p) const { return absl::StrCat(Group(), "/pattern:", PatternName(p)); }
};

// One series; step: -1 nothing; 0 loaded; 1 updates done; 2 ended.
struct WsSeries : TestDb {
  std::vector<int64_t> val;  // the model: VAL of row i + 1 of the working set, as updated
};
std::map<std::string, WsSeries> g_ws;  // by series name + end
std::vector<WsConfig> g_ws_configs;    // every configuration registered

int64_t Passes() { return FLAGS_passes.i64(); }
int64_t TableRows() { return FLAGS_ws_table_rows.i64(); }

absl::Status Load(const WsConfig& c, WsSeries* s) {
  if (absl::Status st = LoadTable(c.page_size, TableRows(), true, c.no_savepoint, c.n, s);
      !st.ok()) {
    return st;
  }
  s->val.resize(static_cast<size_t>(c.n));
  for (int64_t i = 0; i < c.n; ++i) s->val[static_cast<size_t>(i)] = LoadedVal(i + 1);
  return absl::OkStatus();
}

// The working-set rows (0-based) the single-row statements update, in order: every row once a
// pass, each pass in its own random order (the same for both series of a configuration); for
// single_row, row 1 as many times. Empty for mass.
std::vector<int32_t> UpdateOrder(const WsConfig& c, Pattern p) {
  std::vector<int32_t> order;
  if (p == Pattern::kMass) return order;
  if (p == Pattern::kSingleRow) return std::vector<int32_t>(static_cast<size_t>(c.n * Passes()));
  std::vector<int32_t> pass(static_cast<size_t>(c.n));
  std::iota(pass.begin(), pass.end(), 0);
  std::mt19937_64 rng(static_cast<uint64_t>(c.n));
  for (int64_t k = 0; k < Passes(); ++k) {
    std::shuffle(pass.begin(), pass.end(), rng);
    order.insert(order.end(), pass.begin(), pass.end());
  }
  return order;
}

// The pattern's updates (every one `val = val + 1`, so the VAL index key changes), keeping the
// model in step: mass runs Passes() statements over rows 1..n in order; the others run one
// statement (Transaction::Update) per entry of `order`, the savepoint patterns with a savepoint
// "sp" every kSavepointEvery updates, released after the last of them (savepoints_rollback
// first rolls every other block back).
absl::Status RunUpdates(const WsConfig& c, Pattern p, const std::vector<int32_t>& order,
                        WsSeries* s) {
  Row row(2);
  auto update = [&](int32_t i) -> absl::Status {
    row[0] = int64_t{i} + 1;
    row[1] = s->val[static_cast<size_t>(i)] + 1;
    absl::Status st = s->tx->Update(s->table, s->ids[static_cast<size_t>(i)], row);
    if (st.ok()) ++s->val[static_cast<size_t>(i)];
    return st;
  };
  if (p == Pattern::kMass) {
    for (int64_t k = 0; k < Passes(); ++k) {
      absl::Status st = s->tx->RunStatement([&]() -> absl::Status {
        for (int32_t i = 0; i < c.n; ++i) {
          if (absl::Status u = update(i); !u.ok()) return u;
        }
        return absl::OkStatus();
      });
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  }
  const bool savepoints = UsesSavepoints(p);
  std::vector<int32_t> block;  // the rows updated since the savepoint, in order
  block.reserve(kSavepointEvery);
  const size_t every = static_cast<size_t>(kSavepointEvery);
  for (size_t k = 0; k < order.size(); ++k) {
    if (savepoints && k % every == 0) {
      if (absl::Status st = s->tx->Savepoint("sp"); !st.ok()) return st;
      block.clear();
    }
    if (absl::Status st = update(order[k]); !st.ok()) return st;
    if (!savepoints) continue;
    block.push_back(order[k]);
    if ((k + 1) % every != 0 && k + 1 != order.size()) continue;
    if (p == Pattern::kSavepointsRollback && (k / every) % 2 == 1) {
      if (absl::Status st = s->tx->RollbackToSavepoint("sp"); !st.ok()) return st;
      for (int32_t i : block) --s->val[static_cast<size_t>(i)];
    }
    if (absl::Status st = s->tx->ReleaseSavepoint("sp"); !st.ok()) return st;
  }
  return absl::OkStatus();
}

// Working-set rows whose VAL the model has changed.
int64_t RowsChanged(const WsSeries& s) {
  int64_t n = 0;
  for (size_t i = 0; i < s.val.size(); ++i) n += s.val[i] != LoadedVal(int64_t(i) + 1) ? 1 : 0;
  return n;
}

// After the end (untimed): every row must read as the model says (after a rollback, as
// loaded), and the database must validate (after an undo, with just the loaded index keys).
absl::Status CheckEnd(const WsConfig& c, bool commit, const WsSeries& s) {
  if (!commit && RowsChanged(s) == 0) {
    return absl::InternalError(
        "the updates changed no row: the check cannot tell a rollback "
        "from a rollback that undid nothing");
  }
  absl::Status st = CheckRows(s.db.get(), s.table, TableRows(), [&](int64_t id) {
    return commit && id <= c.n ? s.val[static_cast<size_t>(id - 1)] : LoadedVal(id);
  });
  if (!st.ok()) return st;
  return CheckIndexes(s.db.get(), TableRows(), true, /*undone=*/!commit && !c.no_savepoint);
}

// One row: the updates (end false) or the transaction's end.
void Phase(benchmark::State& state, const WsConfig& c, Pattern p, bool commit, bool end) {
  WsSeries& s = g_ws[absl::StrCat(c.Name(p), commit ? "/end:commit" : "/end:rollback")];
  const std::vector<int32_t> order = UpdateOrder(c, p);
  const int64_t updates = c.n * Passes();
  const char* what = !end ? "updates" : commit ? "commit" : "rollback";
  for (auto _ : state) {
    if (s.step != (end ? 1 : 0)) {  // bring the series to this phase, untimed
      absl::Status st = Load(c, &s);
      if (st.ok() && end) st = RunUpdates(c, p, order, &s);
      if (eb::Failed(state, st, "prepare")) return;
    }
    s.step = -1;  // until the phase succeeds
    const ember::Counters before = s.db->stats().pages;
    const auto t0 = Clock::now();
    absl::Status st = !end     ? RunUpdates(c, p, order, &s)
                      : commit ? s.tx->Commit()
                               : s.tx->Rollback();
    const double secs = Seconds(t0, Clock::now());
    if (eb::Failed(state, st, what)) return;
    state.SetIterationTime(secs);
    eb::SetPageCounters(state, s.db->stats().pages - before);
    state.counters["rows_changed"] = static_cast<double>(RowsChanged(s));
    if (!end) {
      s.step = 1;
      state.counters["updates"] = static_cast<double>(updates);
      state.counters["us_per_update"] = secs * 1e6 / static_cast<double>(updates);
      state.counters["tx_writes"] = static_cast<double>(s.tx->counters().writes);
      state.counters["undo_peak_mb"] =
          static_cast<double>(s.tx->undo_stats().peak_memory_bytes) / (1 << 20);
      state.counters["db_pages"] = static_cast<double>(s.db->stats().page_count);
      continue;
    }
    s.tx.reset();
    st = CheckEnd(c, commit, s);
    DropDb(&s);
    if (eb::Failed(state, st, absl::StrCat("check after the ", what))) return;
  }
}

// A counter of the pattern's updates rows: the mean of its two series' (rollback and commit),
// or with `larger` the larger; -1 when neither ran.
double UpdatesCounter(const WsConfig& c, Pattern p, const char* counter, bool larger = false) {
  double sum = 0, max = -1;
  int n = 0;
  for (const char* end : {"rollback", "commit"}) {
    const double v = CounterOf(absl::StrCat(c.Name(p), "/end:", end, "/updates"), counter);
    if (v < 0) continue;
    sum += v;
    max = std::max(max, v);
    ++n;
  }
  return n == 0 ? -1.0 : larger ? max : sum / n;
}
// The size of the database after the updates (the largest of the patterns'), or -1.
double DbPages(const WsConfig& c) {
  double pages = -1;
  for (Pattern p : kPatterns) pages = std::max(pages, UpdatesCounter(c, p, "db_pages", true));
  return pages;
}
// The pattern's commit or rollback row.
std::string EndRow(const WsConfig& c, Pattern p, bool commit) {
  return absl::StrCat(c.Name(p), commit ? "/end:commit/commit" : "/end:rollback/rollback");
}
// Milliseconds of the pattern's commit or rollback, or -1.
double EndMs(const WsConfig& c, Pattern p, bool commit) {
  const double t = Time(EndRow(c, p, commit));
  return t < 0 ? t : t * 1e3;
}
// The page work of the ends of statements and mass, for a line on target (c).
std::string EndWork(const WsConfig& c, bool commit) {
  double v[2][3];  // [statements, mass][written, cycle_writes, fetches]
  for (int i = 0; i < 2; ++i) {
    const std::string row = EndRow(c, i == 0 ? Pattern::kStatements : Pattern::kMass, commit);
    v[i][0] = CounterOf(row, "writes") + CounterOf(row, "dw_writes");
    v[i][1] = CounterOf(row, "cycle_writes");
    v[i][2] = CounterOf(row, "fetches");
  }
  const bool same = v[0][0] <= v[1][0] && v[0][2] <= v[1][2] * 1.1;
  return absl::StrFormat(
      "pages written %.0f against %.0f (cycle_writes %.0f against %.0f), "
      "fetched %.0f against %.0f%s",
      v[0][0], v[1][0], v[0][1], v[1][1], v[0][2], v[1][2],
      same ? ": no more page work, timing noise?" : "");
}
std::string ConfigCells(const WsConfig& c) {
  return absl::StrFormat("%9d %11d %12d", c.page_size, c.n, c.no_savepoint ? 1 : 0);
}
constexpr const char* kConfigHeader = "page_size working_set no_savepoint";

// The first table: one line per configuration and pattern that ran. Adds what target (b) must
// say to `writes_notes`.
std::string PatternLines(std::string* writes_notes) {
  std::string lines;
  for (const WsConfig& c : g_ws_configs) {
    const double db_pages = DbPages(c);
    for (Pattern p : kPatterns) {
      const double us = UpdatesCounter(c, p, "us_per_update");
      const double w = UpdatesCounter(c, p, "writes", true);
      const double dw = UpdatesCounter(c, p, "dw_writes", true);
      const double cw = UpdatesCounter(c, p, "cycle_writes", true);
      const double commit = EndMs(c, p, true), rollback = EndMs(c, p, false);
      if (us < 0 && commit < 0 && rollback < 0) continue;
      absl::StrAppendFormat(&lines, "%s %-19s %9s %8s %9s %12s %9s %11s\n", ConfigCells(c),
                            PatternName(p), Cell(us, 2), Cell(w, 0), Cell(dw, 0), Cell(cw, 0),
                            Cell(commit, 2), Cell(rollback, 2));
      if (w > 0 || dw > 0) {
        absl::StrAppendFormat(
            writes_notes,
            "  %s/pattern:%s: %.0f writes (%.0f of them cycle_writes), %.0f "
            "dw_writes%s\n",
            c.Group(), PatternName(p), w, cw, dw,
            db_pages > static_cast<double>(eb::FLAGS_cache_pages.i64())
                ? absl::StrFormat(" (the database, %.0f pages, is larger than the cache: they "
                                  "may be evictions)",
                                  db_pages)
                : std::string(" while the whole database fits in the cache"));
      }
    }
  }
  return lines;
}

}  // namespace

void PrintWorkingSetSummary() {
  std::string writes_notes;
  const std::string lines = PatternLines(&writes_notes);
  if (lines.empty()) return;  // nothing of this series ran (a filter, --benchmark_list_tests)
  std::FILE* out = eb::SummaryStream();
  const int64_t cache_pages = eb::FLAGS_cache_pages.i64();
  std::fprintf(out,
               "\nSummary of the working set: the first working_set rows of a %lld-row table "
               "(index on VAL) updated\n%lld times each in one transaction, val = val + 1, then "
               "rollback or commit; %lld cache pages.\nstatements: each update a statement, "
               "each pass in random order; single_row: as many single-row\nstatements, all on "
               "row 1; mass: one statement per pass over the working set; savepoints_release:\n"
               "as statements, with a savepoint every %lld updates, released; "
               "savepoints_rollback: the same,\nevery other block rolled back to its savepoint "
               "first. us/update: the mean of the end:rollback and\nend:commit series; writes "
               "before commit: pages written during the updates (the larger of the two\n"
               "series); commit_ms, rollback_ms: milliseconds of the transaction's end.\n",
               static_cast<long long>(TableRows()), static_cast<long long>(Passes()),
               static_cast<long long>(cache_pages), static_cast<long long>(kSavepointEvery));
  std::fprintf(out, "%*s %s\n%s %-19s %9s %8s %9s %12s %9s %11s\n%s",
               static_cast<int>(std::string_view(kConfigHeader).size()) + 30, "",
               "------ writes before commit -----", kConfigHeader, "pattern", "us/update", "writes",
               "dw_writes", "cycle_writes", "commit_ms", "rollback_ms", lines.c_str());
  std::string targets, missed;
  bool any_updates = false;  // an updates row ran: the writes before commit were measured
  for (const WsConfig& c : g_ws_configs) {
    const double stmt = UpdatesCounter(c, Pattern::kStatements, "us_per_update");
    const double single = UpdatesCounter(c, Pattern::kSingleRow, "us_per_update");
    const double db_pages = DbPages(c);
    const double commit_writes = CounterOf(EndRow(c, Pattern::kStatements, true), "writes");
    double w = -1, cw = -1;
    for (Pattern p : kPatterns) {
      const double pw = UpdatesCounter(c, p, "writes", true);
      const double pd = UpdatesCounter(c, p, "dw_writes", true);
      const double pc = UpdatesCounter(c, p, "cycle_writes", true);
      if (pw >= 0) w = std::max(w, 0.0) + pw + pd;
      if (pc >= 0) cw = std::max(cw, 0.0) + pc;
    }
    double ratios[3] = {stmt > 0 && single > 0 ? stmt / single : -1, -1, -1};
    double ms[3][2] = {};  // [k][statements, mass]
    for (int k = 1; k <= 2; ++k) {
      ms[k][0] = EndMs(c, Pattern::kStatements, k == 1);
      ms[k][1] = EndMs(c, Pattern::kMass, k == 1);
      if (ms[k][0] > 0 && ms[k][1] > 0) ratios[k] = ms[k][0] / ms[k][1];
    }
    if (w < 0 && ratios[1] < 0 && ratios[2] < 0) continue;
    any_updates |= w >= 0;
    absl::StrAppendFormat(&targets, "%s %8s %13s %15s %10s %12s %10s %12s\n", ConfigCells(c),
                          Cell(db_pages, 0), Cell(commit_writes, 0), Cell(ratios[0], 2), Cell(w, 0),
                          Cell(cw, 0), Cell(ratios[1], 2), Cell(ratios[2], 2));
    if (ratios[0] > 2) {
      absl::StrAppendFormat(&missed, "  (a) %s: statements cost %.2fx single_row per update\n",
                            c.Group(), ratios[0]);
    }
    for (int k = 1; k <= 2; ++k) {
      if (ratios[k] > kAboutOne && ms[k][0] - ms[k][1] > kNoiseMs) {
        absl::StrAppendFormat(&missed,
                              "  (c) %s: the %s of statements took %.2fx that of "
                              "mass (%.2f ms against %.2f); %s\n",
                              c.Group(), k == 1 ? "commit" : "rollback", ratios[k], ms[k][0],
                              ms[k][1], EndWork(c, k == 1));
      }
    }
  }
  if (targets.empty()) return;
  std::fprintf(out,
               "\nTargets: (a) statements / single_row, us per update: at most 2. (b) no page "
               "written before commit\nwhile the transaction's pages fit in the cache: (b) "
               "writes (home and doublewrite) and cycle_writes,\nall patterns, during the "
               "updates. The pages fit surely when db_pages <= %lld (the cache);\n"
               "commit_writes, the pages the commit of statements wrote, are the transaction's "
               "dirty pages.\n(c) statements / mass, time of the commit and of the rollback: "
               "about 1 (flagged over %.1f when\nmore than %.0f ms apart).\n",
               static_cast<long long>(cache_pages), kAboutOne, kNoiseMs);
  std::fprintf(out, "%s %8s %13s %15s %10s %12s %10s %12s\n%s", kConfigHeader, "db_pages",
               "commit_writes", "(a) stmt/single", "(b) writes", "cycle_writes", "(c) commit",
               "(c) rollback", targets.c_str());
  if (!writes_notes.empty()) {
    std::fprintf(out, "PAGES WERE WRITTEN BEFORE COMMIT OR ROLLBACK (target (b)):\n%s",
                 writes_notes.c_str());
  } else if (any_updates) {
    std::fprintf(out, "No page was written before commit or rollback in any pattern.\n");
  }
  if (missed.empty()) {
    std::fprintf(out, "Targets (a) and (c) met wherever they could be measured.\n");
  } else {
    std::fprintf(out, "Targets missed:\n%s", missed.c_str());
  }
}

bool SetUpWorkingSet(const std::vector<int64_t>& page_sizes,
                     const std::vector<int64_t>& no_savepoint) {
  std::vector<int64_t> sizes;
  if (!ParseList(FLAGS_working_set, &sizes)) return false;
  for (int64_t n : sizes) {
    if (n < 1 || n > TableRows()) {
      std::fprintf(stderr, "mass_update: --working_set=%lld: must be 1..--ws_table_rows (%lld)\n",
                   static_cast<long long>(n), static_cast<long long>(TableRows()));
      return false;
    }
  }
  if (Passes() < 1) {
    std::fprintf(stderr, "mass_update: --passes must be at least 1\n");
    return false;
  }
  for (int64_t ps : page_sizes) {
    for (int64_t n : sizes) {
      for (int64_t nsp : no_savepoint) g_ws_configs.push_back(WsConfig{ps, n, nsp != 0});
    }
  }
  for (const WsConfig& c : g_ws_configs) {
    for (Pattern p : kPatterns) {
      if (c.no_savepoint && UsesSavepoints(p)) continue;  // no savepoints without an undo log
      for (bool commit : {false, true}) {
        const std::string base =
            absl::StrCat(c.Name(p), commit ? "/end:commit/" : "/end:rollback/");
        AddRow(base + "updates",
               [c, p, commit](benchmark::State& st) { Phase(st, c, p, commit, false); });
        AddRow(base + (commit ? "commit" : "rollback"),
               [c, p, commit](benchmark::State& st) { Phase(st, c, p, commit, true); });
      }
    }
  }
  return true;
}

void DropWorkingSet() {
  for (auto& [k, s] : g_ws) DropDb(&s);
}

}  // namespace mass_update
