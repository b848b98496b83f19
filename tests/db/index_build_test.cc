// CREATE INDEX on a populated table through the public API: the bulk build (scan, sort, merge,
// bottom-up build on several workers, sorts spilling to temp space) gives exactly the entries of
// the build one entry at a time, for tables with duplicate keys, NULLs, multi-column and long
// keys, and versions of committed, active and rolled-back transactions; unique violations leave
// nothing behind; Validate is clean after every build; writers of other tables are not held up
// by a build, and the table's own writers are (and their changes reach the new index).
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ember/ember.h"
#include "engine/db/database_impl.h"
#include "engine/index/btree.h"
#include "tests/support/db_util.h"
#include "tests/support/fault_db.h"

namespace ember {
namespace {

using testing::CreateOptions;
using testing::IsError;
using testing::OpenOrFail;
using testing::RequireValid;
using testing::TempDb;

// Every (entry, value) of an index's tree, in order, through BTree::Check (which also checks
// the tree's structure).
std::vector<std::pair<std::string, uint64_t>> TreeEntries(const Index& ix) {
  std::vector<std::pair<std::string, uint64_t>> out;
  std::vector<std::string> errors;
  std::vector<uint32_t> pages;
  REQUIRE_OK(internal::IndexState::From(ix)->btree()->Check(
      &errors, [&](std::string_view k, uint64_t v) { out.emplace_back(std::string(k), v); },
      &pages));
  INFO(errors.size() << " tree problems, the first: " << (errors.empty() ? "" : errors[0]));
  REQUIRE(errors.empty());
  return out;
}

// T(id int64, a string, b int64, c string) with rows whose keys repeat, hold NULLs and long
// strings, and versions of every kind: committed, updated (back versions with other keys),
// deleted, rolled back (dead), and an active transaction's.
struct Fixture {
  TempDb tmp;
  std::unique_ptr<Database> db;
  Table t;
  std::unique_ptr<Transaction> active;  // left open over the builds

