// Tests of when stored BLOBs go (engine/db/commit_rollback.cc FreeDroppedBlobs and the
// undo / garbage-collection paths): a transaction that overwrites its own versions, or writes
// over a rolled-back version, leaves no orphan BLOB behind, whether it commits, rolls back
// through its undo log or without one; and no BLOB goes while a version or an undo image that
// can come back still names it.
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ember/ember.h"
#include "tests/support/blob_db_util.h"
#include "tests/support/db_util.h"

namespace ember::testing {
namespace {

constexpr uint32_t kPageSize = 4096;
constexpr size_t kBlobBytes = 40 * 1024;  // a page list (level 1) at 4 KiB pages
constexpr size_t kLongBytes = 3000;       // a bytes value stored out of line at 4 KiB pages

TableSchema FilesSchema() {
  return TableSchema{"files",
                     {{"id", ColumnType::kInt64, false},
                      {"data", ColumnType::kBytes, true},
                      {"body", ColumnType::kBlob, true}}};
}

Options LifetimeOptions() {
  Options o = BlobOptions(kPageSize, 1);
  o.gc_policy = GcPolicy::kCooperative;  // what CollectGarbage frees is all there is to free
  return o;
}

// The row with id `key` as `t` sees it (its data and its BLOB's bytes), or nullopt.
struct Seen {
  std::string data;
  std::string body;
};
std::optional<Seen> SeeRow(Transaction* t, const Table& table, int64_t key) {
  auto rows = VALUE_OR_FAIL(ScanAll(t, table));
  for (const auto& [rid, row] : rows) {
    if (std::get<int64_t>(row[0]) != key) continue;
    return Seen{std::get<std::string>(row[1]), ReadAll(t, BodyOf(row))};
  }
  return std::nullopt;
}

Row FileRow(Transaction* t, int64_t key, uint64_t seed) {
  return Row{key, Pattern(seed, kLongBytes), WriteBlob(t, Pattern(seed + 1000, kBlobBytes))};
}

void RequireSeen(Transaction* t, const Table& table, int64_t key, uint64_t seed) {
  std::optional<Seen> s = SeeRow(t, table, key);
  REQUIRE(s.has_value());
  REQUIRE_BYTES(s->data, Pattern(seed, kLongBytes));
  REQUIRE_BYTES(s->body, Pattern(seed + 1000, kBlobBytes));
}

// Collects all garbage, then requires a clean Validate: no orphan BLOB, no unreachable page.
void CollectAndValidate(Database* db) {
  REQUIRE_OK(db->CollectGarbage());
  RequireCleanValidate(db);
}

// A committed row with id `key` and the values of `seed`.
RecordId InsertCommitted(Database* db, const Table& table, int64_t key, uint64_t seed) {
  std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
  const RecordId id = VALUE_OR_FAIL(t->Insert(table, FileRow(t.get(), key, seed)));
  REQUIRE_OK(t->Commit());
  return id;
}

// After collecting: Validate is clean, and a new transaction sees row `key` with the values of
// `seed` (0: no such row).
void RequireCommitted(Database* db, const Table& table, int64_t key, uint64_t seed) {
  CollectAndValidate(db);
  std::unique_ptr<Transaction> r = VALUE_OR_FAIL(db->Begin());
  if (seed == 0) {
    CHECK_FALSE(SeeRow(r.get(), table, key).has_value());
  } else {
    RequireSeen(r.get(), table, key, seed);
  }
  REQUIRE_OK(r->Commit());
}

}  // namespace

TEST_CASE("blob lifetime: a transaction's own overwritten versions leave no BLOB behind",
          "[blob][gc]") {
  // Insert a row, then replace its BLOB and its long bytes value several times in the same
  // transaction, then delete it or not; commit or roll back, with and without an undo log.
  const bool no_savepoint = GENERATE(false, true);
  const bool commit = GENERATE(true, false);
  const bool delete_at_end = GENERATE(false, true);
  CAPTURE(no_savepoint, commit, delete_at_end);
  Scratch tdb;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), LifetimeOptions());
  Table files = VALUE_OR_FAIL(db->CreateTable(FilesSchema()));
  TransactionOptions to;
  to.no_savepoint = no_savepoint;
  std::vector<uint64_t> pages;
  for (int round = 0; round < 4; ++round) {
    CAPTURE(round);
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin(to));
    const RecordId id = VALUE_OR_FAIL(t->Insert(files, FileRow(t.get(), round, 1)));
    for (uint64_t seed = 2; seed <= 6; ++seed) {
      REQUIRE_OK(t->Update(files, id, FileRow(t.get(), round, seed)));
    }
    RequireSeen(t.get(), files, round, 6);
    if (delete_at_end) REQUIRE_OK(t->Delete(files, id));
    REQUIRE_OK(commit ? t->Commit() : t->Rollback());
    RequireCommitted(db.get(), files, round, commit && !delete_at_end ? 6 : 0);
    pages.push_back(db->stats().page_count);
  }
  // Space of the dropped BLOBs is reused: rounds after the first do not add their size again.
  const uint64_t per_version = (kBlobBytes + kLongBytes) / kPageSize + 2;
  CHECK(pages[3] <= pages[0] + (commit && !delete_at_end ? 3 * 2 * per_version : per_version));
}

