// bench/mass_update: the 2004 mass-UPDATE experiment (../shared/design/experiments.md §2;
// ../shared/seeds/mass-update-2004.ru.txt). InterBase 7.x and Firebird 1.0 slowed down 30x to
// 750x when the same rows were updated several times in ONE transaction, because the undo log of
// the statement savepoints did not scale. EmberDB keeps one undo entry per record per savepoint
// (bitmaps over record-number chunks plus the before-images), so every run should cost the same.
//
//   tools/dev bench mass_update [--rows=10000,100000,1000000] [--index=1|0]
//                               [--no_savepoint=0,1] [--page_size=4096] [--cache_pages=2048]
//                               [--forced_writes=0|1] [--benchmark_format=json ...]
//
// Table TST(ID int64 primary key (unique index), VAL int64) with an index on VAL (--index=1),
// filled with --rows rows and committed (not timed). Then, in ONE transaction, four statements
// `update tst set val = val + 0` (each a RunStatement over a table scan updating every row),
// then the end of the transaction. Two series per configuration, each on a fresh database:
//   .../series:rollback/update/1..4, .../series:rollback/rollback
//   .../series:commit/update/1..4,   .../series:commit/commit,
//   .../series:commit/gc             a new transaction counts the rows; the scan collects the
//                                    garbage the updates left (cooperative GC), timed
// Configuration in the row name: mass_update/rows:N/index:0|1/no_savepoint:0|1/...
// Every row reports seconds (manual time) and the page counters of the phase (fetches, marks,
// reads, writes); update rows add undo_peak_mb (undo log peak, memory) and undo_records; the gc
// row adds gc_versions (versions removed). Each row checks its result (rows updated / counted,
// values unchanged after the rollback) and fails on a wrong answer.
//
// Phases are rows of their own, run in order; a phase whose predecessors did not run (a filter,
// repetitions) first brings its series to the right point untimed.
//
// At the end: a table per configuration (update/k time, update/k / update/1), the 1M / 100K
// ratio per update, no_savepoint against savepoints, and the Firebird 3.0 figures the issue
// gives (2 cores, page size 8192, 2048 cache pages, index on VAL) as a ratio.
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/util/bench_util.h"
#include "ember/ember.h"

namespace eb = ember::bench;

eb::Flag FLAGS_rows("rows", "10000,100000,1000000", "table sizes (comma-separated)");
eb::Flag FLAGS_index("index", "1", "index on VAL: 1, 0 or 0,1");
eb::Flag FLAGS_no_savepoint("no_savepoint", "0,1", "undo log off: 0, 1 or 0,1");

