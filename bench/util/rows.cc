// Rows that run once and their results (see rows.h).
#include "bench/util/rows.h"

#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace ember::bench {

bool ParseList(const Flag& flag, std::vector<int64_t>* out) {
  for (absl::string_view p : absl::StrSplit(flag.str(), ',', absl::SkipWhitespace())) {
    int64_t v;
    if (!absl::SimpleAtoi(p, &v)) {
      std::fprintf(stderr, "bad value '%s' in --%s=%s\n", std::string(p).c_str(), flag.name(),
                   flag.str().c_str());
      return false;
    }
    out->push_back(v);
  }
  return true;
}

void AddRow(const std::string& name, std::function<void(benchmark::State&)> fn) {
  benchmark::RegisterBenchmark(name.c_str(), [fn = std::move(fn)](benchmark::State& st) { fn(st); })
      ->Iterations(1)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}

namespace {
std::map<std::string, RowResult>& Results() {
  static std::map<std::string, RowResult> results;
  return results;
}
}  // namespace

void ResultReporter::ReportRuns(const std::vector<Run>& runs) {
  for (const Run& r : runs) {
    if (r.error_occurred || r.run_type != Run::RT_Iteration) continue;
    std::string name = r.benchmark_name();
    name = name.substr(0, name.find("/iterations:"));
    RowResult& out = Results()[name];
    out.seconds = r.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(r.time_unit);
    out.counters.clear();
    for (const auto& [k, c] : r.counters) out.counters[k] = c.value;
  }
  inner_->ReportRuns(runs);
}

bool AnyRowRan() { return !Results().empty(); }

double Time(const std::string& name) {
  auto it = Results().find(name);
  return it == Results().end() ? -1.0 : it->second.seconds;
}

double CounterOf(const std::string& name, const std::string& counter) {
  auto it = Results().find(name);
  if (it == Results().end()) return -1.0;
  auto c = it->second.counters.find(counter);
  return c == it->second.counters.end() ? -1.0 : c->second;
}

std::string Cell(double v, int decimals) {
  return v < 0 ? std::string("-") : absl::StrFormat("%.*f", decimals, v);
}

std::string Ratio(double a, double b) {
  return a > 0 && b > 0 ? absl::StrFormat("%.2f", a / b) : std::string("-");
}

}  // namespace ember::bench
