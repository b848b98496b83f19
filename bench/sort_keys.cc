// bench/sort_keys: the sorter of an index build (engine/sort) alone, on the keys of
// bench/parallel_index: random words of 3-14 lowercase letters, each with its record number.
// The budget for sort + merge of 4M such entries is 300-400 ms on one core.
//
//   build/release/bench/sort_keys [--entries=4000000] [--runs=1,8] [--temps=ram,disk]
//       [--workers=1] [--seed=N] [--check=1]
//
// Rows: sort_keys/entries:N/workers:W/runs:R[/temp:T]
//   runs:1  a sort memory that holds every entry: one run per worker, kept in memory
//   runs:R  a sort memory of 1/(R - 0.5) of the entries' (arena + records), so that each
//           worker spills R - 1 runs to the temp space and keeps its last: ram = /dev/shm,
//           disk = the --db_dir file system (the page cache holds what is written, as it
//           would in a build)
// W workers each add every W-th block of 4,096 entries (the scan's share), finish, and then
// merge one of W ranges cut by Merger::Splitters, all on their own threads; W = 1 runs on the
// calling thread. The time (manual) is add + finish + merge into a stream that counts the
// entries; counters add_s (includes the sorts and writes of spilled runs), sort_s (Finish: the
// sort of the last run), merge_s, runs, spilled_runs, spill_mb, peak_mb (the sort's own
// accounting), minor_faults (fresh memory touched: the builders' arenas and records). --check=1
// merges again afterwards, untimed, and fails the row unless the stream is in (key, value) order
// and holds every entry once.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/util/bench_util.h"
#include "bench/util/rows.h"
#include "engine/io/temp_space.h"
#include "engine/sort/key_sorter.h"

namespace eb = ember::bench;
namespace sort = ember::sort;

