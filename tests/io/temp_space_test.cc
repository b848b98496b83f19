// TempSpace: memory up to the limit then spill files, extent reuse, EMBER_TMP, stale files,
// directory fallback and errors.
#include "engine/io/temp_space.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <map>
#include <random>
#include <string>

#include "tests/support/temp_dir.h"

using ember::io::TempSpace;
using ember::io::TempSpaceOptions;

namespace {
int CountEntries(const std::string& dir) {
  int n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}
std::string Dir(const ember::testing::TempDir& t) {
  std::string f = t.File("x");
  return f.substr(0, f.size() - 2);
}
}  // namespace

TEST_CASE("temp space: data round-trips across memory and spilled blocks", "[io][temp]") {
  ember::testing::TempDir dir;
  REQUIRE(dir.ok());
  TempSpaceOptions o;
  o.dirs = {Dir(dir)};
  o.cache_limit = 64 << 10;  // 64 KB in memory, the rest spills
  o.block_size = 16 << 10;
  TempSpace ts(o);
  std::mt19937_64 rng(7);
  std::map<uint64_t, std::string> extents;
  for (int i = 0; i < 200; ++i) {
    std::string data(1 + rng() % 20000, '\0');
    for (char& c : data) c = static_cast<char>(rng());
    auto off = ts.Allocate(data.size());
    REQUIRE(off.ok());
    REQUIRE(ts.Write(*off, data.data(), data.size()).ok());
    extents[*off] = data;
  }
  for (const auto& [off, data] : extents) {
    std::string back(data.size(), '\0');
    REQUIRE(ts.Read(off, back.data(), back.size()).ok());
    REQUIRE(back == data);
  }
  auto st = ts.stats();
  CHECK(st.bytes_in_memory == 64u << 10);
  CHECK(st.bytes_on_disk > 0);
  CHECK(st.spills > 0);
  // Spill files are unlinked at once: the directory stays empty.
  CHECK(CountEntries(Dir(dir)) == 0);
}

TEST_CASE("temp space: released extents are reused and merged", "[io][temp]") {
  TempSpaceOptions o;
  o.cache_limit = 1 << 20;
  o.block_size = 64 << 10;
  TempSpace ts(o);
  auto a = ts.Allocate(1000), b = ts.Allocate(2000), c = ts.Allocate(3000);
  REQUIRE((a.ok() && b.ok() && c.ok()));
  ts.Release(*a, 1000);
  ts.Release(*b, 2000);
  // The two freed neighbours merged: a 3000-byte extent fits where a was.
  auto d = ts.Allocate(3000);
  REQUIRE(d.ok());
  CHECK(*d == *a);
  CHECK(ts.stats().bytes_allocated == 6000);
  // Extending the last extent in place works; extending one followed by a used one does not.
  CHECK(ts.TryExtend(*c, 3000, 9000));
  CHECK_FALSE(ts.TryExtend(*d, 3000, 4000));
  ts.Release(*c, 9000);
  ts.Release(*d, 3000);
  CHECK(ts.stats().bytes_allocated == 0);
  auto e = ts.Allocate(10);
  REQUIRE(e.ok());
  CHECK(*e == 0);  // everything came back: allocation starts at the beginning again
}

TEST_CASE("temp space: EMBER_TMP overrides the configured directories", "[io][temp]") {
  ember::testing::TempDir dir;
  setenv("EMBER_TMP", (Dir(dir) + ";/elsewhere").c_str(), 1);
  auto dirs = TempSpace::ResolveDirs({"/configured"});
  unsetenv("EMBER_TMP");
  REQUIRE(dirs.size() == 2);
  CHECK(dirs[0] == Dir(dir));
  CHECK(TempSpace::ResolveDirs({"/configured"}) == std::vector<std::string>{"/configured"});
}

TEST_CASE("temp space: unusable directories are skipped, none usable is a clear error",
          "[io][temp]") {
  ember::testing::TempDir dir;
  TempSpaceOptions o;
  o.dirs = {"/nonexistent/ember", Dir(dir)};
  o.cache_limit = 0;
  o.block_size = 4096;
  TempSpace ok_ts(o);
  auto off = ok_ts.Allocate(10000);
  REQUIRE(off.ok());
  CHECK(ok_ts.stats().spills == 3);

  o.dirs = {"/nonexistent/ember"};
  TempSpace bad(o);
  auto r = bad.Allocate(100);
  REQUIRE_FALSE(r.ok());
  CHECK(absl::IsResourceExhausted(r.status()));
  CHECK(std::string(r.status().message()).find("temp space full") != std::string::npos);
  CHECK(bad.Read(0, nullptr, 0).ok());
  char c;
  CHECK(absl::IsOutOfRange(bad.Read(0, &c, 1)));
}

TEST_CASE("temp space: stale spill files of dead processes are removed", "[io][temp]") {
  ember::testing::TempDir dir;
  // A pid that cannot exist (above pid_max) stands for a crashed process.
  const std::string stale = Dir(dir) + "/ember_tmp_999999999_1";
  const std::string live = Dir(dir) + "/ember_tmp_" + std::to_string(getpid()) + "_1";
  const std::string other = Dir(dir) + "/unrelated";
  for (const auto& p : {stale, live, other}) close(open(p.c_str(), O_CREAT | O_WRONLY, 0600));
  CHECK(TempSpace::RemoveStaleFiles({Dir(dir)}) == 1);
  CHECK(access(stale.c_str(), F_OK) != 0);
  CHECK(access(live.c_str(), F_OK) == 0);
  CHECK(access(other.c_str(), F_OK) == 0);
}
