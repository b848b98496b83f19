// Benchmarks whose rows each run once (one iteration, manual time): registering them, keeping
// every row's seconds and counters for the summary tables a binary prints after the run, and
// formatting those tables' cells.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "bench/util/bench_util.h"

namespace ember::bench {

// A comma-separated list of integers; false (after saying why) for anything else.
bool ParseList(const Flag& flag, std::vector<int64_t>* out);

// Registers a row that runs once (one iteration, manual time, in milliseconds).
void AddRow(const std::string& name, std::function<void(benchmark::State&)> fn);

// What the summaries read of every row that ran without error: its seconds and counters.
struct RowResult {
  double seconds = 0;
  std::map<std::string, double> counters;
};
// Passes every report to `inner` and keeps each row's result.
class ResultReporter : public benchmark::BenchmarkReporter {
 public:
  explicit ResultReporter(benchmark::BenchmarkReporter* inner) : inner_(inner) {}
  bool ReportContext(const Context& c) override { return inner_->ReportContext(c); }
  void ReportRuns(const std::vector<Run>& runs) override;
  void Finalize() override { inner_->Finalize(); }

 private:
  benchmark::BenchmarkReporter* inner_;
};
// Whether any row ran (not with a filter that matches none, or --benchmark_list_tests).
bool AnyRowRan();
// Seconds of the row `name`, or -1 when it did not run.
double Time(const std::string& name);
// Counter `counter` of the row `name`, or -1 when the row did not run or has no such counter.
double CounterOf(const std::string& name, const std::string& counter);

// A cell of a table: the value with `decimals`, or "-" for what did not run (v < 0).
std::string Cell(double v, int decimals = 3);
// a / b with two decimals, or "-" when either did not run.
std::string Ratio(double a, double b);

}  // namespace ember::bench
