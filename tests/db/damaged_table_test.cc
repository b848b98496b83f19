// A table whose pointer-page chain is damaged (a page failing its checksum, or one that decodes
// but is not the pointer page the chain expects) on a closed database: Open succeeds, every call
// that needs that table's pages is DataLoss naming the page (reads, writes, index reads through
// its indexes, its BLOBs, index DDL, GetTableStats, Sweep, CollectGarbage, Backup), Validate
// lists it, and every other table, with its indexes and BLOBs, is read and written as before,
// across a reopen. Dropping the damaged table is how the rest is recovered: its pages become
// unreachable, and Validate(free_unreachable) frees them once the walk is clean.
#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "ember/ember.h"
#include "engine/db/database_impl.h"
#include "engine/page/page.h"
#include "engine/util/coding.h"
#include "tests/support/db_util.h"

namespace ember {
namespace {

constexpr uint32_t kPs = 4096;

using testing::IsError;

using testing::LostAt;
using testing::NamesPage;

Options Opts() {
  Options o = testing::CreateOptions(kPs, 256);
  o.create_if_missing = false;
  return o;
}

Row ARow(int64_t i, BlobId b = BlobId{0}) {
  return {i, int64_t{i % 7}, absl::StrCat("a-", i, std::string(40, 'x')), b};
}
Row BRow(int64_t i, int gen, BlobId b = BlobId{0}) {
  return {i, absl::StrCat("b-", i, "-", gen), b};
}

// What the test keeps of the database it made.
struct Made {
  uint32_t a_pp = 0;        // table a's first pointer page
  uint32_t b_relation = 0;  // table b's relation id
  RecordId a_rec;           // a record of a
  BlobId a_blob, b_blob;    // a stored BLOB of each table
  int64_t b_rows = 0;
};

std::string BlobBytes(char c) { return std::string(9000, c); }  // two pages

BlobId StoreBlob(Transaction* tx, char c) {
  auto w = VALUE_OR_FAIL(tx->CreateBlob());
  REQUIRE_OK(w->Write(BlobBytes(c)));
  return w->id();
}

// Tables a (300 rows, indexes a_id, a_k, BLOBs) and b (100 rows, index b_id, BLOBs); closed.
Made MakeDb(const std::string& path) {
  Options o = Opts();
  o.create_if_missing = true;
  std::unique_ptr<Database> db = testing::OpenOrFail(path, o);
  Table a = VALUE_OR_FAIL(db->CreateTable({"a",
                                           {{"id", ColumnType::kInt64, false},
                                            {"k", ColumnType::kInt64},
                                            {"v", ColumnType::kString},
                                            {"blob", ColumnType::kBlob}}}));
  VALUE_OR_FAIL(db->CreateIndex({"a_id", "a", {"id"}, true}));
  VALUE_OR_FAIL(db->CreateIndex({"a_k", "a", {"k"}, false}));
  Table b = VALUE_OR_FAIL(db->CreateTable({"b",
                                           {{"id", ColumnType::kInt64, false},
                                            {"v", ColumnType::kString},
                                            {"blob", ColumnType::kBlob}}}));
  VALUE_OR_FAIL(db->CreateIndex({"b_id", "b", {"id"}, true}));
  Made m;
  auto tx = VALUE_OR_FAIL(db->Begin());
  for (int64_t i = 0; i < 300; ++i) {
    const RecordId r =
        VALUE_OR_FAIL(tx->Insert(a, ARow(i, i == 5 ? StoreBlob(tx.get(), 'a') : BlobId{0})));
    if (i == 5) m.a_rec = r;
  }
  for (int64_t i = 0; i < 100; ++i) {
    VALUE_OR_FAIL(tx->Insert(b, BRow(i, 0, i == 3 ? StoreBlob(tx.get(), 'b') : BlobId{0})));
  }
  REQUIRE_OK(tx->Commit());
  m.b_rows = 100;
  // The stored ids, as the rows hold them.
  auto rtx = VALUE_OR_FAIL(db->Begin());
  m.a_blob = std::get<BlobId>(VALUE_OR_FAIL(rtx->Get(a, m.a_rec))->at(3));
  auto b3 = VALUE_OR_FAIL(rtx->Lookup(VALUE_OR_FAIL(db->GetIndex("b_id")), {int64_t{3}}));
  REQUIRE(b3.has_value());
  m.b_blob = std::get<BlobId>(b3->second[2]);
  REQUIRE_OK(rtx->Rollback());
  m.a_pp = internal::TableState::From(a)->relation->first_pp();
  m.b_relation = internal::TableState::From(b)->id;
  REQUIRE_OK(db->Close());
  return m;
}

void FlipByte(const std::string& path, uint32_t p) {
  std::string file = testing::ReadFileBytes(path);
  const size_t at = size_t{p} * kPs + 200;  // among the slots
  file[at] = static_cast<char>(file[at] ^ 0x10);
  testing::WriteFileBytes(path, file);
}

// Writes `field` (a 32-bit pointer-page field: 16 relation, 20 sequence) of page `p` and seals
// the page again: its checksum passes, and only the chain's checks can tell.
void Reseal(const std::string& path, uint32_t p, size_t field, uint32_t value) {
  std::string file = testing::ReadFileBytes(path);
  auto* d = reinterpret_cast<uint8_t*>(file.data()) + size_t{p} * kPs;
  util::Put32(d + field, value);
  util::Put32(d + page::hdr::kChecksum, page::ComputeChecksum(d, kPs));
  testing::WriteFileBytes(path, file);
}

// Table b is read and written in full: rows, its index, its BLOB, its statistics.
void RequireBIntact(Database* db, Made* m, int gen) {
  Table b = VALUE_OR_FAIL(db->GetTable("b"));
  Index b_id = VALUE_OR_FAIL(db->GetIndex("b_id"));
  {
    auto tx = VALUE_OR_FAIL(db->Begin());
    auto rows = VALUE_OR_FAIL(testing::ScanAll(tx.get(), b));
    REQUIRE(static_cast<int64_t>(rows.size()) == m->b_rows);
    auto via_index = VALUE_OR_FAIL(testing::IndexRange(tx.get(), b_id, {}, {}));
    REQUIRE(via_index.size() == rows.size());
    auto r3 = VALUE_OR_FAIL(tx->Lookup(b_id, {int64_t{3}}));
    REQUIRE(r3.has_value());
    auto reader = VALUE_OR_FAIL(tx->OpenBlob(m->b_blob));
    std::string got(reader->size(), '\0');
    REQUIRE(VALUE_OR_FAIL(reader->Read(got.data(), got.size())) == got.size());
    REQUIRE(got == BlobBytes('b'));
    // Writes: an insert, an update of every row, a delete, through the index too.
    const int64_t id = 1000 + gen;
    const RecordId nr = VALUE_OR_FAIL(tx->Insert(b, BRow(id, gen, StoreBlob(tx.get(), 'c'))));
    for (const auto& [rid, row] : rows) {
      const int64_t i = std::get<int64_t>(row[0]);
      REQUIRE_OK(tx->Update(b, rid, BRow(i, gen, std::get<BlobId>(row[2]))));
    }
    REQUIRE_OK(tx->Delete(b, nr));
    REQUIRE_OK(tx->Insert(b, BRow(id, gen)).status());
    REQUIRE_OK(tx->Commit());
    ++m->b_rows;
  }
  auto tx = VALUE_OR_FAIL(db->Begin());
  auto got = VALUE_OR_FAIL(tx->Lookup(b_id, {int64_t{1000 + gen}}));
  REQUIRE(got.has_value());
  REQUIRE(std::get<std::string>(got->second[1]) == absl::StrCat("b-", 1000 + gen, "-", gen));
  auto r7 = VALUE_OR_FAIL(tx->Lookup(b_id, {int64_t{7}}));
  REQUIRE(r7.has_value());
  REQUIRE(std::get<std::string>(r7->second[1]) == absl::StrCat("b-7-", gen));
  REQUIRE(VALUE_OR_FAIL(db->GetTableStats(b)).records >= static_cast<uint64_t>(m->b_rows));
}

// Every use of table a is DataLoss naming page `p`; Validate lists it and checks the rest.
void RequireADamaged(Database* db, const Made& m, uint32_t p, const std::string& dir) {
  Table a = VALUE_OR_FAIL(db->GetTable("a"));
  Index a_id = VALUE_OR_FAIL(db->GetIndex("a_id"));
  Index a_k = VALUE_OR_FAIL(db->GetIndex("a_k"));
  {
    auto tx = VALUE_OR_FAIL(db->Begin());
    CHECK(LostAt(tx->Scan(a), p));
    CHECK(LostAt(tx->Get(a, m.a_rec), p));
    CHECK(LostAt(tx->Get(a, RecordId{0}), p));
    CHECK(LostAt(tx->Insert(a, ARow(5000)), p));
    CHECK(LostAt(tx->Update(a, m.a_rec, ARow(5)), p));
    CHECK(LostAt(tx->Delete(a, m.a_rec), p));
    CHECK(LostAt(tx->Lookup(a_id, {int64_t{5}}), p));
    CHECK(LostAt(tx->Lookup(a_id, {int64_t{999999}}), p));  // a key no row has: not "none"
    CHECK(LostAt(tx->IndexScan(a_k, {}, {}), p));
    CHECK(LostAt(tx->IndexScan(a_id, {int64_t{1}}, {int64_t{3}}, /*descending=*/true), p));
    CHECK(LostAt(tx->OpenBlob(m.a_blob), p));
    // A failed call leaves the transaction usable.
    REQUIRE_OK(tx->Commit());
  }
  CHECK(LostAt(db->GetTableStats(a), p));
  CHECK(LostAt(db->CreateIndex({"a_v", "a", {"v"}, false}), p));
  CHECK(IsError(db->GetIndex("a_v").status(), absl::StatusCode::kNotFound));
  const std::string backup = dir + "/damaged.ebk";
  CHECK(LostAt(db->Backup(backup), p));
  CHECK_FALSE(std::filesystem::exists(backup));
  CHECK(LostAt(db->Sweep(), p));
  CHECK(LostAt(db->CollectGarbage(), p));
  ValidationReport rep = VALUE_OR_FAIL(db->Validate());
  bool named = false;
  for (const std::string& e : rep.errors) named |= NamesPage(e, p);
  INFO((rep.errors.empty() ? std::string("no errors") : rep.errors[0]));
  CHECK(named);
  CHECK(rep.errors.size() == 1);  // the rest of the database checks clean
  CHECK(rep.index_entries > 0);   // (its indexes were walked)
  // With errors, nothing is freed (the table's pages look unreachable).
  ValidateOptions free;
  free.free_unreachable = true;
  ValidationReport freed = VALUE_OR_FAIL(db->Validate(free));
  CHECK(freed.freed_pages == 0);
  CHECK_FALSE(freed.unreachable_pages.empty());
}

void RunDamagedTable(const std::function<void(const std::string&, const Made&)>& damage) {
  testing::TempDb tmp;
  Made m = MakeDb(tmp.path());
  damage(tmp.path(), m);
  const uint32_t p = m.a_pp;
  for (int open = 0; open < 2; ++open) {
    INFO("open " << open);
    std::unique_ptr<Database> db = testing::OpenOrFail(tmp.path(), Opts());
    RequireADamaged(db.get(), m, p, tmp.File(""));
    RequireBIntact(db.get(), &m, open + 1);
    REQUIRE_OK(db->Close());  // nothing went wrong in the background
  }
  // Index DDL on the damaged table: deactivation needs no table page, activation builds.
  {
    std::unique_ptr<Database> db = testing::OpenOrFail(tmp.path(), Opts());
    REQUIRE_OK(db->SetIndexActive("a_k", false));
    CHECK(LostAt(db->SetIndexActive("a_k", true), p));
    auto tx = VALUE_OR_FAIL(db->Begin());
    CHECK(IsError(tx->IndexScan(VALUE_OR_FAIL(db->GetIndex("a_k")), {}, {}).status(),
                  absl::StatusCode::kFailedPrecondition));
    REQUIRE_OK(tx->Rollback());
    tx.reset();
    // The recovery: the table goes; its pages cannot all be found, so the drop frees none
    // and says so once; then they are merely unreachable, and Validate frees them.
    REQUIRE_OK(db->DropTable("a"));
    CHECK(LostAt(db->CollectGarbage(), p));
    REQUIRE_OK(db->CollectGarbage());
    ValidationReport rep = VALUE_OR_FAIL(db->Validate());
    INFO((rep.errors.empty() ? std::string() : rep.errors[0]));
    REQUIRE(rep.ok());
    REQUIRE_FALSE(rep.unreachable_pages.empty());
    ValidateOptions free;
    free.free_unreachable = true;
    ValidationReport freed = VALUE_OR_FAIL(db->Validate(free));
    CHECK(freed.freed_pages == rep.unreachable_pages.size());
    testing::RequireValid(db.get(), "after freeing the dropped table's pages");
    RequireBIntact(db.get(), &m, 10);
    REQUIRE_OK(db->Close());
  }
  std::unique_ptr<Database> db = testing::OpenOrFail(tmp.path(), Opts());
  testing::RequireValid(db.get(), "reopened after the recovery");
  CHECK(IsError(db->GetTable("a").status(), absl::StatusCode::kNotFound));
  RequireBIntact(db.get(), &m, 11);
  // The name is free again.
  REQUIRE_OK(db->CreateTable({"a", {{"id", ColumnType::kInt64, false}}}).status());
  testing::RequireValid(db.get(), "a new table a");
  REQUIRE_OK(db->Close());
}

TEST_CASE("damaged table: a pointer page failing its checksum makes only its table DataLoss",
          "[errors][validate][damaged]") {
  RunDamagedTable([](const std::string& path, const Made& m) { FlipByte(path, m.a_pp); });
}

TEST_CASE(
    "damaged table: a resealed pointer page of another relation makes only its table "
    "DataLoss",
    "[errors][validate][damaged]") {
  RunDamagedTable([](const std::string& path, const Made& m) {
    Reseal(path, m.a_pp, /*relation=*/16, m.b_relation);
  });
}

TEST_CASE(
    "damaged table: a resealed pointer page with the wrong sequence makes only its table "
    "DataLoss",
    "[errors][validate][damaged]") {
  RunDamagedTable(
      [](const std::string& path, const Made& m) { Reseal(path, m.a_pp, /*sequence=*/20, 3); });
}

TEST_CASE("damaged table: the catalog's pointer page stays fatal", "[errors][damaged]") {
  testing::TempDb tmp;
  MakeDb(tmp.path());
  uint32_t catalog_pp = 0;
  {
    std::unique_ptr<Database> db = testing::OpenOrFail(tmp.path(), Opts());
    auto* impl = static_cast<db::DatabaseImpl*>(db.get());
    catalog_pp = impl->RelationById(0)->first_pp();
    REQUIRE_OK(db->Close());
  }
  FlipByte(tmp.path(), catalog_pp);
  absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(tmp.path(), Opts());
  REQUIRE_FALSE(db.ok());
  CHECK(LostAt(db.status(), catalog_pp));
}

}  // namespace
}  // namespace ember
