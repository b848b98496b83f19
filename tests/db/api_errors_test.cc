// The API's error contract on bad input and damaged files: nothing throws, and each
// failure has the documented status. A catalog record of the wrong types, a header whose
// transaction counters cannot fit in memory, a cache too large to allocate or past the
// machine, a directory opened as a database, a BLOB id naming nothing, calls on a closed
// database and its transactions, what Close does to an active transaction, and savepoints
// discarded by a rollback to an earlier one.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "ember/ember.h"
#include "engine/blob/blob_format.h"
#include "engine/db/database_impl.h"
#include "engine/page/data_page.h"
#include "engine/page/header_page.h"
#include "engine/page/page.h"
#include "engine/page/tip.h"
#include "engine/record/record_format.h"
#include "tests/support/db_util.h"

namespace ember {
namespace {

using testing::CreateOptions;
using testing::IsError;
using testing::OpenOrFail;
using testing::TempDb;

TableSchema DocsSchema() {
  return {"docs", {{"id", ColumnType::kInt64, false}, {"body", ColumnType::kBlob}}};
}

db::DatabaseImpl* Impl(Database* db) { return dynamic_cast<db::DatabaseImpl*>(db); }

// ---------------------------------------------------------------- catalog

// Commits `row` straight into the catalog (relation 0), as a damaged or foreign file would
// have it.
void AddCatalogRow(Database* db, const Row& row) {
  db::DatabaseImpl* impl = Impl(db);
  txn::TxnManager::Started t = VALUE_OR_FAIL(impl->txns()->Begin());
  std::string raw;
  record::EncodeRow(row, &raw);
  REQUIRE_OK(impl->RelationById(0)->Insert(t.id, raw).status());
  REQUIRE_OK(impl->txns()->Commit(t.id));
}

TEST_CASE("a catalog record with values of the wrong types is DataLoss at Open", "[db][errors]") {
  TempDb tmp;
  Row row;
  std::string what;
  // Catalog columns: kind, id, name, page, table, flags, definition.
  SECTION("a string id") {
    row = {int64_t{1}, "7", "t", int64_t{5}, "", int64_t{0}, ""};
    what = "wrong type";
  }
  SECTION("an integer name") {
    row = {int64_t{1}, int64_t{7}, int64_t{42}, int64_t{5}, "", int64_t{0}, ""};
    what = "wrong type";
  }
  SECTION("an index whose definition is NULL") {
    row = {int64_t{2}, int64_t{7}, "i", int64_t{5}, "docs", int64_t{0}, Value{}};
    what = "wrong type";
  }
  SECTION("a double page") {
    row = {int64_t{1}, int64_t{7}, "t", 5.0, "", int64_t{0}, ""};
    what = "wrong type";
  }
  SECTION("an unknown kind") {
    row = {int64_t{9}, int64_t{7}, "t", int64_t{5}, "", int64_t{0}, ""};
    what = "kind 9";
  }
  SECTION("a negative page") {
    row = {int64_t{1}, int64_t{7}, "t", int64_t{-3}, "", int64_t{0}, ""};
    what = "page -3";
  }
  SECTION("an id past 32 bits") {
    row = {int64_t{1}, int64_t{1} << 40, "t", int64_t{5}, "", int64_t{0}, ""};
    what = "relation id";
  }
  {
    auto db = OpenOrFail(tmp.path(), CreateOptions());
    REQUIRE_OK(db->CreateTable(DocsSchema()).status());
    AddCatalogRow(db.get(), row);
    REQUIRE_OK(db->Close());
  }
  for (int attempt = 0; attempt < 2; ++attempt) {  // the failed Open released the file
    absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(tmp.path(), Options{});
    INFO("status: " << db.status().ToString());
    REQUIRE(IsError(db.status(), absl::StatusCode::kDataLoss, "catalog record"));
    REQUIRE(IsError(db.status(), absl::StatusCode::kDataLoss, what));
  }
}

TEST_CASE("a header whose transaction counters span more than 2^32 ids is DataLoss",
          "[db][errors]") {
  TempDb tmp;
  const uint32_t ps = 4096;
  REQUIRE_OK(OpenOrFail(tmp.path(), CreateOptions(ps))->Close());
  // A sealed header (its checksum right) with next_txn far past the oldest interesting one:
  // the states between would not fit in memory.
  std::string bytes = testing::ReadFileBytes(tmp.path());
  auto* header = reinterpret_cast<uint8_t*>(bytes.data());
  page::HeaderFields h;
  REQUIRE_OK(page::ReadHeader(header, &h, "test"));
  h.next_txn = h.oit + (uint64_t{1} << 33);
  page::WriteHeader(header, h);
  page::SealPage(header, ps);
  testing::WriteFileBytes(tmp.path(), bytes);
  absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(tmp.path(), Options{});
  INFO("status: " << db.status().ToString());
  REQUIRE(IsError(db.status(), absl::StatusCode::kDataLoss, "next transaction"));
}

// ---------------------------------------------------------------- cache size

TEST_CASE("cache_pages past this machine's memory is InvalidArgument", "[db][errors]") {
  TempDb tmp;
  Options o = CreateOptions(32768, UINT32_MAX);  // 140 TB of frames
  absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(tmp.path(), o);
  INFO("status: " << db.status().ToString());
  REQUIRE(IsError(db.status(), absl::StatusCode::kInvalidArgument, "this machine's memory"));
  REQUIRE_FALSE(std::filesystem::exists(tmp.path()));
  // The same for an existing database, whose page size comes from its file.
  REQUIRE_OK(OpenOrFail(tmp.path(), CreateOptions(4096))->Close());
  Options big;
  big.cache_pages = UINT32_MAX;  // 16 TB of 4 KB frames
  db = Database::Open(tmp.path(), big);
  INFO("status: " << db.status().ToString());
  REQUIRE(IsError(db.status(), absl::StatusCode::kInvalidArgument, "cache_pages"));
  REQUIRE_OK(OpenOrFail(tmp.path(), Options{})->Close());
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
// Under a sanitizer the allocator reports an impossible allocation and exits instead of failing
// it, and an address-space limit breaks the sanitizer's own mappings: the allocation failure
// itself cannot be produced there (the InvalidArgument bound above still runs).
#else
TEST_CASE("a cache whose memory cannot be allocated is ResourceExhausted", "[db][errors][fork]") {
  TempDb tmp;
  REQUIRE_OK(OpenOrFail(tmp.path(), CreateOptions(8192))->Close());
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // In a child, so the limit cannot hurt the runner: 256 MB more address space than it has
    // now, and a 2 GB cache (within the memory of any machine this runs on).
    auto fail = [](const std::string& m) {
      const std::string line = "cache child: " + m + "\n";
      ssize_t ignored = ::write(2, line.data(), line.size());
      (void)ignored;
      ::_exit(3);
    };
    std::ifstream statm("/proc/self/statm");
    uint64_t vm_pages = 0;
    if (!(statm >> vm_pages)) fail("cannot read /proc/self/statm");
    const uint64_t limit = vm_pages * uint64_t(::sysconf(_SC_PAGESIZE)) + (uint64_t{256} << 20);
    struct rlimit rl = {limit, limit};
    if (::setrlimit(RLIMIT_AS, &rl) != 0) fail("setrlimit");
    Options o;
    o.cache_pages = (uint32_t{2} << 30) / 8192;
    absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(tmp.path(), o);
    if (db.ok()) fail("Open succeeded");
    if (!absl::IsResourceExhausted(db.status()) ||
        std::string(db.status().message()).find("buffer cache") == std::string::npos) {
      fail("wrong status: " + db.status().ToString());
    }
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  INFO("the child's message is on stderr");
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  // Nothing was written by the refused Open, and the lock went with the child.
  auto db = OpenOrFail(tmp.path(), Options{});
  REQUIRE(VALUE_OR_FAIL(db->Validate()).ok());
  REQUIRE_OK(db->Close());
}
#endif

// ---------------------------------------------------------------- paths and ids

TEST_CASE("opening a directory is InvalidArgument", "[db][errors]") {
  TempDb tmp;
  const std::string dir = tmp.File("a_directory");
  std::filesystem::create_directory(dir);
  for (bool create : {false, true}) {
    Options o;
    o.create_if_missing = create;
    absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(dir, o);
    INFO("status: " << db.status().ToString());
    REQUIRE(IsError(db.status(), absl::StatusCode::kInvalidArgument, dir));
    REQUIRE(IsError(db.status(), absl::StatusCode::kInvalidArgument, "a directory"));
    REQUIRE(std::filesystem::is_directory(dir));
  }
}

TEST_CASE("OpenBlob of an id that names no BLOB is NotFound naming the id", "[db][errors]") {
  TempDb tmp;
  auto db = OpenOrFail(tmp.path(), CreateOptions(4096));
  Table t = VALUE_OR_FAIL(db->CreateTable(DocsSchema()));
  auto txn = VALUE_OR_FAIL(db->Begin());
  BlobId stored;
  RecordId rec;
  {
    std::unique_ptr<BlobWriter> w = VALUE_OR_FAIL(txn->CreateBlob());
    REQUIRE_OK(w->Write("some bytes"));
    rec = VALUE_OR_FAIL(txn->Insert(t, {int64_t{1}, w->id()}));
    std::optional<Row> row = VALUE_OR_FAIL(txn->Get(t, rec));
    REQUIRE(row.has_value());
    stored = std::get<BlobId>((*row)[1]);
  }
  const page::PageNo rec_page =
      VALUE_OR_FAIL(internal::TableState::From(t)->relation->RecordPage(rec.value));
  const uint64_t ids[] = {
      blob::StoredId(t.id(), 1'000'000, 1),   // past the end of the database
      blob::StoredId(t.id(), 0, 1),           // the header page
      blob::StoredId(t.id(), rec_page, 900),  // a line the record's page does not have
      blob::StoredId(t.id(), rec_page, page::RecordLine(rec.value)),  // a record, not a BLOB
      blob::StoredId(1234, 5, 1),                                     // no such relation
      blob::kTempBit | 777,                                           // no such temporary BLOB
  };
  for (uint64_t id : ids) {
    CAPTURE(id);
    absl::StatusOr<std::unique_ptr<BlobReader>> r = txn->OpenBlob(BlobId{id});
    INFO("status: " << r.status().ToString());
    REQUIRE(absl::IsNotFound(r.status()));
    const std::string named = blob::IsTemp(id)
                                  ? "temporary BLOB " + std::to_string(id & ~blob::kTempBit)
                                  : "BLOB " + std::to_string(id) + " does not exist";
    REQUIRE(IsError(r.status(), absl::StatusCode::kNotFound, named));
    REQUIRE_FALSE(IsError(r.status(), absl::StatusCode::kNotFound, "offset"));
  }
  // The real one still reads.
  std::unique_ptr<BlobReader> r = VALUE_OR_FAIL(txn->OpenBlob(stored));
  REQUIRE(r->size() == 10);
  REQUIRE_OK(txn->Commit());
  REQUIRE_OK(db->Close());
}

// ---------------------------------------------------------------- Close

TEST_CASE("after Close every call fails with FailedPrecondition, GetTable included",
          "[db][errors]") {
  TempDb tmp;
  auto db = OpenOrFail(tmp.path(), CreateOptions(4096));
  Table t = VALUE_OR_FAIL(db->CreateTable(DocsSchema()));
  Index ix = VALUE_OR_FAIL(db->CreateIndex({"docs_id", "docs", {"id"}, true}));
  BlobId stored;
  {
    auto w = VALUE_OR_FAIL(db->Begin());
    for (int64_t i = 1; i <= 3; ++i) {
      std::unique_ptr<BlobWriter> bw = VALUE_OR_FAIL(w->CreateBlob());
      REQUIRE_OK(bw->Write(std::string(3000, static_cast<char>('a' + i))));
      REQUIRE_OK(w->Insert(t, {i, bw->id()}).status());
    }
    REQUIRE_OK(w->Commit());
  }
  auto txn = VALUE_OR_FAIL(db->Begin());
  std::unique_ptr<Cursor> scan = VALUE_OR_FAIL(txn->Scan(t));
  std::unique_ptr<Cursor> range = VALUE_OR_FAIL(txn->IndexScan(ix, {}, {}));
  REQUIRE(scan->Valid());
  REQUIRE(range->Valid());
  stored = std::get<BlobId>(scan->row()[1]);
  std::unique_ptr<BlobReader> reader = VALUE_OR_FAIL(txn->OpenBlob(stored));
  std::unique_ptr<BlobWriter> writer = VALUE_OR_FAIL(txn->CreateBlob());
  REQUIRE_OK(db->Close());

  auto closed = [](const absl::Status& s) {
    INFO("status: " << s.ToString());
    return IsError(s, absl::StatusCode::kFailedPrecondition, "is closed");
  };
  REQUIRE(closed(db->GetTable("docs").status()));
  REQUIRE(closed(db->GetIndex("docs_id").status()));
  REQUIRE(db->TableNames().empty());
  REQUIRE(closed(db->GetTableStats(t).status()));
  REQUIRE(closed(db->CollectGarbage()));
  REQUIRE(closed(scan->Next()));
  REQUIRE_FALSE(scan->Valid());
  REQUIRE(closed(range->Next()));
  REQUIRE_FALSE(range->Valid());
  char buf[16];
  REQUIRE(closed(reader->Read(buf, sizeof buf).status()));
  REQUIRE(closed(writer->Write("more")));
  REQUIRE(closed(txn->OpenBlob(stored).status()));
  REQUIRE(closed(txn->Savepoint("s")));
  REQUIRE(closed(txn->Delete(t, RecordId{1})));
  REQUIRE(closed(txn->Commit()));
  REQUIRE_OK(txn->Rollback());  // documented: the transaction already ended with Close
  reader.reset();
  writer.reset();
  scan.reset();
  range.reset();
  txn.reset();
  db.reset();
}

TEST_CASE("Close ends an active transaction as rolled back (dead on disk)", "[db][errors]") {
  TempDb tmp;
  const uint32_t ps = 4096;
  uint64_t active_id = 0;
  {
    auto db = OpenOrFail(tmp.path(), CreateOptions(ps));
    Table t = VALUE_OR_FAIL(db->CreateTable(DocsSchema()));
    auto txn = VALUE_OR_FAIL(db->Begin());
    REQUIRE_OK(txn->Insert(t, {int64_t{1}, BlobId{}}).status());
    active_id = txn->id();
    REQUIRE_OK(db->Close());
    REQUIRE(IsError(txn->Insert(t, {int64_t{2}, BlobId{}}).status(),
                    absl::StatusCode::kFailedPrecondition, "is closed"));
  }
  // The file says so before anything reopens it: the header is marked clean, and the TIP has
  // the transaction dead (rolled back), not active.
  const std::string bytes = testing::ReadFileBytes(tmp.path());
  REQUIRE(bytes.size() >= 2 * ps);
  page::HeaderFields h;
  REQUIRE_OK(page::ReadHeader(reinterpret_cast<const uint8_t*>(bytes.data()), &h, "test"));
  REQUIRE((h.flags & page::kHeaderFlagCleanShutdown) != 0);
  REQUIRE(size_t{h.first_tip} * ps + ps <= bytes.size());
  const auto* tip = reinterpret_cast<const uint8_t*>(bytes.data()) + size_t{h.first_tip} * ps;
  REQUIRE(page::TipFirstTxn(tip) <= active_id);
  REQUIRE(page::TipGetState(tip, active_id) == page::TxnState::kDead);
  // And after a reopen its row is nowhere.
  auto db = OpenOrFail(tmp.path(), Options{});
  Table t = VALUE_OR_FAIL(db->GetTable("docs"));
  auto r = VALUE_OR_FAIL(db->Begin());
  REQUIRE(VALUE_OR_FAIL(testing::ScanAll(r.get(), t)).empty());
  REQUIRE_OK(r->Commit());
  REQUIRE(VALUE_OR_FAIL(db->Validate()).ok());
  REQUIRE_OK(db->Close());
}

// ---------------------------------------------------------------- savepoints

TEST_CASE("RollbackToSavepoint discards the savepoints made after it", "[db][errors]") {
  TempDb tmp;
  auto db = OpenOrFail(tmp.path(), CreateOptions(4096));
  Table t = VALUE_OR_FAIL(db->CreateTable(DocsSchema()));
  auto txn = VALUE_OR_FAIL(db->Begin());
  REQUIRE_OK(txn->Savepoint("A"));
  REQUIRE_OK(txn->Insert(t, {int64_t{1}, BlobId{}}).status());
  REQUIRE_OK(txn->Savepoint("B"));
  REQUIRE_OK(txn->Insert(t, {int64_t{2}, BlobId{}}).status());
  REQUIRE_OK(txn->Savepoint("C"));
  REQUIRE_OK(txn->RollbackToSavepoint("A"));
  // A stays (empty); B and C are gone, as transaction.h says.
  REQUIRE(VALUE_OR_FAIL(testing::ScanAll(txn.get(), t)).empty());
  REQUIRE(absl::IsNotFound(txn->RollbackToSavepoint("B")));
  REQUIRE(absl::IsNotFound(txn->ReleaseSavepoint("C")));
  REQUIRE_OK(txn->Insert(t, {int64_t{3}, BlobId{}}).status());
  REQUIRE_OK(txn->RollbackToSavepoint("A"));
  REQUIRE(VALUE_OR_FAIL(testing::ScanAll(txn.get(), t)).empty());
  REQUIRE_OK(txn->ReleaseSavepoint("A"));
  REQUIRE_OK(txn->Commit());
  REQUIRE_OK(db->Close());
}

}  // namespace
}  // namespace ember
