// Run order and paired summaries of engine comparisons (see compare.h).
#include "bench/util/compare.h"

#include <algorithm>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ember::bench {

Flag FLAGS_runs("runs", int64_t{1},
                "times every EmberDB-vs-other comparison runs, alternating which engine goes "
                "first (ABBA); the summary pairs the runs and reports median ratios");

int Runs() { return static_cast<int>(std::clamp<int64_t>(FLAGS_runs.i64(), 1, 1000)); }

bool EmberFirst(int run, int salt) { return (run + salt) % 2 == 0; }

bool CheckNoRepetitions(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool repeats =
        arg.starts_with("--benchmark_repetitions") && arg != "--benchmark_repetitions=1";
    const bool shuffles = arg.starts_with("--benchmark_enable_random_interleaving") &&
                          !arg.ends_with("=false") && !arg.ends_with("=0");
    if (repeats || shuffles) {
      std::fprintf(stderr,
                   "bench: %s: this binary's rows are one-shot phases paired by run; use "
                   "--runs=N (alternating which engine goes first) instead\n",
                   argv[i]);
      return false;
    }
  }
  return true;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void Comparison::Set(bool is_ember, int run, const Sample& s) {
  std::vector<Sample>& samples = is_ember ? ember : other;
  std::vector<bool>& ok = is_ember ? ember_ok : other_ok;
  const size_t n = static_cast<size_t>(run) + 1;
  if (samples.size() < n) {
    samples.resize(n);
    ok.resize(n);
  }
  samples[run] = s;
  ok[run] = true;
}

Paired Pair(const Comparison& c) {
  Paired p;
  std::vector<double> es, os, ec, oc, ratios, cpu_ratios;
  const size_t n = std::min(c.ember.size(), c.other.size());
  for (size_t r = 0; r < n; ++r) {
    if (!c.ember_ok[r] || !c.other_ok[r]) continue;
    const Sample& e = c.ember[r];
    const Sample& o = c.other[r];
    es.push_back(e.seconds);
    os.push_back(o.seconds);
    ec.push_back(e.cpu_seconds);
    oc.push_back(o.cpu_seconds);
    if (o.seconds > 0) ratios.push_back(e.seconds / o.seconds);
    if (o.cpu_seconds > 0) cpu_ratios.push_back(e.cpu_seconds / o.cpu_seconds);
  }
  p.runs = static_cast<int>(es.size());
  p.ember_s = Median(es);
  p.other_s = Median(os);
  p.ember_cpu = Median(ec);
  p.other_cpu = Median(oc);
  p.ratio = Median(ratios);
  p.cpu_ratio = Median(cpu_ratios);
  if (!ratios.empty()) {
    p.ratio_lo = *std::min_element(ratios.begin(), ratios.end());
    p.ratio_hi = *std::max_element(ratios.begin(), ratios.end());
  }
  return p;
}

void Tally::Add(const std::string& name, const Paired& p) {
  if (p.runs == 0) return;
  const bool first = wins_ + evens_ == 0 && losses_.empty();
  min_runs_ = first ? p.runs : std::min(min_runs_, p.runs);
  max_runs_ = std::max(max_runs_, p.runs);
  const double ratio = p.ratio;
  if (ratio < 1 - kEvenBand) {
    ++wins_;
  } else if (ratio > 1 + kEvenBand) {
    losses_.push_back(absl::StrFormat("%s (%.2f)", name, ratio));
  } else {
    ++evens_;
  }
}

void Tally::Print(std::FILE* out, const char* what) const {
  const int n = wins_ + evens_ + static_cast<int>(losses_.size());
  std::fprintf(out,
               "EmberDB faster on %d, slower on %zu, even (ratio within %.0f%% of 1) on %d of %d "
               "%s (median ratio over %s paired run%s each).",
               wins_, losses_.size(), kEvenBand * 100, evens_, n, what,
               min_runs_ == max_runs_ ? absl::StrCat(min_runs_).c_str()
                                      : absl::StrCat(min_runs_, "-", max_runs_).c_str(),
               max_runs_ == 1 ? "" : "s");
  if (!losses_.empty()) {
    std::fprintf(out, " Slower on:");
    for (const std::string& s : losses_) std::fprintf(out, " %s;", s.c_str());
  }
  std::fprintf(out, "\n");
}

}  // namespace ember::bench