namespace {

eb::Flag FLAGS_entries("entries", int64_t{4000000}, "entries sorted (random words)");
eb::Flag FLAGS_runs("runs", "1,8", "runs per worker (comma-separated; 1 = no spill)");
eb::Flag FLAGS_temps("temps", "ram,disk", "temp spaces of the spill rows: ram, disk");
eb::Flag FLAGS_workers("workers", "1", "worker counts (comma-separated)");
eb::Flag FLAGS_seed("seed", int64_t{20261205}, "seed of the word generator");
eb::Flag FLAGS_check("check", true, "check the merged stream after each row (untimed)");

constexpr size_t kBlock = 4096;  // entries a worker takes at a time

// The words, back to back: word i is bytes [off[i], off[i + 1]).
struct Words {
  std::string bytes;
  std::vector<uint32_t> off;
  size_t size() const { return off.size() - 1; }
  std::string_view operator[](size_t i) const {
    return std::string_view(bytes.data() + off[i], off[i + 1] - off[i]);
  }
};

const Words& TheWords() {
  static const Words w = [] {
    Words w;
    const size_t n = static_cast<size_t>(FLAGS_entries.i64());
    std::mt19937_64 rng(static_cast<uint64_t>(FLAGS_seed.i64()));
    w.off.reserve(n + 1);
    w.off.push_back(0);
    for (size_t i = 0; i < n; ++i) {
      const size_t len = 3 + rng() % 12;
      for (size_t j = 0; j < len; ++j) w.bytes.push_back(static_cast<char>('a' + rng() % 26));
      w.off.push_back(static_cast<uint32_t>(w.bytes.size()));
    }
    return w;
  }();
  return w;
}

// What the sort accounts for all the entries: arena entries plus 16-byte records.
uint64_t SortBytes(const Words& w) {
  return w.bytes.size() + w.size() * (sort::kEntryOverhead + sizeof(sort::PrefixRec));
}

// Runs fn(i) for i in [0, n) on n threads (the caller's alone when n is 1).
template <typename Fn>
void OnWorkers(int n, Fn fn) {
  if (n == 1) {
    fn(0);
    return;
  }
  std::vector<std::thread> t;
  for (int i = 0; i < n; ++i) t.emplace_back([&fn, i] { fn(i); });
  for (auto& x : t) x.join();
}

absl::Status FirstError(const std::vector<absl::Status>& v) {
  for (const absl::Status& s : v) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// The merged stream in (key, value) order with every entry once (values are the word indexes).
absl::Status Check(const sort::Merger& m, const std::vector<sort::SplitPoint>& sp, const Words& w) {
  std::string prev;
  uint64_t prev_value = 0, count = 0;
  std::vector<bool> seen(w.size());
  for (size_t r = 0; r <= sp.size(); ++r) {
    absl::Status s =
        m.MergeRange(r == 0 ? nullptr : &sp[r - 1], r == sp.size() ? nullptr : &sp[r],
                     [&](std::string_view k, uint64_t v) -> absl::Status {
                       if (count > 0 && sort::CompareEntry(prev, prev_value, k, v) >= 0) {
                         return eb::Wrong(absl::StrCat("entry ", count, " out of order"));
                       }
                       if (v >= w.size() || seen[v] || w[v] != k) {
                         return eb::Wrong(absl::StrCat("entry ", count, " is not a word's"));
                       }
                       seen[v] = true;
                       prev.assign(k);
                       prev_value = v;
                       ++count;
                       return absl::OkStatus();
                     });
    if (!s.ok()) return s;
  }
  if (count != w.size()) return eb::Wrong(absl::StrCat(count, " entries of ", w.size()));
  return absl::OkStatus();
}

void RunSort(benchmark::State& state, int workers, int runs, const std::string& temp) {
  const Words& w = TheWords();
  const uint64_t need = SortBytes(w);
  // runs = 1: room for all (the memory the sort really uses is its peak, not this);
  // otherwise R - 1 full runs per worker and a last one half full.
  const uint64_t limit =
      runs == 1
          ? need * 2 + (uint64_t{64} << 20)
          : static_cast<uint64_t>(static_cast<double>(need) / (static_cast<double>(runs) - 0.5));
  std::string dir;
  if (runs > 1) {
    dir = temp == "ram" ? "/dev/shm/ember-bench-sort-keys" : eb::DbDir() + "/sort-keys-temp";
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
  }
  for (auto _ : state) {
    ember::io::TempSpaceOptions o;
    o.dirs = {runs > 1 ? dir : std::string("/nonexistent")};
    o.cache_limit = 0;  // every spilled run goes to a file of the chosen directory
    ember::io::TempSpace ts(o);
    std::vector<std::unique_ptr<sort::RunBuilder>> b;
    for (int i = 0; i < workers; ++i) {
      b.push_back(std::make_unique<sort::RunBuilder>(&ts, limit / static_cast<uint64_t>(workers)));
    }
    std::vector<absl::Status> status(static_cast<size_t>(workers));
    const uint64_t faults0 = eb::MinorFaults();
    const eb::Clock::time_point t0 = eb::Clock::now();
    OnWorkers(workers, [&](int i) {
      sort::RunBuilder& out = *b[static_cast<size_t>(i)];
      for (size_t first = static_cast<size_t>(i) * kBlock; first < w.size();
           first += static_cast<size_t>(workers) * kBlock) {
        const size_t end = std::min(w.size(), first + kBlock);
        for (size_t j = first; j < end; ++j) {
          if (absl::Status s = out.Add(w[j], j); !s.ok()) {
            status[static_cast<size_t>(i)] = s;
            return;
          }
        }
      }
    });
    const eb::Clock::time_point t1 = eb::Clock::now();
    if (eb::Failed(state, FirstError(status), "add")) return;
    OnWorkers(workers,
              [&](int i) { status[static_cast<size_t>(i)] = b[static_cast<size_t>(i)]->Finish(); });
    const eb::Clock::time_point t2 = eb::Clock::now();
    if (eb::Failed(state, FirstError(status), "finish")) return;
    std::vector<sort::RunBuilder*> raw;
    for (auto& x : b) raw.push_back(x.get());
    const sort::Merger m(raw);
    const std::vector<sort::SplitPoint> sp = m.Splitters(workers);
    std::vector<uint64_t> counts(sp.size() + 1);
    OnWorkers(static_cast<int>(sp.size() + 1), [&](int r) {
      const size_t i = static_cast<size_t>(r);
      uint64_t n = 0;
      status[i] = m.MergeRange(i == 0 ? nullptr : &sp[i - 1], i == sp.size() ? nullptr : &sp[i],
                               [&n](std::string_view, uint64_t) {
                                 ++n;
                                 return absl::OkStatus();
                               });
      counts[i] = n;
    });
    const eb::Clock::time_point t3 = eb::Clock::now();
    if (eb::Failed(state, FirstError(status), "merge")) return;
    uint64_t total = 0;
    for (uint64_t c : counts) total += c;
    if (eb::Failed(state, total == w.size() ? absl::OkStatus() : eb::Wrong("entry count"),
                   "merge")) {
      return;
    }
    state.SetIterationTime(eb::Seconds(t0, t3));
    const sort::SortStats st = m.stats();
    state.counters["add_s"] = eb::Seconds(t0, t1);
    state.counters["sort_s"] = eb::Seconds(t1, t2);
    state.counters["merge_s"] = eb::Seconds(t2, t3);
    state.counters["entries"] = static_cast<double>(st.entries);
    state.counters["runs"] = static_cast<double>(st.runs);
    state.counters["spilled_runs"] = static_cast<double>(st.spilled_runs);
    state.counters["spill_mb"] = static_cast<double>(st.spill_bytes) / (1 << 20);
    state.counters["peak_mb"] = static_cast<double>(st.peak_memory) / (1 << 20);
    state.counters["minor_faults"] = static_cast<double>(eb::MinorFaults() - faults0);
    if (FLAGS_check.b() && eb::Failed(state, Check(m, sp, w), "check")) return;
  }
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (!eb::Init(&argc, argv)) return 1;
  std::vector<int64_t> runs, workers;
  if (!eb::ParseList(FLAGS_runs, &runs) || !eb::ParseList(FLAGS_workers, &workers)) return 1;
  std::vector<std::string> temps;
  for (absl::string_view t : absl::StrSplit(FLAGS_temps.str(), ',', absl::SkipWhitespace())) {
    if (t != "ram" && t != "disk") {
      std::fprintf(stderr, "sort_keys: --temps takes ram and disk, not '%s'\n",
                   std::string(t).c_str());
      return 1;
    }
    temps.emplace_back(t);
  }
  if (FLAGS_entries.i64() < 1) {
    std::fprintf(stderr, "sort_keys: --entries must be positive\n");
    return 1;
  }
  for (int64_t wk : workers) {
    for (int64_t r : runs) {
      if (wk < 1 || r < 1) {
        std::fprintf(stderr, "sort_keys: workers and runs must be positive\n");
        return 1;
      }
      const std::string base =
          absl::StrCat("sort_keys/entries:", FLAGS_entries.i64(), "/workers:", wk, "/runs:", r);
      for (const std::string& t : r == 1 ? std::vector<std::string>{""} : temps) {
        eb::AddRow(t.empty() ? base : absl::StrCat(base, "/temp:", t),
                   [wk, r, t](benchmark::State& st) {
                     RunSort(st, static_cast<int>(wk), static_cast<int>(r), t);
                   });
      }
    }
  }
  eb::ResultReporter reporter(benchmark::CreateDefaultDisplayReporter());
  benchmark::RunSpecifiedBenchmarks(&reporter);
  eb::Finish();
  return eb::AnyFailed() ? 1 : 0;
}