namespace {

using ember::Row;
using ember::bench::Clock;
using ember::bench::operator-;
using ember::bench::Seconds;

struct Config {
  int64_t rows;
  bool index;
  bool no_savepoint;
  std::string Name() const {
    return absl::StrCat("mass_update/rows:", rows, "/index:", index ? 1 : 0,
                        "/no_savepoint:", no_savepoint ? 1 : 0);
  }
};

// One series: a database, its table, the open transaction and how far it got.
struct Series {
  std::string path;
  std::unique_ptr<ember::Database> db;
  ember::Table table;
  std::unique_ptr<ember::Transaction> tx;
  int step = -1;  // -1 nothing; 0 loaded; 1..4 updates done; 5 ended; 6 gc done
};
std::map<std::string, Series> g_series;  // by config name + series

absl::Status Load(const Config& c, Series* s) {
  s->tx.reset();
  if (s->db) (void)s->db->Close();
  s->db.reset();
  if (!s->path.empty()) eb::RemoveDbFiles(s->path);
  s->path = eb::NewDbPath("mass_update");
  ember::Options o = eb::DefaultOptions();
  o.create_if_missing = true;
  o.gc_policy = ember::GcPolicy::kCooperative;  // the gc row measures the reader's collection
  absl::StatusOr<std::unique_ptr<ember::Database>> db = ember::Database::Open(s->path, o);
  if (!db.ok()) return db.status();
  s->db = std::move(*db);
  ember::TableSchema ts{"TST", {{"ID", ember::ColumnType::kInt64, false},
                                {"VAL", ember::ColumnType::kInt64, false}}};
  absl::StatusOr<ember::Table> t = s->db->CreateTable(ts);
  if (!t.ok()) return t.status();
  s->table = *t;
  if (auto ix = s->db->CreateIndex({"TST_PK", "TST", {"ID"}, true}); !ix.ok()) return ix.status();
  if (c.index) {
    if (auto ix = s->db->CreateIndex({"TST_VAL", "TST", {"VAL"}, false}); !ix.ok()) {
      return ix.status();
    }
  }
  absl::StatusOr<std::unique_ptr<ember::Transaction>> tx = s->db->Begin();
  if (!tx.ok()) return tx.status();
  for (int64_t i = 1; i <= c.rows; ++i) {
    if (auto r = (*tx)->Insert(s->table, Row{i, i * 7 % 1000003}); !r.ok()) return r.status();
  }
  if (absl::Status st = (*tx)->Commit(); !st.ok()) return st;
  ember::TransactionOptions to;
  to.no_savepoint = c.no_savepoint;
  tx = s->db->Begin(to);
  if (!tx.ok()) return tx.status();
  s->tx = std::move(*tx);
  s->step = 0;
  return absl::OkStatus();
}

// `update tst set val = val + 0` as one statement; returns the rows updated.
absl::StatusOr<int64_t> UpdateAll(Series* s) {
  int64_t n = 0;
  absl::Status st = s->tx->RunStatement([&]() -> absl::Status {
    absl::StatusOr<std::unique_ptr<ember::Cursor>> c = s->tx->Scan(s->table);
    if (!c.ok()) return c.status();
    Row row(2);
    for (; (*c)->Valid(); ) {
      const Row& r = (*c)->row();
      row[0] = r[0];
      row[1] = std::get<int64_t>(r[1]) + 0;
      if (absl::Status u = s->tx->Update(s->table, (*c)->id(), row); !u.ok()) return u;
      ++n;
      if (absl::Status u = (*c)->Next(); !u.ok()) return u;
    }
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  return n;
}

absl::StatusOr<int64_t> CountRows(ember::Database* db, const ember::Table& t, bool check_values) {
  absl::StatusOr<std::unique_ptr<ember::Transaction>> tx = db->Begin();
  if (!tx.ok()) return tx.status();
  absl::StatusOr<std::unique_ptr<ember::Cursor>> c = (*tx)->Scan(t);
  if (!c.ok()) return c.status();
  int64_t n = 0;
  for (; (*c)->Valid(); ++n) {
    if (check_values) {
      const int64_t id = std::get<int64_t>((*c)->row()[0]);
      if (std::get<int64_t>((*c)->row()[1]) != id * 7 % 1000003) {
        return absl::InternalError(absl::StrCat("row ", id, " has a wrong VAL"));
      }
    }
    if (absl::Status s = (*c)->Next(); !s.ok()) return s;
  }
  if (absl::Status s = (*tx)->Commit(); !s.ok()) return s;
  return n;
}

// Brings the series to `step` (untimed) if it is not there.
absl::Status Reach(const Config& c, Series* s, int step) {
  if (s->step > step || s->step < 0) {
    if (absl::Status st = Load(c, s); !st.ok()) return st;
  }
  while (s->step < step) {
    if (s->step >= 4) return absl::InternalError("cannot reach that step");
    absl::StatusOr<int64_t> n = UpdateAll(s);
    if (!n.ok()) return n.status();
    ++s->step;
  }
  return absl::OkStatus();
}

void Phase(benchmark::State& state, Config c, bool commit_series, std::string phase) {
  const std::string key = c.Name() + (commit_series ? "/commit" : "/rollback");
  Series& s = g_series[key];
  for (auto _ : state) {
    int need;
    if (phase.rfind("update/", 0) == 0) need = phase.back() - '1';
    else if (phase == "gc") need = 5;
    else need = 4;
    if (phase == "gc" && s.step != 5) {
      if (eb::Failed(state, Reach(c, &s, 4), "prepare")) return;
      if (eb::Failed(state, s.tx->Commit(), "commit")) return;
      s.step = 5;
    }
    if (phase != "gc" && eb::Failed(state, Reach(c, &s, need), "prepare")) return;
    const ember::Counters before = s.db->stats().pages;
    const uint64_t gc_before = s.db->stats().gc_versions_removed;
    const uint64_t faults_before = eb::MinorFaults();
    const auto t0 = Clock::now();
    absl::Status st;
    int64_t n = -1;
    if (phase.rfind("update/", 0) == 0) {
      absl::StatusOr<int64_t> r = UpdateAll(&s);
      st = r.status();
      if (r.ok()) n = *r;
    } else if (phase == "rollback") {
      st = s.tx->Rollback();
    } else if (phase == "commit") {
      st = s.tx->Commit();
    } else {
      absl::StatusOr<int64_t> r = CountRows(s.db.get(), s.table, false);
      st = r.status();
      if (r.ok()) n = *r;
    }
    const double secs = Seconds(t0, Clock::now());
    if (eb::Failed(state, st, phase)) return;
    state.SetIterationTime(secs);
    state.counters["minor_faults"] = static_cast<double>(eb::MinorFaults() - faults_before);
    eb::SetPageCounters(state, s.db->stats().pages - before);
    if (phase.rfind("update/", 0) == 0) {
      ++s.step;
      if (n != c.rows) {
        eb::Failed(state, absl::InternalError(absl::StrCat("updated ", n, " rows")), phase);
        return;
      }
      const ember::UndoLogStats u = s.tx->undo_stats();
      state.counters["undo_peak_mb"] = static_cast<double>(u.peak_memory_bytes) / (1 << 20);
      state.counters["undo_records"] = static_cast<double>(u.records);
      state.counters["undo_spilled_mb"] = static_cast<double>(u.peak_spilled_bytes) / (1 << 20);
    } else if (phase == "rollback" || phase == "commit") {
      s.step = 5;
      s.tx.reset();
      if (phase == "rollback") {
        // Every row must be back (the values never changed, but the versions must be gone).
        absl::StatusOr<int64_t> cnt = CountRows(s.db.get(), s.table, true);
        if (eb::Failed(state, cnt.status(), "count after rollback")) return;
        if (*cnt != c.rows) {
          eb::Failed(state, absl::InternalError("rows lost by the rollback"), phase);
          return;
        }
        absl::StatusOr<ember::TableStats> ts = s.db->GetTableStats(s.table);
        if (eb::Failed(state, ts.status(), "table stats")) return;
        state.counters["back_versions_left"] = static_cast<double>(ts->back_versions);
      }
    } else {
      s.step = 6;
      if (n != c.rows) {
        eb::Failed(state, absl::InternalError(absl::StrCat("counted ", n, " rows")), phase);
        return;
      }
      state.counters["gc_versions"] =
          static_cast<double>(s.db->stats().gc_versions_removed - gc_before);
    }
    state.counters["rows"] = static_cast<double>(c.rows);
  }
}

// Firebird 3.0.11 embedded, 2 cores, page size 8192, 2048 cache pages, index on VAL (issue 3).
const std::map<int64_t, std::vector<double>> kFirebird = {
    {100000, {0.215, 0.616, 0.202, 0.218}},
    {1000000, {2.39, 6.32, 2.27, 2.24}},
};

// Seconds of each row that ran (filled by TimeReporter, read by the summary).
std::map<std::string, double>* g_times = nullptr;

// Passes every report to the display reporter and keeps each row's time for the summary.
class TimeReporter : public benchmark::BenchmarkReporter {
 public:
  explicit TimeReporter(benchmark::BenchmarkReporter* inner) : inner_(inner) {}
  bool ReportContext(const Context& c) override { return inner_->ReportContext(c); }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (!r.error_occurred && r.run_type == Run::RT_Iteration) {
        std::string name = r.benchmark_name();
        name = name.substr(0, name.find("/iterations:"));
        (*g_times)[name] = r.GetAdjustedRealTime() /
                                         benchmark::GetTimeUnitMultiplier(r.time_unit);
      }
    }
    inner_->ReportRuns(runs);
  }
  void Finalize() override { inner_->Finalize(); }

 private:
  benchmark::BenchmarkReporter* inner_;
};

void PrintSummary(const std::vector<Config>& configs) {
  if (g_times->empty()) return;  // nothing ran (a filter, or --benchmark_list_tests)
  std::FILE* out = eb::SummaryStream();
  auto t = [](const std::string& name) {
    auto it = g_times->find(name);
    return it == g_times->end() ? -1.0 : it->second;
  };
  // A cell of the table: the seconds, or "-" for a phase that did not run.
  auto cell = [](double v) { return v < 0 ? std::string("-") : absl::StrFormat("%.3f", v); };
  auto ran = [&](const Config& c, const char* series) {
    const std::string prefix = absl::StrCat(c.Name(), "/series:", series, "/");
    auto it = g_times->lower_bound(prefix);
    return it != g_times->end() && it->first.starts_with(prefix);
  };
  std::fprintf(out, "\nmass_update: seconds per statement (series:rollback), ratio to update/1\n");
  std::fprintf(out, "%-42s %9s %9s %9s %9s %7s %9s\n", "configuration", "update/1", "update/2",
               "update/3", "update/4", "4 / 1", "rollback");
  for (const Config& c : configs) {
    if (!ran(c, "rollback")) continue;
    const std::string base = c.Name() + "/series:rollback/";
    double u[4];
    for (int k = 0; k < 4; ++k) u[k] = t(base + "update/" + std::to_string(k + 1));
    const std::string ratio = u[0] > 0 && u[3] > 0 ? absl::StrFormat("%.2f", u[3] / u[0]) : "-";
    std::fprintf(out, "%-42s %9s %9s %9s %9s %7s %9s\n", c.Name().c_str(), cell(u[0]).c_str(),
                 cell(u[1]).c_str(), cell(u[2]).c_str(), cell(u[3]).c_str(), ratio.c_str(),
                 cell(t(base + "rollback")).c_str());
  }
  std::fprintf(out, "\ncommit and gc (series:commit), seconds\n");
  for (const Config& c : configs) {
    if (!ran(c, "commit")) continue;
    const std::string base = c.Name() + "/series:commit/";
    std::fprintf(out, "%-42s commit %8s   gc (count after) %8s\n", c.Name().c_str(),
                 cell(t(base + "commit")).c_str(), cell(t(base + "gc")).c_str());
  }
  // One line of per-update ratios `num(k) / den(k)` for the updates both ran, if any.
  auto ratios = [&](const std::string& label, int digits, const char* suffix, auto num, auto den) {
    std::string line;
    for (int k = 1; k <= 4; ++k) {
      const double a = num(k), b = den(k);
      if (a > 0 && b > 0) absl::StrAppendFormat(&line, " u%d %.*f%s", k, digits, a / b, suffix);
    }
    if (!line.empty()) std::fprintf(out, "%s:%s\n", label.c_str(), line.c_str());
  };
  auto update = [&](const Config& c) {
    return [&t, name = c.Name()](int k) {
      return t(absl::StrCat(name, "/series:rollback/update/", k));
    };
  };
  // Linearity: 1M against 100K, per update.
  for (const Config& c : configs) {
    if (c.rows != 1000000) continue;
    Config small = c;
    small.rows = 100000;
    ratios(c.Name() + " vs rows:100000 (target <= 11x)", 1, "x", update(c), update(small));
  }
  // no_savepoint against savepoints.
  for (const Config& c : configs) {
    if (!c.no_savepoint) continue;
    Config sp = c;
    sp.no_savepoint = false;
    ratios(c.Name() + " / no_savepoint:0", 2, "", update(c), update(sp));
  }
  // Firebird 3.0 (its figures are for page size 8192 with the index on VAL).
  for (const Config& c : configs) {
    auto fb = kFirebird.find(c.rows);
    if (fb == kFirebird.end() || !c.index) continue;
    ratios(c.Name() + ": Firebird 3.0 time / EmberDB time (target >= 5)", 1, "x",
           [&](int k) { return fb->second[k - 1]; }, update(c));
  }
}

std::vector<int64_t> ParseList(const std::string& s) {
  std::vector<int64_t> out;
  for (absl::string_view p : absl::StrSplit(s, ',', absl::SkipWhitespace())) {
    int64_t v;
    if (absl::SimpleAtoi(p, &v)) out.push_back(v);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  eb::FLAGS_page_size.SetDefault(4096);
  eb::FLAGS_cache_pages.SetDefault(2048);
  if (!eb::Init(&argc, argv)) return 1;
  std::vector<Config> configs;
  for (int64_t rows : ParseList(FLAGS_rows.str())) {
    for (int64_t ix : ParseList(FLAGS_index.str())) {
      for (int64_t nsp : ParseList(FLAGS_no_savepoint.str())) {
        configs.push_back(Config{rows, ix != 0, nsp != 0});
      }
    }
  }
  for (const Config& c : configs) {
    for (bool commit_series : {false, true}) {
      std::vector<std::string> phases = {"update/1", "update/2", "update/3", "update/4"};
      if (commit_series) {
        phases.push_back("commit");
        phases.push_back("gc");
      } else {
        phases.push_back("rollback");
      }
      for (const std::string& p : phases) {
        const std::string name =
            absl::StrCat(c.Name(), "/series:", commit_series ? "commit" : "rollback", "/", p);
        benchmark::RegisterBenchmark(name.c_str(), [c, commit_series, p](benchmark::State& st) {
          Phase(st, c, commit_series, p);
        })->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);
      }
    }
  }
  std::map<std::string, double> times;
  g_times = &times;
  std::unique_ptr<benchmark::BenchmarkReporter> display(benchmark::CreateDefaultDisplayReporter());
  TimeReporter reporter(display.get());
  benchmark::RunSpecifiedBenchmarks(&reporter);
  PrintSummary(configs);
  for (auto& [k, s] : g_series) {
    s.tx.reset();
    if (s.db) (void)s.db->Close();
  }
  eb::Finish();
  return eb::AnyFailed() ? 1 : 0;
}
