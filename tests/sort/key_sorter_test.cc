// The index build's sort (engine/sort/key_sorter.h) against std::sort of the same entries as
// the model: keys of every length and byte (empty, 1, 8, 9, 100, 3000 and 65,535 bytes, 0x00
// and 0xff, long shared prefixes), duplicate keys and duplicate entries, several builders,
// memory limits that spill no run, one run, many runs (read back through real temp files),
// merges of splitter ranges and of arbitrary ranges, from several threads at once, a temp
// space that cannot take a spill, and all temp space given back.
#include "engine/sort/key_sorter.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/io/temp_space.h"
#include "tests/support/temp_dir.h"

namespace ember::sort {
namespace {

using Entry = std::pair<std::string, uint64_t>;  // std::string order is memcmp order
using Entries = std::vector<Entry>;

std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string k(n, '\0');
  for (char& c : k) c = static_cast<char>(rng());
  return k;
}

std::string Key(std::mt19937_64& rng) {
  switch (rng() % 10) {
    case 0: return std::string(rng() % 3, static_cast<char>(rng() % 2 ? 0 : 0xff));
    case 1: return std::string(1 + rng() % 10, '\0') + RandomBytes(rng, rng() % 3);
    case 2: return std::string(1 + rng() % 10, '\xff') + RandomBytes(rng, rng() % 3);
    case 3: return "shared-long-prefix-" + std::string(100, 'p') + RandomBytes(rng, rng() % 4);
    case 4: {
      static const size_t kLengths[] = {0, 1, 7, 8, 9, 16, 100, 3000};
      return RandomBytes(rng, kLengths[rng() % 8]);
    }
    case 5: return RandomBytes(rng, rng() % 20);
    default: {  // short words over a small alphabet: many equal prefixes and equal keys
      std::string k(1 + rng() % 12, 'a');
      for (char& c : k) c = static_cast<char>('a' + rng() % 3);
      return k;
    }
  }
}

// Keys with duplicates; a few entries repeated whole (key and value).
Entries MakeEntries(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Entries e;
  while (e.size() < n) {
    if (!e.empty() && rng() % 20 == 0) {
      e.push_back(e[rng() % e.size()]);
    } else if (!e.empty() && rng() % 5 == 0) {
      e.emplace_back(e[rng() % e.size()].first, rng() % 4 == 0 ? 0 : rng());
    } else {
      e.emplace_back(Key(rng), rng() % 8 == 0 ? ~uint64_t{0} - rng() % 2 : rng());
    }
  }
  return e;
}

uint64_t MemoryOf(const Entries& e) {
  uint64_t m = 0;
  for (const auto& [k, v] : e) m += 2 + k.size() + 8 + sizeof(PrefixRec);
  return m;
}

struct Temp {
  testing::TempDir dir;
  std::unique_ptr<io::TempSpace> ts;
  Temp() {
    REQUIRE(dir.ok());
    io::TempSpaceOptions o;
    const std::string f = dir.File("x");
    o.dirs = {f.substr(0, f.size() - 2)};
    o.cache_limit = 64 << 10;  // most runs go to files
    o.block_size = 64 << 10;
    ts = std::make_unique<io::TempSpace>(o);
  }
};

absl::Status Collect(const Merger& m, const SplitPoint* lo, const SplitPoint* hi, Entries* out) {
  return m.MergeRange(lo, hi, [out](std::string_view k, uint64_t v) {
    out->emplace_back(std::string(k), v);
    return absl::OkStatus();
  });
}

// The ranges [start, s[0]), [s[0], s[1]), ..., [s.back(), end), one after the other.
std::vector<Entries> MergeRanges(const Merger& m, const std::vector<SplitPoint>& s) {
  std::vector<Entries> out(s.size() + 1);
  for (size_t r = 0; r <= s.size(); ++r) {
    REQUIRE(
        Collect(m, r == 0 ? nullptr : &s[r - 1], r == s.size() ? nullptr : &s[r], &out[r]).ok());
  }
  return out;
}

Entries Join(const std::vector<Entries>& parts) {
  Entries all;
  for (const Entries& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

bool Below(const Entry& e, const SplitPoint& p) { return e < Entry(p.key, p.value); }

// Every range holds entries of its bounds only, and none holds over twice its share.
void CheckRanges(const std::vector<Entries>& parts, const std::vector<SplitPoint>& s, size_t total,
                 size_t slack) {
  for (size_t r = 0; r < parts.size(); ++r) {
    INFO("range " << r << " of " << parts.size() << ", " << parts[r].size() << " entries");
    for (const Entry& e : parts[r]) {
      if (r > 0) REQUIRE_FALSE(Below(e, s[r - 1]));
      if (r < s.size()) REQUIRE(Below(e, s[r]));
    }
    CHECK(parts[r].size() <= 2 * total / parts.size() + slack);
  }
}

TEST_CASE("sort: prefixes of entries order as their keys' first 8 bytes", "[sort]") {
  std::mt19937_64 rng(1);
  std::vector<std::string> keys;
  for (int i = 0; i < 2000; ++i) keys.push_back(Key(rng));
  for (const std::string& k : keys) {
    char e[kMaxEntryBytes];
    PutEntry(e, k, rng());
    REQUIRE(EntryPrefix(e, k.size()) == KeyPrefix(k));
    REQUIRE(EntryKey(e) == k);
  }
  for (size_t i = 1; i < keys.size(); ++i) {
    const std::string& a = keys[i - 1];
    const std::string& b = keys[i];
    const std::string pa = (a + std::string(8, '\0')).substr(0, 8);
    const std::string pb = (b + std::string(8, '\0')).substr(0, 8);
    CHECK((KeyPrefix(a) < KeyPrefix(b)) == (pa < pb));
    CHECK((KeyPrefix(a) == KeyPrefix(b)) == (pa == pb));
  }
}

TEST_CASE("sort: builders merge into exactly the std::sort order, spilling no run, one or many",
          "[sort]") {
  const size_t n = GENERATE(size_t{0}, size_t{1}, size_t{300}, size_t{6000});
  const int builders = GENERATE(1, 3);
  enum Spill { kNone, kOne, kMany };
  const Spill spill = GENERATE(kNone, kOne, kMany);
  INFO(n << " entries, " << builders << " builders, spill mode " << spill);
  Temp temp;
  Entries want = MakeEntries(n, n * 7 + static_cast<uint64_t>(builders));
  std::vector<Entries> given(static_cast<size_t>(builders));
  std::mt19937_64 rng(9);
  for (const Entry& e : want) given[rng() % given.size()].push_back(e);
  {
    std::vector<std::unique_ptr<RunBuilder>> b;
    std::vector<uint64_t> limits;
    for (const Entries& g : given) {
      // kOne: two thirds of what the builder gets, so its first run spills and the rest stays.
      limits.push_back(spill == kNone  ? uint64_t{64} << 20
                       : spill == kOne ? std::max<uint64_t>(MemoryOf(g) * 2 / 3, 1)
                                       : uint64_t{8} << 10);
      b.push_back(std::make_unique<RunBuilder>(temp.ts.get(), limits.back()));
      for (const auto& [k, v] : g) REQUIRE(b.back()->Add(k, v).ok());
    }
    std::vector<RunBuilder*> raw;
    for (auto& x : b) {
      REQUIRE(x->Finish().ok());
      raw.push_back(x.get());
    }
    const Merger m(raw);
    const SortStats st = m.stats();
    CHECK(st.entries == n);
    uint64_t biggest = 0, bytes = 0;
    for (const auto& [k, v] : want) {
      biggest = std::max<uint64_t>(biggest, 10 + k.size() + sizeof(PrefixRec));
      bytes += 10 + k.size();
    }
    for (size_t i = 0; i < b.size(); ++i) {
      INFO("builder " << i << ", limit " << limits[i]);
      CHECK(b[i]->stats().peak_memory <= std::max(limits[i], biggest));
      // A spill happens before an entry is added: the last run is always in memory.
      CHECK(b[i]->stats().runs == b[i]->stats().spilled_runs + (given[i].empty() ? 0 : 1));
    }
    CHECK(st.spill_bytes <= bytes);
    if (spill == kNone) {
      CHECK(st.spilled_runs == 0);
      CHECK(st.spill_bytes == 0);
    } else if (n >= 300) {
      if (spill == kOne) CHECK(st.spilled_runs == static_cast<uint64_t>(builders));
      if (spill == kMany) {
        // Each run but a builder's last holds more than the limit less one entry (< 4 KB).
        CHECK(static_cast<int64_t>(st.spilled_runs) >=
              static_cast<int64_t>(MemoryOf(want) / (uint64_t{8} << 10)) - builders);
      }
      CHECK(st.spill_bytes > 0);
    }
    std::sort(want.begin(), want.end());
    Entries all;
    REQUIRE(Collect(m, nullptr, nullptr, &all).ok());
    REQUIRE(all == want);

    for (int parts : {2, 4, 7}) {
      const std::vector<SplitPoint> sp = m.Splitters(parts);
      CHECK(sp.size() <= static_cast<size_t>(parts - 1));
      for (size_t i = 1; i < sp.size(); ++i) {
        CHECK(Entry(sp[i - 1].key, sp[i - 1].value) < Entry(sp[i].key, sp[i].value));
      }
      const std::vector<Entries> ranges = MergeRanges(m, sp);
      REQUIRE(Join(ranges) == want);
      if (n >= 6000) CHECK(sp.size() == static_cast<size_t>(parts - 1));
      CheckRanges(ranges, sp, n, 300);
    }

    // The ranges merged from several threads at once.
    const std::vector<SplitPoint> sp = m.Splitters(4);
    std::vector<Entries> parts(sp.size() + 1);
    std::vector<absl::Status> status(parts.size());
    std::vector<std::thread> th;
    for (size_t r = 0; r < parts.size(); ++r) {
      th.emplace_back([&, r] {
        status[r] =
            Collect(m, r == 0 ? nullptr : &sp[r - 1], r == sp.size() ? nullptr : &sp[r], &parts[r]);
      });
    }
    for (auto& t : th) t.join();
    for (const absl::Status& s : status) CHECK(s.ok());
    REQUIRE(Join(parts) == want);
  }
  CHECK(temp.ts->stats().bytes_allocated == 0);  // every run given back
}

TEST_CASE("sort: ranges between arbitrary points hold exactly the model's entries", "[sort]") {
  Temp temp;
  Entries want = MakeEntries(3000, 17);
  RunBuilder a(temp.ts.get(), 16 << 10), b(temp.ts.get(), uint64_t{64} << 20);
  for (size_t i = 0; i < want.size(); ++i) {
    REQUIRE((i % 2 ? a : b).Add(want[i].first, want[i].second).ok());
  }
  REQUIRE(a.Finish().ok());
  REQUIRE(b.Finish().ok());
  const Merger m({&a, &b});
  std::sort(want.begin(), want.end());
  std::mt19937_64 rng(5);
  // Points on entries, between a key's duplicates, and on keys that are not there.
  auto point = [&]() {
    const Entry& e = want[rng() % want.size()];
    switch (rng() % 4) {
      case 0: return SplitPoint{e.first, e.second};
      case 1: return SplitPoint{e.first, e.second + 1};
      case 2: return SplitPoint{e.first, 0};
      default: return SplitPoint{e.first + std::string(1, static_cast<char>(rng())), rng()};
    }
  };
  for (int round = 0; round < 60; ++round) {
    SplitPoint lo = point(), hi = point();
    if (Entry(hi.key, hi.value) < Entry(lo.key, lo.value)) std::swap(lo, hi);
    const bool open_lo = round % 7 == 0, open_hi = round % 5 == 0;
    Entries model;
    for (const Entry& e : want) {
      if ((open_lo || !Below(e, lo)) && (open_hi || Below(e, hi))) model.push_back(e);
    }
    Entries got;
    REQUIRE(Collect(m, open_lo ? nullptr : &lo, open_hi ? nullptr : &hi, &got).ok());
    REQUIRE(got == model);
  }
  // An empty range, and one whose bounds are out of order, emit nothing.
  const SplitPoint p{want[100].first, want[100].second};
  Entries got;
  REQUIRE(Collect(m, &p, &p, &got).ok());
  CHECK(got.empty());
  const SplitPoint q{want[2000].first, want[2000].second};
  REQUIRE(Collect(m, &q, &p, &got).ok());
  CHECK(got.empty());
}

TEST_CASE("sort: one key's many duplicates come out in value order and split across ranges",
          "[sort]") {
  Temp temp;
  Entries want;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 12000; ++i) {
    want.emplace_back(i % 10 == 0 ? "other-" + std::to_string(i) : "the same key", rng() % 5000);
  }
  std::vector<std::unique_ptr<RunBuilder>> b;
  for (int i = 0; i < 3; ++i) b.push_back(std::make_unique<RunBuilder>(temp.ts.get(), 32 << 10));
  for (size_t i = 0; i < want.size(); ++i)
    REQUIRE(b[i % 3]->Add(want[i].first, want[i].second).ok());
  for (auto& x : b) REQUIRE(x->Finish().ok());
  const Merger m({b[0].get(), b[1].get(), b[2].get()});
  CHECK(m.stats().spilled_runs > 3);
  std::sort(want.begin(), want.end());
  const std::vector<SplitPoint> sp = m.Splitters(4);
  REQUIRE(sp.size() == 3);
  for (const SplitPoint& p : sp) CHECK(p.key == "the same key");  // 90% of the entries
  const std::vector<Entries> ranges = MergeRanges(m, sp);
  REQUIRE(Join(ranges) == want);
  CheckRanges(ranges, sp, want.size(), 600);
}

TEST_CASE("sort: keys of 64 KB spill and merge, longer keys are refused", "[sort]") {
  Temp temp;
  Entries want;
  std::mt19937_64 rng(11);
  {
    // Entries larger than a merge's read block and than the builder's limit.
    RunBuilder b(temp.ts.get(), 100 << 10);
    for (int i = 0; i < 12; ++i) {
      want.emplace_back(std::string(kMaxKeyBytes - static_cast<size_t>(rng() % 3), 'k'), rng());
      want.back().first[rng() % 1000] = static_cast<char>(rng());
      REQUIRE(b.Add(want.back().first, want.back().second).ok());
      REQUIRE(b.Add("small-" + std::to_string(i), i).ok());
      want.emplace_back("small-" + std::to_string(i), i);
    }
    const absl::Status s = b.Add(std::string(kMaxKeyBytes + 1, 'x'), 1);
    CHECK(absl::IsInvalidArgument(s));
    REQUIRE(b.Finish().ok());
    CHECK(b.stats().spilled_runs > 1);
    const Merger m({&b});
    std::sort(want.begin(), want.end());
    Entries got;
    REQUIRE(Collect(m, nullptr, nullptr, &got).ok());
    REQUIRE(got == want);
  }
  CHECK(temp.ts->stats().bytes_allocated == 0);
}

TEST_CASE("sort: a builder without temp space keeps every entry in memory", "[sort]") {
  Entries want = MakeEntries(5000, 23);
  RunBuilder b(nullptr, 1024);
  for (const auto& [k, v] : want) REQUIRE(b.Add(k, v).ok());
  REQUIRE(b.Finish().ok());
  CHECK(b.stats().spilled_runs == 0);
  CHECK(b.stats().runs == 1);
  // The entries, and at Finish a second arena their copy into key order takes.
  uint64_t arena = 0;
  for (const auto& [k, v] : want) arena += 2 + k.size() + 8;
  CHECK(b.stats().peak_memory == MemoryOf(want) + arena);
  const Merger m({&b});
  std::sort(want.begin(), want.end());
  Entries got;
  REQUIRE(Collect(m, nullptr, nullptr, &got).ok());
  REQUIRE(got == want);
}

TEST_CASE("sort: an error from emit stops the merge and is its result", "[sort]") {
  Temp temp;
  RunBuilder b(temp.ts.get(), 4 << 10);
  for (int i = 0; i < 2000; ++i) REQUIRE(b.Add("k" + std::to_string(i * 7919 % 2003), i).ok());
  REQUIRE(b.Finish().ok());
  const Merger m({&b});
  int seen = 0;
  const absl::Status s = m.MergeRange(nullptr, nullptr, [&](std::string_view, uint64_t) {
    return ++seen == 100 ? absl::CancelledError("enough") : absl::OkStatus();
  });
  CHECK(s.code() == absl::StatusCode::kCancelled);
  CHECK(seen == 100);
}

TEST_CASE(
    "sort: a temp space that fills up is ResourceExhausted, keeps what was added, leaks nothing",
    "[sort]") {
  io::TempSpaceOptions o;
  o.dirs = {"/proc/no-such-dir-for-ember"};  // no spill file can be created
  o.cache_limit = 64 << 10;                  // the first spills fit in memory
  o.block_size = 4 << 10;
  io::TempSpace ts(o);
  Entries added;
  {
    RunBuilder b(&ts, 8 << 10);
    absl::Status s;
    for (int i = 0; i < 20000; ++i) {
      const std::string k = "key-" + std::to_string(i * 7919 % 20011);
      s = b.Add(k, i);
      if (!s.ok()) break;
      added.emplace_back(k, i);
    }
    CHECK(absl::IsResourceExhausted(s));
    CHECK(b.stats().spilled_runs > 0);
    CHECK_FALSE(b.Add("one more", 1).ok());  // still full; nothing breaks
    // What was added is still there: the spilled runs and the entries in memory.
    REQUIRE(b.Finish().ok());
    const Merger m({&b});
    std::sort(added.begin(), added.end());
    Entries got;
    REQUIRE(Collect(m, nullptr, nullptr, &got).ok());
    REQUIRE(got == added);
  }
  CHECK(ts.stats().bytes_allocated == 0);
}

// Truncates the (unlinked, still open) spill files in `dir` to nothing, through /proc/self/fd:
// every later read of them comes back short. Returns how many.
int TruncateSpillFiles(const std::string& dir) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const std::string target = std::filesystem::read_symlink(e.path(), ec).string();
    if (ec || target.rfind(dir + "/", 0) != 0) continue;
    const int fd = ::open(e.path().c_str(), O_RDWR);
    if (fd < 0) continue;
    if (::ftruncate(fd, 0) == 0) ++n;
    ::close(fd);
  }
  return n;
}