  Fixture(int64_t rows, uint64_t sort_memory, uint64_t seed) {
    Options o = CreateOptions(4096, 1024);
    o.max_parallel_workers = 4;
    o.gc_policy = GcPolicy::kCooperative;  // nothing collects between the builds compared
    o.sort_memory_limit = sort_memory;
    db = OpenOrFail(tmp.path(), o);
    t = VALUE_OR_FAIL(db->CreateTable({"t",
                                       {{"id", ColumnType::kInt64, false},
                                        {"a", ColumnType::kString},
                                        {"b", ColumnType::kInt64},
                                        {"c", ColumnType::kString}}}));
    std::mt19937_64 rng(seed);
    auto value = [&](int64_t id) -> Row {
      Row r{id};
      const uint64_t x = rng() % 100;
      if (x < 10) r.push_back(std::monostate{});
      else if (x < 15)
        r.push_back(std::string(200 + rng() % 500, static_cast<char>('a' + rng() % 3)));
      else r.push_back(absl::StrCat("w", rng() % (rows / 4 + 1)));
      r.push_back(x < 20 ? Value(std::monostate{}) : Value(static_cast<int64_t>(rng() % 50)));
      r.push_back(std::string(rng() % 30, 'z'));
      return r;
    };
    std::vector<RecordId> rids;
    {
      auto txn = VALUE_OR_FAIL(db->Begin());
      for (int64_t id = 0; id < rows; ++id)
        rids.push_back(VALUE_OR_FAIL(txn->Insert(t, value(id))));
      REQUIRE_OK(txn->Commit());
    }
    {  // updates (back versions with other keys) and deletes, committed
      auto txn = VALUE_OR_FAIL(db->Begin());
      for (int64_t id = 0; id < rows; id += 3) REQUIRE_OK(txn->Update(t, rids[id], value(id)));
      for (int64_t id = 1; id < rows; id += 11) REQUIRE_OK(txn->Delete(t, rids[id]));
      REQUIRE_OK(txn->Commit());
    }
    {  // rolled back without an undo log: dead versions stay until collected
      TransactionOptions to;
      to.no_savepoint = true;
      auto txn = VALUE_OR_FAIL(db->Begin(to));
      for (int64_t id = 2; id < rows; id += 7) {
        if (id % 11 != 1) REQUIRE_OK(txn->Update(t, rids[id], value(id)));  // not deleted
      }
      REQUIRE_OK(txn->Rollback());
    }
    active = VALUE_OR_FAIL(db->Begin());
    for (int64_t id = 4; id < rows; id += 13) {
      if (id % 11 != 1) REQUIRE_OK(active->Update(t, rids[id], value(id)));
    }
  }
};

TEST_CASE("index build: the bulk build makes exactly the entries of the build by inserts",
          "[db][index_build]") {
  const int workers = GENERATE(1, 2, 4);
  // 64 KB of sort memory a worker (the least share a worker gets) makes every worker spill
  // several runs; 64 MB none.
  const bool small = GENERATE(true, false);
  const uint64_t sort_memory =
      small ? static_cast<uint64_t>(workers) * (64 << 10) : uint64_t{64} << 20;
  INFO(workers << " workers, sort memory " << sort_memory);
  Fixture f(3000, sort_memory, 11);
  struct Shape {
    std::vector<std::string> columns;
    bool unique;
  };
  for (const Shape& shape : {Shape{{"a"}, false}, Shape{{"b", "a"}, false},
                             Shape{{"c", "b", "a"}, false}, Shape{{"id"}, true}}) {
    const std::string cols = absl::StrJoin(shape.columns, "_");
    INFO("columns " << cols);
    IndexBuildOptions bulk;
    bulk.workers = workers;
    IndexBuildOptions inserts;
    inserts.method = IndexBuildOptions::Method::kInsert;
    Index x =
        VALUE_OR_FAIL(f.db->CreateIndex({"bulk_" + cols, "t", shape.columns, shape.unique}, bulk));
    Index y = VALUE_OR_FAIL(
        f.db->CreateIndex({"ins_" + cols, "t", shape.columns, shape.unique}, inserts));
    const auto bulk_entries = TreeEntries(x);
    REQUIRE(bulk_entries.size() >= 2500);
    REQUIRE(bulk_entries == TreeEntries(y));
    IndexStats st = VALUE_OR_FAIL(f.db->GetIndexStats(x));
    CHECK(st.built);
    CHECK(st.workers == workers);
    CHECK(st.sort_peak_memory <= sort_memory);
    CHECK(st.entries == bulk_entries.size());
    CHECK(st.distinct_keys > 0);
    CHECK(st.distinct_keys <= st.entries);
    if (shape.unique) CHECK(st.distinct_keys == 3000);  // ids never change; nothing collected
    if (sort_memory < (1 << 20)) {
      CHECK(st.spill_bytes > 0);
      CHECK(st.sort_runs >= 2);  // a spilled run and more
    }
    RequireValid(f.db.get(), "after building on " + cols);
  }
  // The active transaction's later changes and its commit reach the new indexes.
  REQUIRE_OK(f.active->Commit());
  RequireValid(f.db.get(), "after the active transaction committed");
}

TEST_CASE("index build: a unique index over duplicate live keys fails and leaves nothing",
          "[db][index_build]") {
  const int workers = GENERATE(1, 3);
  Fixture f(3000, uint64_t{64} << 10, 5);
  REQUIRE_OK(f.active->Rollback());
  IndexBuildOptions o;
  o.workers = workers;
  // Column b holds 50 values over 3,000 rows.
  absl::StatusOr<Index> ix = f.db->CreateIndex({"u_b", "t", {"b"}, true}, o);
  REQUIRE(IsError(ix.status(), absl::StatusCode::kAlreadyExists, "u_b"));
  REQUIRE(IsError(f.db->GetIndex("u_b").status(), absl::StatusCode::kNotFound));
  RequireValid(f.db.get(), "after the failed build");  // no page left unreachable
  // The name is free again, and a non-unique index on the column builds.
  REQUIRE_OK(f.db->CreateIndex({"u_b", "t", {"b"}, false}, o).status());
  RequireValid(f.db.get(), "after the second build");
}

TEST_CASE("index build: a unique key kept only by old or dead versions is no duplicate",
          "[db][index_build]") {
  TempDb tmp;
  Options opts = CreateOptions(4096, 256);
  opts.max_parallel_workers = 2;
  auto db = OpenOrFail(tmp.path(), opts);
  Table t = VALUE_OR_FAIL(db->CreateTable({"t", {{"k", ColumnType::kInt64}}}));
  std::vector<RecordId> rids;
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    for (int64_t i = 0; i < 2000; ++i) rids.push_back(VALUE_OR_FAIL(txn->Insert(t, {i})));
    REQUIRE_OK(txn->Commit());
  }
  {  // record 0 moves to a key another record held before it moved on; record 1 is deleted
    auto txn = VALUE_OR_FAIL(db->Begin());
    REQUIRE_OK(txn->Update(t, rids[5], {int64_t{5000}}));
    REQUIRE_OK(txn->Update(t, rids[0], {int64_t{5}}));
    REQUIRE_OK(txn->Delete(t, rids[1]));
    REQUIRE_OK(txn->Insert(t, {int64_t{1}}).status());
    REQUIRE_OK(txn->Commit());
  }
  {  // a rolled-back duplicate
    TransactionOptions to;
    to.no_savepoint = true;
    auto txn = VALUE_OR_FAIL(db->Begin(to));
    REQUIRE_OK(txn->Update(t, rids[7], {int64_t{8}}));
    REQUIRE_OK(txn->Rollback());
  }
  auto old_reader = VALUE_OR_FAIL(db->Begin());  // keeps the old versions from collection
  (void)old_reader;
  const int workers = GENERATE(1, 2);
  IndexBuildOptions o;
  o.workers = workers;
  Index ix = VALUE_OR_FAIL(db->CreateIndex({"uk", "t", {"k"}, true}, o));
  RequireValid(db.get(), "after the build");
  auto txn = VALUE_OR_FAIL(db->Begin());
  auto hit = VALUE_OR_FAIL(txn->Lookup(ix, {int64_t{5}}));
  REQUIRE(hit.has_value());
  CHECK(hit->first.value == rids[0].value);
}

TEST_CASE("index build: writers of other tables go on during a build, its own table's wait",
          "[db][index_build]") {
  TempDb tmp;
  Options opts = CreateOptions(4096, 4096);
  opts.max_parallel_workers = 2;
  auto db = OpenOrFail(tmp.path(), opts);
  Table big = VALUE_OR_FAIL(db->CreateTable({"big", {{"k", ColumnType::kInt64}}}));
  Table other = VALUE_OR_FAIL(db->CreateTable({"other", {{"k", ColumnType::kInt64}}}));
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    for (int64_t i = 0; i < 20000; ++i) REQUIRE_OK(txn->Insert(big, {i * 7 % 20011}).status());
    REQUIRE_OK(txn->Commit());
  }
  // The build stops at its hook until the writers are done (or have had 60 s).
  auto* impl = static_cast<db::DatabaseImpl*>(db.get());
  std::atomic<int> phase{0};  // 1: the build is inside; 2: let it go on
  impl->TEST_SetIndexBuildHook([&] {
    phase.store(1);
    for (int i = 0; i < 60000 && phase.load() != 2; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  absl::StatusOr<Index> built;
  std::thread builder([&] { built = db->CreateIndex({"big_k", "big", {"k"}, false}); });
  while (phase.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // Inside the build: another table's writer commits, a reader of the indexed table reads.
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    for (int64_t i = 0; i < 100; ++i) REQUIRE_OK(txn->Insert(other, {i}).status());
    REQUIRE_OK(txn->Commit());
    auto reader = VALUE_OR_FAIL(db->Begin());
    auto cur = VALUE_OR_FAIL(reader->Scan(big));
    int64_t n = 0;
    while (cur->Valid()) {
      ++n;
      REQUIRE_OK(cur->Next());
    }
    CHECK(n == 20000);
  }
  CHECK(phase.load() == 1);  // all of that ran while the build was held
  // A writer of the indexed table waits for the build; its row reaches the new index.
  std::atomic<bool> wrote{false};
  std::thread writer([&] {
    auto txn = VALUE_OR_FAIL(db->Begin());
    REQUIRE_OK(txn->Insert(big, {int64_t{-1}}).status());
    wrote.store(true);
    REQUIRE_OK(txn->Commit());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(wrote.load());  // (it cannot have got past the table's lock)
  phase.store(2);
  builder.join();
  writer.join();
  impl->TEST_SetIndexBuildHook(nullptr);
  REQUIRE_OK(built.status());
  auto txn = VALUE_OR_FAIL(db->Begin());
  auto hit = VALUE_OR_FAIL(txn->Lookup(*built, {int64_t{-1}}));
  CHECK(hit.has_value());
  RequireValid(db.get(), "after the build and the writes");
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

// The scan of a cold table reads its pages on the workers: a read that fails (EIO, from the
// k-th read on) in whichever worker meets it first is the build's result, the other workers
// stop, and the database is as it was: no index, no page left allocated, and the same build
// succeeds once the disk reads again.
TEST_CASE("index build: a read error in one worker cancels the build and changes nothing",
          "[db][index_build]") {
  for (const uint64_t k : {1u, 4u, 25u}) {
    INFO("reads fail from the " << k << "th on");
    TempDb tmp;
    Options o = CreateOptions(4096, 64);  // the table does not fit: the scan reads
    o.max_parallel_workers = 4;
    o.use_io_uring = false;
    o.gc_policy = GcPolicy::kCooperative;
    testing::FaultDb fdb = testing::CreateFaultDb(tmp.path(), o);
    io::FaultFile* ff = fdb.ff;
    std::unique_ptr<db::DatabaseImpl>& d = fdb.db;
    Database* db = d.get();
    Table t = VALUE_OR_FAIL(
        db->CreateTable({"t", {{"id", ColumnType::kInt64, false}, {"name", ColumnType::kString}}}));
    {
      auto txn = VALUE_OR_FAIL(db->Begin());
      for (int64_t i = 0; i < 30000; ++i) {
        REQUIRE_OK(txn->Insert(t, {i, absl::StrCat("name-", i * 7919 % 30011)}).status());
      }
      REQUIRE_OK(txn->Commit());
    }
    const uint64_t pages = db->stats().page_count;
    ff->FailReadAfter(k, EIO, /*sticky=*/true);
    IndexBuildOptions b;
    b.workers = 4;
    absl::Status s = db->CreateIndex({"t_name", "t", {"name"}, false}, b).status();
    ff->FailReadAfter(0, 0);
    INFO("CreateIndex: " << s.ToString());
    REQUIRE_FALSE(s.ok());
    CHECK(s.code() != absl::StatusCode::kCancelled);  // the worker's error, not the stop
    CHECK(IsError(db->GetIndex("t_name").status(), absl::StatusCode::kNotFound));
    ValidationReport r = VALUE_OR_FAIL(db->Validate());
    INFO((r.errors.empty() ? std::string() : r.errors[0]));
    CHECK(r.errors.empty());
    CHECK(r.unreachable_pages.empty());
    // Writers of the table go on; the build succeeds now, in the pages the failed one gave
    // back and the ones after them.
    {
      auto txn = VALUE_OR_FAIL(db->Begin());
      REQUIRE_OK(txn->Insert(t, {int64_t{-1}, std::string("after")}).status());
      REQUIRE_OK(txn->Commit());
    }
    Index ix = VALUE_OR_FAIL(db->CreateIndex({"t_name", "t", {"name"}, false}, b));
    auto txn = VALUE_OR_FAIL(db->Begin());
    CHECK(VALUE_OR_FAIL(txn->Lookup(ix, {std::string("after")})).has_value());
    CHECK(VALUE_OR_FAIL(txn->Lookup(ix, {std::string("name-7919")})).has_value());
    REQUIRE_OK(txn->Commit());
    CHECK(VALUE_OR_FAIL(db->GetIndexStats(ix)).entries == 30001);
    ValidationReport r2 = VALUE_OR_FAIL(db->Validate());
    CHECK(r2.errors.empty());
    CHECK(r2.unreachable_pages.empty());
    CHECK(db->stats().page_count >= pages);
    REQUIRE_OK(db->Close());
  }
}

}  // namespace
}  // namespace ember
