// EmberDB against another engine doing the same work in the same run: the order the two run in,
// and the paired summary of their times.
//
// Every comparison runs --runs times. Run r goes EmberDB first when EmberFirst(r, salt) and the
// other engine first otherwise, so over an even number of runs each engine goes first equally
// often (ABBA): a drift of the machine (page cache, other load, thermal) does not favour the one
// that always runs first. A binary passes a salt per comparison so that, even with one run,
// consecutive comparisons do not all start with the same engine.
//
// The summary pairs run r of EmberDB with run r of the other engine, and reports the medians of
// the times and of the per-run ratios; a comparison counts as a win when the median ratio is
// below 1 - kEvenBand, a loss above 1 + kEvenBand, and as even within that band.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "bench/util/bench_util.h"

namespace ember::bench {

extern Flag FLAGS_runs;  // --runs=N: how many times every comparison runs (default 1)
int Runs();              // FLAGS_runs, at least 1

bool EmberFirst(int run, int salt = 0);

// False (after saying why) when the command line asks Google Benchmark to repeat or shuffle
// rows (--benchmark_repetitions above 1, --benchmark_enable_random_interleaving): the phases
// of a comparison are one-shot rows that build on each other and are paired by run, so
// repetitions go through --runs instead. Call before Init.
bool CheckNoRepetitions(int argc, char** argv);

// Median of `v` (the mean of the two middle values for an even count); 0 when empty.
double Median(std::vector<double> v);

// One engine's measurement of one phase in one run.
struct Sample {
  double seconds = 0;      // wall clock of the phase
  double cpu_seconds = 0;  // CPU of the phase (what it includes is the binary's to state)
};

// A comparison's samples, by run: ember[r] pairs with other[r]. A run that did not complete on
// both sides (filtered out, failed) is left out of the pairing.
struct Comparison {
  std::vector<Sample> ember, other;
  std::vector<bool> ember_ok, other_ok;
  void Set(bool is_ember, int run, const Sample& s);
};

struct Paired {
  int runs = 0;                         // runs with both sides measured
  double ember_s = 0, other_s = 0;      // median seconds
  double ember_cpu = 0, other_cpu = 0;  // median CPU seconds
  double ratio = 0;                     // median of the per-run ratios ember / other (wall clock)
  double ratio_lo = 0, ratio_hi = 0;    // the smallest and largest per-run ratio
  double cpu_ratio = 0;                 // median of the per-run CPU ratios
};
Paired Pair(const Comparison& c);

constexpr double kEvenBand = 0.05;

// Counts wins, losses and evens over the comparisons of a summary.
class Tally {
 public:
  // `name` identifies the comparison in the list of losses. A comparison without a paired run
  // is not counted.
  void Add(const std::string& name, const Paired& p);
  // "EmberDB faster on W, slower on L, even (within 5%) on E of N comparisons (...)" and the
  // names of the losses.
  void Print(std::FILE* out, const char* what) const;

 private:
  int wins_ = 0, evens_ = 0;
  int min_runs_ = 0, max_runs_ = 0;  // paired runs per comparison
  std::vector<std::string> losses_;
};

}  // namespace ember::bench
