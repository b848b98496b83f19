// The index build's sort (engine/sort/key_sorter.h) against std::sort of the same entries:
// keys of every length and byte (0x00, 0xff, shared long prefixes), several builders, memory
// limits from none to a spill every few entries (read back through real temp files), merges
// of splitter ranges concatenated and run from several threads at once, a full temp space,
// and all temp space given back.
#include "engine/sort/key_sorter.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/io/temp_space.h"
#include "tests/io/temp_dir.h"

namespace ember::sort {
namespace {

using Entries = std::vector<std::pair<std::string, uint64_t>>;

std::string Key(std::mt19937_64& rng, uint64_t n) {
  switch (rng() % 6) {
    case 0: return std::string(rng() % 3, static_cast<char>(rng() % 2 ? 0 : 0xff));
    case 1: return "shared-long-prefix-" + std::string(40, 'p') + std::to_string(rng() % n);
    case 2: {
      std::string k(rng() % 1000, '\0');
      for (char& c : k) c = static_cast<char>(rng());
      return k;
    }
    default: {
      std::string k(1 + rng() % 12, 'a');
      for (char& c : k) c = static_cast<char>('a' + rng() % 4);
      return k;
    }
  }
}

// Unique keys (an index entry always is), with values.
Entries MakeEntries(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Entries e;
  std::vector<std::string> keys;
  while (keys.size() < n) keys.push_back(Key(rng, n) + "#" + std::to_string(keys.size()));
  for (std::string& k : keys) e.emplace_back(std::move(k), rng());
  return e;
}

struct Temp {
  testing::TempDir dir;
  std::unique_ptr<io::TempSpace> ts;
  explicit Temp(uint64_t cache_limit = 64 << 10) {
    REQUIRE(dir.ok());
    io::TempSpaceOptions o;
    std::string f = dir.File("x");
    o.dirs = {f.substr(0, f.size() - 2)};
    o.cache_limit = cache_limit;  // most of the runs go to files
    ts = std::make_unique<io::TempSpace>(o);
  }
};

Entries MergeAll(const Merger& m, const std::vector<std::string>& splitters) {
  Entries out;
  for (size_t r = 0; r <= splitters.size(); ++r) {
    const std::string lo = r == 0 ? "" : splitters[r - 1];
    const std::string hi = r == splitters.size() ? "" : splitters[r];
    REQUIRE(m.MergeRange(lo, hi, [&](std::string_view k, uint64_t v) {
                out.emplace_back(std::string(k), v);
                return absl::OkStatus();
              }).ok());
  }
  return out;
}

TEST_CASE("sort: builders spilling runs merge into exactly the sorted entries", "[sort]") {
  const size_t n = GENERATE(size_t{0}, size_t{1}, size_t{300}, size_t{8000});
  const int builders = GENERATE(1, 3);
  const uint64_t limit = GENERATE(uint64_t{1} << 30, uint64_t{256} << 10, uint64_t{8} << 10);
  INFO(n << " entries, " << builders << " builders, limit " << limit);
  Temp temp;
  Entries want = MakeEntries(n, n + static_cast<uint64_t>(builders));
  {
    std::vector<std::unique_ptr<RunBuilder>> b;
    for (int i = 0; i < builders; ++i) b.push_back(std::make_unique<RunBuilder>(temp.ts.get(), limit));
    std::mt19937_64 rng(9);
    for (const auto& [k, v] : want) REQUIRE(b[rng() % b.size()]->Add(k, v).ok());
    std::vector<RunBuilder*> raw;
    for (auto& x : b) {
      REQUIRE(x->Finish().ok());
      raw.push_back(x.get());
    }
    Merger m(raw);
    const SortStats st = m.stats();
    CHECK(st.entries == n);
    uint64_t biggest = 0;
    for (const auto& [k, v] : want) biggest = std::max<uint64_t>(biggest, k.size() + 10 + 16);
    for (auto& x : b) CHECK(x->stats().peak_memory <= std::max(limit, biggest));
    if (limit < (uint64_t{1} << 30) && n >= 8000) {
      CHECK(st.spilled_runs > 0);
      CHECK(st.spill_bytes > 0);
    }
    std::sort(want.begin(), want.end());
    REQUIRE(MergeAll(m, {}) == want);
    for (int parts : {2, 4, 7}) {
      const std::vector<std::string> sp = m.Splitters(parts);
      CHECK(sp.size() <= static_cast<size_t>(parts - 1));
      CHECK(std::is_sorted(sp.begin(), sp.end()));
      REQUIRE(MergeAll(m, sp) == want);
      if (n >= 8000) {
        // About equal ranges: none over twice its share.
        size_t prev = 0;
        for (size_t r = 0; r <= sp.size(); ++r) {
          const size_t end = r == sp.size() ? want.size()
                                            : static_cast<size_t>(std::lower_bound(
                                                  want.begin(), want.end(),
                                                  std::make_pair(sp[r], uint64_t{0})) -
                                                  want.begin());
          CHECK(end - prev <= 2 * want.size() / (sp.size() + 1) + 300);
          prev = end;
        }
      }
    }
    // Ranges merged from several threads at once.
    const std::vector<std::string> sp = m.Splitters(4);
    std::vector<Entries> parts(sp.size() + 1);
    std::vector<std::thread> th;
    for (size_t r = 0; r <= sp.size(); ++r) {
      th.emplace_back([&, r] {
        (void)m.MergeRange(r == 0 ? "" : sp[r - 1], r == sp.size() ? "" : sp[r],
                           [&](std::string_view k, uint64_t v) {
                             parts[r].emplace_back(std::string(k), v);
                             return absl::OkStatus();
                           });
      });
    }
    for (auto& t : th) t.join();
    Entries joined;
    for (auto& p : parts) joined.insert(joined.end(), p.begin(), p.end());
    REQUIRE(joined == want);
  }
  CHECK(temp.ts->stats().bytes_allocated == 0);  // every run given back
}

TEST_CASE("sort: an error from emit stops the merge and is its result", "[sort]") {
  Temp temp;
  RunBuilder b(temp.ts.get(), 4 << 10);
  for (int i = 0; i < 2000; ++i) REQUIRE(b.Add("k" + std::to_string(i * 7919 % 2003), i).ok());
  REQUIRE(b.Finish().ok());
  Merger m({&b});
  int seen = 0;
  absl::Status s = m.MergeRange("", "", [&](std::string_view, uint64_t) {
    return ++seen == 100 ? absl::CancelledError("enough") : absl::OkStatus();
  });
  CHECK(s.code() == absl::StatusCode::kCancelled);
  CHECK(seen == 100);
}

TEST_CASE("sort: a full temp space is an error, not a crash, and leaks nothing", "[sort]") {
  io::TempSpaceOptions o;
  o.dirs = {"/proc/no-such-dir-for-ember"};  // cannot create spill files
  o.cache_limit = 16 << 10;
  io::TempSpace ts(o);
  absl::Status s;
  {
    RunBuilder b(&ts, 8 << 10);
    for (int i = 0; i < 5000 && s.ok(); ++i) s = b.Add("key-" + std::to_string(i), i);
  }
  CHECK_FALSE(s.ok());
  CHECK(ts.stats().bytes_allocated == 0);
}

}  // namespace
}  // namespace ember::sort