TEST_CASE("sort: a spilled run that cannot be read back fails the merge, not the process",
          "[sort]") {
  testing::TempDir dir;
  REQUIRE(dir.ok());
  const std::string f = dir.File("x");
  io::TempSpaceOptions o;
  o.dirs = {f.substr(0, f.size() - 2)};
  o.cache_limit = 0;  // every run in a file
  o.block_size = 64 << 10;
  io::TempSpace ts(o);
  {
    std::vector<std::unique_ptr<RunBuilder>> b;
    for (int i = 0; i < 2; ++i) b.push_back(std::make_unique<RunBuilder>(&ts, 16 << 10));
    for (int i = 0; i < 20000; ++i) {
      REQUIRE(
          b[static_cast<size_t>(i % 2)]->Add("key-" + std::to_string(i * 7919 % 20011), i).ok());
    }
    for (auto& x : b) REQUIRE(x->Finish().ok());
    const Merger m({b[0].get(), b[1].get()});
    REQUIRE(m.stats().spilled_runs > 2);
    const std::vector<SplitPoint> sp = m.Splitters(3);
    REQUIRE(TruncateSpillFiles(o.dirs[0]) > 0);
    std::vector<absl::Status> status(sp.size() + 1);
    std::vector<std::thread> th;
    for (size_t r = 0; r < status.size(); ++r) {
      th.emplace_back([&, r] {
        Entries got;
        status[r] =
            Collect(m, r == 0 ? nullptr : &sp[r - 1], r == sp.size() ? nullptr : &sp[r], &got);
      });
    }
    for (auto& t : th) t.join();
    for (const absl::Status& s : status) {
      INFO(s.ToString());
      CHECK_FALSE(s.ok());
    }
  }
  CHECK(ts.stats().bytes_allocated == 0);
}

}  // namespace
}  // namespace ember::sort
