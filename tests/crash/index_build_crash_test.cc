// A SIGKILL at random moments of CREATE INDEX on a populated table (scan, sort with spills,
// merge, leaves written and evicted from a small cache, the commit): after the reopen the index
// is either absent or whole, Validate is clean, and no page is left unreachable (the open after
// the crash reclaims the build's pages).
#include <catch2/catch.hpp>
#include <random>
#include <string>

#include "ember/ember.h"
#include "tests/support/child_process.h"
#include "tests/support/db_util.h"

namespace ember {
namespace {

using testing::ChildLink;
using testing::OkOrDie;
using testing::ValueOrDie;

constexpr int64_t kRows = 150000;

Options BuildOptions() {
  Options o = testing::CreateOptions(4096, 256);  // small: the build evicts what it writes
  o.max_parallel_workers = 2;
  o.parallel_workers = 2;
  o.sort_memory_limit = 256 << 10;  // runs spill to the temp space
  return o;
}

TEST_CASE("index build crash: SIGKILL during CREATE INDEX leaves no index or the whole index",
          "[crash][fork][index_build]") {
  testing::TempDb tmp;
  {
    Options o = BuildOptions();
    o.cache_pages = 4096;
    auto db = testing::OpenOrFail(tmp.path(), o);
    Table t = VALUE_OR_FAIL(
        db->CreateTable({"w", {{"id", ColumnType::kInt64, false}, {"name", ColumnType::kString}}}));
    auto txn = VALUE_OR_FAIL(db->Begin());
    std::mt19937_64 rng(3);
    for (int64_t i = 0; i < kRows; ++i) {
      std::string w(3 + rng() % 12, 'a');
      for (char& c : w) c = static_cast<char>('a' + rng() % 26);
      REQUIRE_OK(txn->Insert(t, {i, w}).status());
    }
    REQUIRE_OK(txn->Commit());
    REQUIRE_OK(db->Close());
  }
  std::mt19937_64 rng(11);
  int built = 0, absent = 0;
  for (int round = 0; round < 6; ++round) {
    const int delay_ms = static_cast<int>(rng() % 400);
    INFO("round " << round << ", kill after " << delay_ms << " ms");
    const std::string path = tmp.path();
    testing::ForkAndKill(
        [&](const ChildLink& link) {
          auto db = ValueOrDie(Database::Open(path, BuildOptions()), "open");
          const char ready = 'R';
          ssize_t ignored = ::write(link.ready_fd, &ready, 1);
          (void)ignored;
          ::close(link.ready_fd);
          // Builds (and drops nothing: a second build of the same name fails AlreadyExists, so
          // a round after a whole build only reopens).
          absl::StatusOr<Index> ix = db->CreateIndex({"w_name", "w", {"name"}, false});
          if (!ix.ok() && !absl::IsAlreadyExists(ix.status())) OkOrDie(ix.status(), "build");
          OkOrDie(db->Close(), "close");
          ::_exit(0);
        },
        delay_ms);
    auto db = testing::OpenOrFail(tmp.path(), BuildOptions());
    ValidationReport r = VALUE_OR_FAIL(db->Validate());
    INFO((r.errors.empty() ? std::string() : r.errors[0]));
    REQUIRE(r.errors.empty());
    REQUIRE(r.unreachable_pages.empty());
    absl::StatusOr<Index> ix = db->GetIndex("w_name");
    if (ix.ok()) {
      ++built;
      CHECK(r.index_entries == static_cast<uint64_t>(kRows));  // the whole index
      auto txn = VALUE_OR_FAIL(db->Begin());
      auto cur = VALUE_OR_FAIL(txn->IndexScan(*ix, {}, {}));
      int64_t n = 0;
      std::string last;
      while (cur->Valid()) {
        const std::string name = std::get<std::string>(cur->row()[1]);
        REQUIRE(name >= last);
        last = name;
        ++n;
        REQUIRE_OK(cur->Next());
      }
      CHECK(n == kRows);
    } else {
      ++absent;
      REQUIRE(absl::IsNotFound(ix.status()));
      CHECK(r.index_entries == 0);
    }
    REQUIRE_OK(db->Close());
  }
  INFO(built << " rounds found the index, " << absent << " did not");
  CHECK(built + absent == 6);
}

}  // namespace
}  // namespace ember