TEST_CASE("blob lifetime: an undo image keeps its BLOBs until it can no longer come back",
          "[blob][gc]") {
  Scratch tdb;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), LifetimeOptions());
  Table files = VALUE_OR_FAIL(db->CreateTable(FilesSchema()));
  const RecordId id = InsertCommitted(db.get(), files, 1, 1);
  std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
  REQUIRE_OK(t->Savepoint("a"));
  REQUIRE_OK(t->Update(files, id, FileRow(t.get(), 1, 2)));
  REQUIRE_OK(t->Savepoint("b"));
  REQUIRE_OK(t->Update(files, id, FileRow(t.get(), 1, 3)));  // drops version 2's BLOBs
  REQUIRE_OK(t->Update(files, id, FileRow(t.get(), 1, 4)));  // drops version 3's
  REQUIRE_OK(t->RollbackToSavepoint("b"));                   // version 2 is back
  RequireSeen(t.get(), files, 1, 2);
  REQUIRE_OK(t->Update(files, id, FileRow(t.get(), 1, 5)));
  REQUIRE_OK(t->ReleaseSavepoint("b"));  // the image of version 2 goes with it
  REQUIRE_OK(t->Savepoint("c"));
  REQUIRE_OK(t->Update(files, id, FileRow(t.get(), 1, 6)));
  REQUIRE_OK(t->RollbackToSavepoint("c"));
  RequireSeen(t.get(), files, 1, 5);
  SECTION("commit") {
    REQUIRE_OK(t->Commit());
    RequireCommitted(db.get(), files, 1, 5);
  }
  SECTION("rollback to the first savepoint, then commit") {
    REQUIRE_OK(t->RollbackToSavepoint("a"));
    RequireSeen(t.get(), files, 1, 1);
    REQUIRE_OK(t->Commit());
    RequireCommitted(db.get(), files, 1, 1);
  }
  SECTION("rollback") {
    REQUIRE_OK(t->Rollback());
    RequireCommitted(db.get(), files, 1, 1);
  }
}

TEST_CASE("blob lifetime: a kept BLOB stays while the committed version still names it",
          "[blob][gc]") {
  // The transaction's first version keeps the committed version's BLOB, its second drops it:
  // the committed version (now a back version) still names it, so a snapshot older than the
  // transaction reads it until the collector removes that version.
  Scratch tdb;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), LifetimeOptions());
  Table files = VALUE_OR_FAIL(db->CreateTable(FilesSchema()));
  const RecordId id = InsertCommitted(db.get(), files, 1, 1);
  std::unique_ptr<Transaction> reader = VALUE_OR_FAIL(db->Begin());
  {
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    const BlobId kept = FindBody(t.get(), files, 1);
    REQUIRE_OK(t->Update(files, id, Row{int64_t(1), std::string("short"), kept}));
    REQUIRE_OK(t->Update(files, id, FileRow(t.get(), 1, 7)));
    REQUIRE_OK(t->Commit());
  }
  REQUIRE_OK(db->CollectGarbage());
  RequireSeen(reader.get(), files, 1, 1);
  REQUIRE_OK(reader->Commit());
  RequireCommitted(db.get(), files, 1, 7);
}

TEST_CASE("blob lifetime: writing over a rolled-back version frees its BLOBs", "[blob][gc]") {
  // A transaction without an undo log leaves its versions dead at rollback; the next writer of
  // the record replaces the dead version in place, and with it go the BLOBs only it named.
  const bool writer_commits = GENERATE(true, false);
  const bool writer_deletes = GENERATE(false, true);
  CAPTURE(writer_commits, writer_deletes);
  Scratch tdb;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), LifetimeOptions());
  Table files = VALUE_OR_FAIL(db->CreateTable(FilesSchema()));
  const RecordId id = InsertCommitted(db.get(), files, 1, 1);
  {
    TransactionOptions to;
    to.no_savepoint = true;
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin(to));
    REQUIRE_OK(t->Update(files, id, FileRow(t.get(), 1, 2)));
    REQUIRE_OK(t->Rollback());
  }
  {
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    if (writer_deletes) {
      REQUIRE_OK(t->Delete(files, id));
    } else {
      REQUIRE_OK(t->Update(files, id, FileRow(t.get(), 1, 3)));
    }
    REQUIRE_OK(writer_commits ? t->Commit() : t->Rollback());
  }
  RequireCommitted(db.get(), files, 1, !writer_commits ? 1 : writer_deletes ? 0 : 3);
}

TEST_CASE("blob lifetime: an update that leaves a long value as it was keeps its BLOB",
          "[blob][gc]") {
  // Updating another column of a row holding a file must not store the file again: the
  // database does not grow however often it happens, and no write of the file's size is made.
  const int level = GENERATE(0, 3);
  CAPTURE(level);
  Scratch tdb;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), LifetimeOptions());
  TableSchema schema = FilesSchema();
  schema.columns[1].zstd_level = level;
  Table files = VALUE_OR_FAIL(db->CreateTable(schema));
  const size_t size = 256 * 1024;
  const std::string file = Pattern(5, size);
  RecordId id;
  {
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    id = VALUE_OR_FAIL(t->Insert(files, Row{int64_t(0), file, BlobId{}}));
    REQUIRE_OK(t->Commit());
  }
  const uint64_t pages = db->stats().page_count;
  for (int64_t i = 1; i <= 20; ++i) {
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    REQUIRE_OK(t->Update(files, id, Row{i, file, BlobId{}}));
    REQUIRE_OK(t->Update(files, id, Row{i, file, BlobId{}}));  // over our own version, too
    CHECK(t->counters().marks < size / kPageSize / 4);
    REQUIRE_OK(t->Commit());
  }
  CHECK(db->stats().page_count <= pages + 4);
  // A value of the same length that differs in its last byte is a new value.
  std::string changed = file;
  changed.back() ^= 1;
  {
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    REQUIRE_OK(t->Update(files, id, Row{int64_t(21), changed, BlobId{}}));
    REQUIRE_OK(t->Commit());
  }
  CollectAndValidate(db.get());
  std::unique_ptr<Transaction> r = VALUE_OR_FAIL(db->Begin());
  auto rows = VALUE_OR_FAIL(ScanAll(r.get(), files));
  REQUIRE(rows.size() == 1);
  CHECK(std::get<int64_t>(rows[0].second[0]) == 21);
  REQUIRE_BYTES(std::get<std::string>(rows[0].second[1]), changed);
  REQUIRE_OK(r->Commit());
}

}  // namespace ember::testing
