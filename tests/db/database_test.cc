// Database-level tests: create / open / close, bad files and options, on-disk corruption, DDL
// errors, configuration text, catalog persistence, large rows, every column type, validation.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ember/ember.h"
#include "engine/page/data_page.h"
#include "engine/page/doublewrite_page.h"
#include "engine/page/page.h"
#include "tests/support/db_util.h"

namespace ember {
namespace {

using testing::CreateOptions;
using testing::IsError;
using testing::OpenOrFail;
using testing::RowText;
using testing::SameRow;
using testing::TempDb;

TableSchema ItemsSchema(const std::string& name = "items") {
  return {name,
          {{"id", ColumnType::kInt64, false},
           {"name", ColumnType::kString},
           {"score", ColumnType::kDouble}}};
}

Row ItemRow(int64_t i) {
  return {i, "item " + std::to_string(i) + std::string(static_cast<size_t>(i % 37), 'x'),
          static_cast<double>(i) * 0.25};
}

std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t v = rng();
    std::memcpy(&s[i], &v, std::min<size_t>(8, n - i));
  }
  return s;
}

Options OpenOptions(uint32_t cache_pages = 256) {
  Options o;
  o.cache_pages = cache_pages;
  return o;
}

// Inserts rows 1..n into `table` in one transaction, returning their record ids.
std::vector<RecordId> InsertItems(Database* db, const Table& table, int64_t n) {
  auto txn = VALUE_OR_FAIL(db->Begin());
  std::vector<RecordId> ids;
  for (int64_t i = 1; i <= n; ++i) ids.push_back(VALUE_OR_FAIL(txn->Insert(table, ItemRow(i))));
  REQUIRE_OK(txn->Commit());
  return ids;
}

void RequireValidateClean(Database* db, const ValidateOptions& vo = {}) {
  ValidationReport rep = VALUE_OR_FAIL(db->Validate(vo));
  INFO("first error: " << (rep.errors.empty() ? std::string() : rep.errors[0]));
  REQUIRE(rep.errors.empty());
  REQUIRE(rep.pages_checked > 0);
}

// ------------------------------------------------------------------------- open / close

TEST_CASE("create, close and reopen round trip for each page size", "[db]") {
  const uint32_t ps = GENERATE(4096u, 8192u, 32768u);
  CAPTURE(ps);
  TempDb tmp;
  std::vector<RecordId> ids;
  {
    auto db = OpenOrFail(tmp.path(), CreateOptions(ps, 64));
    REQUIRE(db->options().page_size == ps);
    Table t = VALUE_OR_FAIL(db->CreateTable(ItemsSchema()));
    ids = InsertItems(db.get(), t, 500);
    REQUIRE_OK(db->Close());
  }
  REQUIRE(std::filesystem::file_size(tmp.path()) % ps == 0);
  for (int round = 0; round < 2; ++round) {
    // The page size comes from the file, whatever the options say.
    Options o = OpenOptions(64);
    o.page_size = ps == 8192 ? 4096 : 8192;
    auto db = OpenOrFail(tmp.path(), o);
    REQUIRE(db->options().page_size == ps);
    Table t = VALUE_OR_FAIL(db->GetTable("items"));
    auto txn = VALUE_OR_FAIL(db->Begin());
    for (size_t i = round == 0 ? 0 : 1; i < ids.size(); ++i) {
      std::optional<Row> r = VALUE_OR_FAIL(txn->Get(t, ids[i]));
      REQUIRE(r.has_value());
      REQUIRE(SameRow(*r, ItemRow(static_cast<int64_t>(i) + 1)));
    }
    auto rows = VALUE_OR_FAIL(testing::ScanAll(txn.get(), t));
    REQUIRE(rows.size() == ids.size());
    if (round == 0) {  // a change made after the first reopen survives the second
      REQUIRE_OK(txn->Update(t, ids[0], Row{int64_t{1}, std::string("changed"), 9.5}));
      REQUIRE_OK(txn->Commit());
    } else {
      std::optional<Row> r = VALUE_OR_FAIL(txn->Get(t, ids[0]));
      REQUIRE(r.has_value());
      REQUIRE(std::get<std::string>((*r)[1]) == "changed");
      REQUIRE_OK(txn->Commit());
    }
    txn.reset();
    RequireValidateClean(db.get());
    REQUIRE_OK(db->Close());
  }
}

TEST_CASE("an empty database reopens", "[db]") {
  TempDb tmp;
  REQUIRE_OK(OpenOrFail(tmp.path(), CreateOptions())->Close());
  auto db = OpenOrFail(tmp.path(), OpenOptions());
  REQUIRE(db->TableNames().empty());
  RequireValidateClean(db.get());
  REQUIRE_OK(db->Close());
}

TEST_CASE("Open of a missing file without create_if_missing is NotFound", "[db]") {
  TempDb tmp;
  auto db = Database::Open(tmp.path(), OpenOptions());
  REQUIRE(absl::IsNotFound(db.status()));
  REQUIRE_FALSE(std::filesystem::exists(tmp.path()));
}

TEST_CASE("error_if_exists refuses an existing database and leaves it intact", "[db]") {
  TempDb tmp;
  {
    auto db = OpenOrFail(tmp.path(), CreateOptions());
    Table t = VALUE_OR_FAIL(db->CreateTable(ItemsSchema()));
    InsertItems(db.get(), t, 3);
    REQUIRE_OK(db->Close());
  }
  Options o = CreateOptions();
  o.error_if_exists = true;
  auto again = Database::Open(tmp.path(), o);
  REQUIRE(absl::IsAlreadyExists(again.status()));
  auto db = OpenOrFail(tmp.path(), OpenOptions());
  REQUIRE(db->GetTable("items").ok());
  REQUIRE_OK(db->Close());

  // error_if_exists on a missing file simply creates it.
  const std::string other = tmp.File("other.edb");
  auto fresh = Database::Open(other, o);
  REQUIRE_OK(fresh.status());
  REQUIRE_OK((*fresh)->Close());
}

TEST_CASE("invalid options are InvalidArgument and create nothing", "[db]") {
  TempDb tmp;
  SECTION("page size 5000") {
    Options o = CreateOptions(5000);
    auto db = Database::Open(tmp.path(), o);
    REQUIRE(absl::IsInvalidArgument(db.status()));
    REQUIRE_FALSE(std::filesystem::exists(tmp.path()));
  }
  SECTION("page size 65536 and 2048") {
    for (uint32_t ps : {65536u, 2048u, 0u}) {
      auto db = Database::Open(tmp.path(), CreateOptions(ps));
      REQUIRE(absl::IsInvalidArgument(db.status()));
      REQUIRE_FALSE(std::filesystem::exists(tmp.path()));
    }
  }
  SECTION("cache_pages 3") {
    auto db = Database::Open(tmp.path(), CreateOptions(8192, 3));
    REQUIRE(absl::IsInvalidArgument(db.status()));
    REQUIRE_FALSE(std::filesystem::exists(tmp.path()));
  }
  SECTION("cache_pages 3 on an existing database") {
    REQUIRE_OK(OpenOrFail(tmp.path(), CreateOptions())->Close());
    const std::string before = testing::ReadFileBytes(tmp.path());
    auto db = Database::Open(tmp.path(), OpenOptions(3));
    REQUIRE(absl::IsInvalidArgument(db.status()));
    REQUIRE(testing::ReadFileBytes(tmp.path()) == before);
    REQUIRE_OK(OpenOrFail(tmp.path(), OpenOptions())->Close());
  }
}

// ------------------------------------------------------------------------- foreign files

TEST_CASE("opening a file that is not a database is a clear error", "[db]") {
  TempDb tmp;
  std::mt19937_64 rng(42);
  std::string contents;
  SECTION("random bytes") { contents = RandomBytes(rng, 3 * 8192); }
  SECTION("random bytes, one small page") { contents = RandomBytes(rng, 4096); }
  SECTION("a text file") {
    for (int i = 0; i < 400; ++i) contents += "This is a line of an ordinary text file.\n";
  }
  SECTION("an empty file") { contents.clear(); }
  SECTION("shorter than a page") { contents = RandomBytes(rng, 100); }
  SECTION("shorter than a page, all zero") { contents.assign(4000, '\0'); }
  SECTION("zeros, several pages") { contents.assign(4 * 8192, '\0'); }
  testing::WriteFileBytes(tmp.path(), contents);
  for (bool create : {false, true}) {
    Options o = create ? CreateOptions() : OpenOptions();
    auto db = Database::Open(tmp.path(), o);
    INFO("status: " << db.status().ToString());
    REQUIRE_FALSE(db.ok());
    REQUIRE((absl::IsInvalidArgument(db.status()) || absl::IsDataLoss(db.status())));
    REQUIRE(std::string(db.status().message()).find(tmp.path()) != std::string::npos);
    // The file is not ours: it is neither changed nor removed.
    REQUIRE(testing::ReadFileBytes(tmp.path()) == contents);
  }
}

TEST_CASE("a damaged header page is DataLoss", "[db]") {
  TempDb tmp;
  REQUIRE_OK(OpenOrFail(tmp.path(), CreateOptions(8192))->Close());
  std::string bytes = testing::ReadFileBytes(tmp.path());
  SECTION("a flipped byte past the header fields") { bytes[4000] ^= 0x20; }
  SECTION("a flipped byte in the transaction counters") { bytes[34] ^= 0x01; }
  testing::WriteFileBytes(tmp.path(), bytes);
  auto db = Database::Open(tmp.path(), OpenOptions());
  INFO("status: " << db.status().ToString());
  REQUIRE(absl::IsDataLoss(db.status()));
  REQUIRE(std::string(db.status().message()).find("page 0") != std::string::npos);
}

TEST_CASE("a truncated database is an error, not a crash", "[db]") {
  TempDb tmp;
  {
    auto db = OpenOrFail(tmp.path(), CreateOptions(4096));
    Table t = VALUE_OR_FAIL(db->CreateTable(ItemsSchema()));
    InsertItems(db.get(), t, 300);
    REQUIRE_OK(db->Close());
  }
  std::string bytes = testing::ReadFileBytes(tmp.path());
  REQUIRE(bytes.size() > 4 * 4096);
  SECTION("only the header page is left") { bytes.resize(4096); }
  SECTION("the header and the first PIP are left") { bytes.resize(2 * 4096); }
  testing::WriteFileBytes(tmp.path(), bytes);
  auto db = Database::Open(tmp.path(), OpenOptions());
  if (db.ok()) {
    // If it opens, reading what is gone must fail cleanly.
    auto t = (*db)->GetTable("items");
    REQUIRE_FALSE(t.ok());
    (void)(*db)->Close();
  } else {
    INFO("status: " << db.status().ToString());
    REQUIRE_FALSE(db.status().message().empty());
  }
}

// ------------------------------------------------------------------------- corruption

// The page numbers of the data pages of relation `relation_id` in a closed database file.
std::vector<uint32_t> DataPagesOf(const std::string& bytes, uint32_t ps, uint32_t relation_id) {
  std::vector<uint32_t> out;
  for (uint32_t p = page::DoublewriteEnd(ps); (p + 1) * size_t{ps} <= bytes.size(); ++p) {
    const auto* d = reinterpret_cast<const uint8_t*>(bytes.data()) + size_t{p} * ps;
    if (page::GetType(d) == page::PageType::kData && page::DpRelation(d) == relation_id &&
        page::DpLineCount(d) > 0) {
      out.push_back(p);
    }
  }
  return out;
}

TEST_CASE("a flipped byte on a data page is DataLoss naming the page", "[db]") {
  const uint32_t ps = 4096;
  TempDb tmp;
  std::vector<RecordId> ids;
  uint32_t table_id = 0;
  {
    auto db = OpenOrFail(tmp.path(), CreateOptions(ps, 64));
    Table t = VALUE_OR_FAIL(db->CreateTable(ItemsSchema()));
    table_id = t.id();
    ids = InsertItems(db.get(), t, 400);
    REQUIRE_OK(db->Close());
  }
  std::string bytes = testing::ReadFileBytes(tmp.path());
  std::vector<uint32_t> data_pages = DataPagesOf(bytes, ps, table_id);
  REQUIRE(data_pages.size() >= 3);
  const uint32_t victim = data_pages[data_pages.size() / 2];
  CAPTURE(victim);
  const size_t at = size_t{victim} * ps + ps / 2;
  bytes[at] = static_cast<char>(bytes[at] ^ 0x5A);
  testing::WriteFileBytes(tmp.path(), bytes);
  const std::string page_name = "page " + std::to_string(victim);

  auto db = OpenOrFail(tmp.path(), OpenOptions(64));
  Table t = VALUE_OR_FAIL(db->GetTable("items"));
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    // Reads of records on other pages work; those on the damaged page fail with DataLoss.
    size_t good = 0, lost = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      absl::StatusOr<std::optional<Row>> r = txn->Get(t, ids[i]);
      if (r.ok()) {
        REQUIRE(r->has_value());
        REQUIRE(SameRow(**r, ItemRow(static_cast<int64_t>(i) + 1)));
        ++good;
      } else {
        INFO("status: " << r.status().ToString());
        REQUIRE(IsError(r.status(), absl::StatusCode::kDataLoss, page_name));
        ++lost;
      }
    }
    REQUIRE(good > 0);
    REQUIRE(lost > 0);
    // A scan meets the page and stops with the same error.
    absl::StatusOr<std::unique_ptr<Cursor>> c = txn->Scan(t);
    absl::Status s = c.status();
    if (c.ok()) {
      auto rows = testing::Drain(c->get());
      s = rows.status();
    }
    INFO("scan status: " << s.ToString());
    REQUIRE(IsError(s, absl::StatusCode::kDataLoss, page_name));
    REQUIRE_OK(txn->Commit());
  }
  // Validate reports the page (or fails as a whole), never crashes.
  absl::StatusOr<ValidationReport> rep = db->Validate();
  if (rep.ok()) {
    REQUIRE_FALSE(rep->ok());
    bool named = false;
    for (const std::string& e : rep->errors) named |= e.find(page_name) != std::string::npos;
    INFO("first error: " << rep->errors[0]);
    REQUIRE(named);
  } else {
    REQUIRE(IsError(rep.status(), absl::StatusCode::kDataLoss, page_name));
  }
  // An update of a record on the damaged page fails cleanly too.
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    bool saw_loss = false;
    for (size_t i = 0; i < ids.size(); ++i) {
      absl::Status s = txn->Update(t, ids[i], ItemRow(1000 + static_cast<int64_t>(i)));
      if (!s.ok()) {
        INFO("status: " << s.ToString());
        REQUIRE(absl::IsDataLoss(s));
        saw_loss = true;
      }
    }
    REQUIRE(saw_loss);
    REQUIRE_OK(txn->Rollback());
  }
  (void)db->Close();
}

// ------------------------------------------------------------------------- DDL

TEST_CASE("CreateTable errors", "[db]") {
  TempDb tmp;
  auto db = OpenOrFail(tmp.path(), CreateOptions());
  REQUIRE(db->CreateTable(ItemsSchema()).ok());
  REQUIRE(absl::IsAlreadyExists(db->CreateTable(ItemsSchema()).status()));
  REQUIRE(
      absl::IsAlreadyExists(db->CreateTable({"items", {{"other", ColumnType::kString}}}).status()));
  auto dup = db->CreateTable(
      {"dup", {{"a", ColumnType::kInt64}, {"b", ColumnType::kString}, {"a", ColumnType::kDouble}}});
  REQUIRE(absl::IsInvalidArgument(dup.status()));
  REQUIRE(std::string(dup.status().message()).find("a") != std::string::npos);
  REQUIRE(absl::IsInvalidArgument(db->CreateTable({"", {{"a", ColumnType::kInt64}}}).status()));
  REQUIRE(absl::IsInvalidArgument(db->CreateTable({"nocols", {}}).status()));
  // Failed DDL leaves nothing behind.
  REQUIRE(absl::IsNotFound(db->GetTable("dup").status()));
  REQUIRE(absl::IsNotFound(db->GetTable("nocols").status()));
  REQUIRE(db->TableNames() == std::vector<std::string>{"items"});
  REQUIRE_OK(db->Close());
  auto again = OpenOrFail(tmp.path(), OpenOptions());
  REQUIRE(again->TableNames() == std::vector<std::string>{"items"});
  RequireValidateClean(again.get());
  REQUIRE_OK(again->Close());
}

TEST_CASE("CreateIndex errors", "[db]") {
  TempDb tmp;
  auto db = OpenOrFail(tmp.path(), CreateOptions(4096, 64));
  Table t = VALUE_OR_FAIL(db->CreateTable(ItemsSchema()));
  // Rows 1..200 and a second copy of ids 1..5: `id` has duplicate keys, `name` does not.
  InsertItems(db.get(), t, 200);
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    for (int64_t i = 1; i <= 5; ++i) {
      REQUIRE_OK(txn->Insert(t, Row{i, "dup " + std::to_string(i), 0.0}));
    }
    REQUIRE_OK(txn->Commit());
  }
  REQUIRE(absl::IsNotFound(db->CreateIndex({"ix_none", "nosuchtable", {"id"}}).status()));
  REQUIRE(absl::IsNotFound(db->CreateIndex({"ix_col", "items", {"nosuchcolumn"}}).status()));
  REQUIRE(absl::IsNotFound(db->CreateIndex({"ix_col2", "items", {"id", "nope"}}).status()));
  REQUIRE(absl::IsInvalidArgument(db->CreateIndex({"ix_empty", "items", {}}).status()));
  REQUIRE(db->CreateIndex({"ix_name", "items", {"name"}, true}).ok());
  REQUIRE(absl::IsAlreadyExists(db->CreateIndex({"ix_name", "items", {"score"}}).status()));

  auto uniq = db->CreateIndex({"ix_id", "items", {"id"}, /*unique=*/true});
  INFO("unique over duplicates: " << uniq.status().ToString());
  REQUIRE(absl::IsAlreadyExists(uniq.status()));
  for (const char* name : {"ix_none", "ix_col", "ix_col2", "ix_empty", "ix_id"}) {
    CAPTURE(name);
    REQUIRE(absl::IsNotFound(db->GetIndex(name).status()));
  }

  // The database still works: writes maintain the good index, and a non-unique index with the
  // failed one's name can be made.
  Index by_name = VALUE_OR_FAIL(db->GetIndex("ix_name"));
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    REQUIRE_OK(txn->Insert(t, Row{int64_t{999}, std::string("new one"), 1.0}));
    auto found = VALUE_OR_FAIL(txn->Lookup(by_name, {std::string("new one")}));
    REQUIRE(found.has_value());
    REQUIRE(std::get<int64_t>(found->second[0]) == 999);
    REQUIRE(absl::IsAlreadyExists(
        txn->Insert(t, Row{int64_t{1000}, std::string("item 7xxxxxxx"), 1.0}).status()));
    REQUIRE_OK(txn->Commit());
  }
  Index by_id = VALUE_OR_FAIL(db->CreateIndex({"ix_id", "items", {"id"}, /*unique=*/false}));
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    auto rows = VALUE_OR_FAIL(testing::IndexRange(txn.get(), by_id, {int64_t{3}}, {int64_t{3}}));
    REQUIRE(rows.size() == 2);
    REQUIRE_OK(txn->Commit());
  }
  RequireValidateClean(db.get());
  REQUIRE_OK(db->Close());
  auto again = OpenOrFail(tmp.path(), OpenOptions(64));
  REQUIRE(again->GetIndex("ix_id").ok());
  REQUIRE(again->GetIndex("ix_name").ok());
  RequireValidateClean(again.get());
  REQUIRE_OK(again->Close());
}

TEST_CASE("an index created over existing rows finds them", "[db]") {
  TempDb tmp;
  auto db = OpenOrFail(tmp.path(), CreateOptions(4096, 64));
  Table t = VALUE_OR_FAIL(db->CreateTable(ItemsSchema()));
  std::vector<RecordId> ids = InsertItems(db.get(), t, 300);
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    for (size_t i = 0; i < ids.size(); i += 3) REQUIRE_OK(txn->Delete(t, ids[i]));
    REQUIRE_OK(txn->Commit());
  }
  Index ix = VALUE_OR_FAIL(db->CreateIndex({"by_id", "items", {"id"}, true}));
  auto txn = VALUE_OR_FAIL(db->Begin());
  auto rows = VALUE_OR_FAIL(testing::IndexRange(txn.get(), ix, {}, {}));
  REQUIRE(rows.size() == 200);
  for (size_t i = 1; i < rows.size(); ++i) {
    REQUIRE(std::get<int64_t>(rows[i - 1].second[0]) < std::get<int64_t>(rows[i].second[0]));
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    auto f = VALUE_OR_FAIL(txn->Lookup(ix, {static_cast<int64_t>(i) + 1}));
    REQUIRE(f.has_value() == (i % 3 != 0));
    if (f) REQUIRE(f->first == ids[i]);
  }
  REQUIRE_OK(txn->Commit());
  txn.reset();
  RequireValidateClean(db.get());
  REQUIRE_OK(db->Close());
}

TEST_CASE("index entries of one key come in record order across record-number lengths", "[db]") {
  // Record numbers are (data page << 16 | line), stored in an entry without their high zero
  // bytes: with about six rows a page, 1800 rows have numbers of 1, 3 and 4 bytes. Entries of
  // one key must still come in record order both ways, and survive a reopen and Validate.
  testing::TableDb f(CreateOptions(4096, 64));
  constexpr int64_t kRows = 1800;
  std::vector<RecordId> ids;
  std::mt19937_64 rng(3);
  {
    auto txn = VALUE_OR_FAIL(f.db->Begin());
    for (int64_t i = 0; i < kRows; ++i) {
      std::string pad(900, ' ');  // random letters: no run-length compression
      for (char& c : pad) c = static_cast<char>('a' + rng() % 26);
      ids.push_back(VALUE_OR_FAIL(txn->Insert(f.t, {i, int64_t{i % 3 == 0 ? 7 : 8}, pad})));
    }
    REQUIRE_OK(txn->Commit());
  }
  REQUIRE(ids.front().value < 256);
  REQUIRE(ids.back().value >= (uint64_t{1} << 24));
  for (int pass = 0; pass < 2; ++pass) {
    auto txn = VALUE_OR_FAIL(f.db->Begin());
    for (bool descending : {false, true}) {
      auto rows = VALUE_OR_FAIL(
          testing::IndexRange(txn.get(), f.by_k, {int64_t{7}}, {int64_t{7}}, descending));
      REQUIRE(rows.size() == kRows / 3);
      for (size_t i = 0; i < rows.size(); ++i) {
        const size_t want = descending ? 3 * (kRows / 3 - 1 - i) : 3 * i;
        REQUIRE(rows[i].first == ids[want]);
        REQUIRE(std::get<int64_t>(rows[i].second[0]) == static_cast<int64_t>(want));
      }
    }
    auto all = VALUE_OR_FAIL(testing::IndexRange(txn.get(), f.by_k, {}, {}));
    REQUIRE(all.size() == kRows);
    REQUIRE(std::is_sorted(all.begin(), all.end(), [](const auto& a, const auto& b) {
      return std::pair(std::get<int64_t>(a.second[1]), a.first) <
             std::pair(std::get<int64_t>(b.second[1]), b.first);
    }));
    REQUIRE_OK(txn->Commit());
    txn.reset();
    RequireValidateClean(f.db.get());
    f.Reopen();
  }
}

// ------------------------------------------------------------------------- configuration

TEST_CASE("Options::FromConfigText reads a Firebird-style file", "[db]") {
  const char* text =
      "# EmberDB configuration\n"
      "\n"
      "DefaultDbCachePages = 4K    # pages\n"
      "  PageSize=16384\n"
      "TempCacheLimit = 128M\n"
      "LockMemSize = 2m\n"
      "ForcedWrites = off\n"
      "TempDirectories = /tmp/a; /tmp/b\n"
      "GCPolicy = background\n"
      "SweepInterval = 0\n"
      "ParallelWorkers = 2\n"
      "MaxParallelWorkers = 8\n"
      "BlobTempSpace = 2\n"
      "LockHashSlots = 1009\n";
  Options o = VALUE_OR_FAIL(Options::FromConfigText(text, "ember.conf"));
  REQUIRE(o.cache_pages == 4096);
  REQUIRE(o.page_size == 16384);
  REQUIRE(o.temp_cache_limit == 128ull << 20);
  REQUIRE(o.lock_mem_size == 2ull << 20);
  REQUIRE_FALSE(o.forced_writes);
  REQUIRE(o.temp_directories == std::vector<std::string>{"/tmp/a", "/tmp/b"});
  REQUIRE(o.gc_policy == GcPolicy::kBackground);
  REQUIRE(o.sweep_interval.has_value());  // set: overrides the header's value
  REQUIRE(*o.sweep_interval == 0);
  REQUIRE(o.parallel_workers == 2);
  REQUIRE(o.max_parallel_workers == 8);
  REQUIRE(o.blob_temp_space == 2);
  REQUIRE(o.lock_hash_slots == 1009);
  // Settings not in the text keep their defaults.
  REQUIRE(o.use_io_uring == Options{}.use_io_uring);
  REQUIRE_FALSE(o.create_if_missing);

  Options empty = VALUE_OR_FAIL(Options::FromConfigText("# nothing\n\n", "empty.conf"));
  REQUIRE(empty.cache_pages == Options{}.cache_pages);
  REQUIRE(empty.page_size == Options{}.page_size);
}

TEST_CASE("Options::FromConfigText errors name the line", "[db]") {
  struct Case {
    const char* text;
    const char* where;
  };
  const Case cases[] = {
      {"PageSize = 8192\nNoSuchSetting = 1\n", "my.conf:2"},
      {"# c\n\nDefaultDbCachePages = lots\n", "my.conf:3"},
      {"DefaultDbCachePages = 8\n", "my.conf:1"},  // below the minimum
      {"ForcedWrites = maybe\n", "my.conf:1"},
      {"GCPolicy = sometimes\n", "my.conf:1"},
      {"PageSize 8192\n", "my.conf:1"},  // no '='
      {"PageSize = 8192\nPageSize = 1M\n", "my.conf:2"},
      {"BlobTempSpace = 3\n", "my.conf:1"},
      // Checked against each other once the file is read: the line of ParallelWorkers.
      {"MaxParallelWorkers = 2\n# c\nParallelWorkers = 3\n", "my.conf:3"},
      {"ParallelWorkers = 8\nMaxParallelWorkers = 4\n", "my.conf:1"},
      {"ParallelWorkers = 64\n", "MaxParallelWorkers"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    absl::StatusOr<Options> o = Options::FromConfigText(c.text, "my.conf");
    INFO("status: " << o.status().ToString());
    REQUIRE(absl::IsInvalidArgument(o.status()));
    REQUIRE(std::string(o.status().message()).find(c.where) != std::string::npos);
  }
  auto unknown = Options::FromConfigText("NoSuchSetting = 1", "x.conf");
  REQUIRE(std::string(unknown.status().message()).find("NoSuchSetting") != std::string::npos);
}

TEST_CASE("Options::FromConfigFile reads a file and names it in errors", "[db]") {
  TempDb tmp;
  const std::string path = tmp.File("ember.conf");
  testing::WriteFileBytes(path, "DefaultDbCachePages = 100\nForcedWrites = false\n");
  Options o = VALUE_OR_FAIL(Options::FromConfigFile(path));
  REQUIRE(o.cache_pages == 100);
  REQUIRE_FALSE(o.forced_writes);
  testing::WriteFileBytes(path, "ForcedWrites = false\nBogus = 1\n");
  auto bad = Options::FromConfigFile(path);
  REQUIRE(absl::IsInvalidArgument(bad.status()));
  REQUIRE(std::string(bad.status().message()).find(path + ":2") != std::string::npos);
  REQUIRE(absl::IsNotFound(Options::FromConfigFile(tmp.File("missing.conf")).status()));
}

// ------------------------------------------------------------------------- catalog

TEST_CASE("the catalog survives reopen", "[db]") {
  TempDb tmp;
  const TableSchema a = ItemsSchema("alpha");
  const TableSchema b{"beta",
                      {{"k", ColumnType::kString, false},
                       {"v", ColumnType::kBytes},
                       {"blob", ColumnType::kBlob},
                       {"n", ColumnType::kInt64, true}}};
  const TableSchema c{"gamma", {{"only", ColumnType::kDouble, false}}};
  const TableSchema d{"delta", {{"x", ColumnType::kInt64}}};
  const IndexSchema ia{"alpha_id", "alpha", {"id"}, true};
  const IndexSchema ib{"beta_kn", "beta", {"k", "n"}, false};
  const IndexSchema ic{"alpha_score_name", "alpha", {"score", "name"}, false};
  const IndexSchema id{"delta_x", "delta", {"x"}, true};

  // Checks that `db` holds exactly `tables` and `indexes`, with working indexes.
  auto check = [&](Database* db, const std::vector<const TableSchema*>& tables,
                   const std::vector<const IndexSchema*>& indexes) {
    std::vector<std::string> names = db->TableNames();
    std::sort(names.begin(), names.end());
    std::vector<std::string> want;
    for (const TableSchema* s : tables) want.push_back(s->name);
    std::sort(want.begin(), want.end());
    REQUIRE(names == want);
    std::vector<uint32_t> ids;
    for (const TableSchema* s : tables) {
      Table t = VALUE_OR_FAIL(db->GetTable(s->name));
      ids.push_back(t.id());
      REQUIRE(t.schema().name == s->name);
      REQUIRE(t.schema().columns.size() == s->columns.size());
      for (size_t i = 0; i < s->columns.size(); ++i) {
        REQUIRE(t.schema().columns[i].name == s->columns[i].name);
        REQUIRE(t.schema().columns[i].type == s->columns[i].type);
        REQUIRE(t.schema().columns[i].nullable == s->columns[i].nullable);
      }
    }
    std::sort(ids.begin(), ids.end());
    REQUIRE(std::adjacent_find(ids.begin(), ids.end()) == ids.end());
    for (const IndexSchema* s : indexes) {
      Index ix = VALUE_OR_FAIL(db->GetIndex(s->name));
      REQUIRE(ix.schema().name == s->name);
      REQUIRE(ix.schema().table == s->table);
      REQUIRE(ix.schema().columns == s->columns);
      REQUIRE(ix.schema().unique == s->unique);
    }
    REQUIRE(absl::IsNotFound(db->GetTable("epsilon").status()));
    REQUIRE(absl::IsNotFound(db->GetIndex("alpha").status()));
    // The indexes work, and uniqueness is still enforced.
    Table ta = VALUE_OR_FAIL(db->GetTable("alpha"));
    Index by_id = VALUE_OR_FAIL(db->GetIndex("alpha_id"));
    auto txn = VALUE_OR_FAIL(db->Begin());
    auto f = VALUE_OR_FAIL(txn->Lookup(by_id, {int64_t{17}}));
    REQUIRE(f.has_value());
    REQUIRE(SameRow(f->second, ItemRow(17)));
    REQUIRE(absl::IsAlreadyExists(txn->Insert(ta, ItemRow(17)).status()));
    REQUIRE_OK(txn->Rollback());
    txn.reset();
    RequireValidateClean(db);
  };

  uint32_t delta_id = 0;
  {
    auto db = OpenOrFail(tmp.path(), CreateOptions());
    for (const TableSchema* s : {&a, &b, &c}) REQUIRE(db->CreateTable(*s).ok());
    for (const IndexSchema* s : {&ia, &ib, &ic}) REQUIRE(db->CreateIndex(*s).ok());
    InsertItems(db.get(), VALUE_OR_FAIL(db->GetTable("alpha")), 50);
    REQUIRE_OK(db->Close());
  }
  {
    auto db = OpenOrFail(tmp.path(), OpenOptions());
    check(db.get(), {&a, &b, &c}, {&ia, &ib, &ic});
    // DDL after a reopen gets a fresh relation id and persists too.
    Table t = VALUE_OR_FAIL(db->CreateTable(d));
    delta_id = t.id();
    REQUIRE(VALUE_OR_FAIL(db->CreateIndex(id)).schema().name == "delta_x");
    auto txn = VALUE_OR_FAIL(db->Begin());
    REQUIRE_OK(txn->Insert(t, Row{int64_t{1}}));
    REQUIRE_OK(txn->Commit());
    txn.reset();
    REQUIRE_OK(db->Close());
  }
  for (int round = 0; round < 2; ++round) {
    auto db = OpenOrFail(tmp.path(), OpenOptions());
    check(db.get(), {&a, &b, &c, &d}, {&ia, &ib, &ic, &id});
    Table t = VALUE_OR_FAIL(db->GetTable("delta"));
    REQUIRE(t.id() == delta_id);
    auto txn = VALUE_OR_FAIL(db->Begin());
    REQUIRE(absl::IsAlreadyExists(txn->Insert(t, Row{int64_t{1}}).status()));
    REQUIRE_OK(txn->Rollback());
    txn.reset();
    REQUIRE_OK(db->Close());
  }
}

// ------------------------------------------------------------------------- large rows

TEST_CASE("large bytes values are stored, updated and survive reopen", "[db]") {
  const uint32_t ps = GENERATE(4096u, 32768u);
  CAPTURE(ps);
  TempDb tmp;
  std::mt19937_64 rng(ps);
  const TableSchema schema{"blobs",
                           {{"id", ColumnType::kInt64, false},
                            {"data", ColumnType::kBytes},
                            {"tail", ColumnType::kString}}};
  const std::string v100k = RandomBytes(rng, 100 * 1024);
  const std::string v1m = RandomBytes(rng, 1024 * 1024);
  const std::string v1m_b = RandomBytes(rng, 1024 * 1024);
  const std::string compressible(1024 * 1024, 'z');
  std::vector<RecordId> ids;
  std::vector<Row> expect;
  {
    auto db = OpenOrFail(tmp.path(), CreateOptions(ps, 64));
    Table t = VALUE_OR_FAIL(db->CreateTable(schema));
    auto txn = VALUE_OR_FAIL(db->Begin());
    expect = {Row{int64_t{1}, v100k, std::string("a")}, Row{int64_t{2}, v1m, std::string("b")},
              Row{int64_t{3}, std::string("small"), std::string("c")},
              Row{int64_t{4}, compressible, std::string("d")}};
    for (const Row& r : expect) ids.push_back(VALUE_OR_FAIL(txn->Insert(t, r)));
    for (size_t i = 0; i < ids.size(); ++i) {
      auto r = VALUE_OR_FAIL(txn->Get(t, ids[i]));
      REQUIRE(r.has_value());
      REQUIRE(SameRow(*r, expect[i]));
    }
    REQUIRE_OK(txn->Commit());
    txn.reset();

    // Updates: big -> other big, small -> big, big -> small, in a new transaction each time
    // (so the old versions become back versions), and twice in one transaction.
    auto t2 = VALUE_OR_FAIL(db->Begin());
    expect[1][1] = v1m_b;
    expect[2][1] = v100k;
    expect[0][1] = std::string("now small");
    for (size_t i : {1, 2, 0}) REQUIRE_OK(t2->Update(t, ids[i], expect[i]));
    expect[1][2] = std::string("again");
    REQUIRE_OK(t2->Update(t, ids[1], expect[1]));
    for (size_t i = 0; i < ids.size(); ++i) {
      auto r = VALUE_OR_FAIL(t2->Get(t, ids[i]));
      REQUIRE(r.has_value());
      REQUIRE(SameRow(*r, expect[i]));
    }
    REQUIRE_OK(t2->Commit());
    t2.reset();
    auto t3 = VALUE_OR_FAIL(db->Begin());
    auto rows = VALUE_OR_FAIL(testing::ScanAll(t3.get(), t));
    REQUIRE(rows.size() == expect.size());
    for (size_t i = 0; i < rows.size(); ++i) REQUIRE(SameRow(rows[i].second, expect[i]));
    REQUIRE_OK(t3->Commit());
    t3.reset();
    RequireValidateClean(db.get());
    REQUIRE_OK(db->Close());
  }
  auto db = OpenOrFail(tmp.path(), OpenOptions(64));
  Table t = VALUE_OR_FAIL(db->GetTable("blobs"));
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    for (size_t i = 0; i < ids.size(); ++i) {
      auto r = VALUE_OR_FAIL(txn->Get(t, ids[i]));
      REQUIRE(r.has_value());
      REQUIRE(SameRow(*r, expect[i]));
    }
    // A rolled-back update of a large value leaves the committed one.
    REQUIRE_OK(txn->Update(t, ids[1], Row{int64_t{2}, v1m, std::string("rolled back")}));
    REQUIRE_OK(txn->Rollback());
  }
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    auto r = VALUE_OR_FAIL(txn->Get(t, ids[1]));
    REQUIRE(r.has_value());
    REQUIRE(SameRow(*r, expect[1]));
    REQUIRE_OK(txn->Commit());
  }
  RequireValidateClean(db.get());
  REQUIRE_OK(db->Close());
}

// ------------------------------------------------------------------------- types and NULLs

// The bytes of a BLOB, read in small segments.
std::string ReadBlob(Transaction* txn, BlobId id) {
  auto reader = VALUE_OR_FAIL(txn->OpenBlob(id));
  std::string out;
  char buf[777];
  for (int guard = 0; guard < 100000; ++guard) {
    size_t n = VALUE_OR_FAIL(reader->Read(buf, sizeof buf));
    if (n == 0) break;
    out.append(buf, n);
  }
  REQUIRE(out.size() == reader->size());
  return out;
}

TEST_CASE("every column type and NULL round trips", "[db]") {
  TempDb tmp;
  const TableSchema schema{"types",
                           {{"i", ColumnType::kInt64},
                            {"d", ColumnType::kDouble},
                            {"s", ColumnType::kString},
                            {"b", ColumnType::kBytes},
                            {"blob", ColumnType::kBlob},
                            {"nn", ColumnType::kInt64, false}}};
  constexpr size_t kBlobCol = 4;
  const double inf = std::numeric_limits<double>::infinity();
  // Rows with the BLOB column given as its content (NULL: a NULL field); BLOBs are made in the
  // inserting transaction and compared by content, since storing one gives it a new id.
  struct Spec {
    Row row;
    std::optional<std::string> blob;
  };
  std::mt19937_64 rng(3);
  const std::vector<Spec> specs = {
      {{int64_t{0}, 0.0, std::string(""), std::string(""), {}, int64_t{1}}, std::string()},
      {{std::numeric_limits<int64_t>::min(),
        -0.0,
        std::string("a\0b", 3),
        std::string("\0\0\xff\x01", 4),
        {},
        int64_t{2}},
       std::string("small blob")},
      {{std::numeric_limits<int64_t>::max(),
        inf,
        std::string("héllo wörld"),
        std::string(300, '\xff'),
        {},
        int64_t{3}},
       RandomBytes(rng, 20000)},
      {{int64_t{-1}, -inf, std::string(5000, 'q'), std::string(1, '\0'), {}, int64_t{4}},
       std::nullopt},
      {{int64_t{42},
        std::numeric_limits<double>::quiet_NaN(),
        std::string("nan row"),
        std::string("x"),
        {},
        int64_t{5}},
       std::string(1, '\0')},
      {{int64_t{7},
        std::numeric_limits<double>::denorm_min(),
        std::string("tiny"),
        std::string("y"),
        {},
        int64_t{6}},
       std::nullopt},
      {{std::monostate{}, std::monostate{}, std::monostate{}, std::monostate{}, {}, int64_t{7}},
       std::nullopt},
      {{int64_t{1}, std::monostate{}, std::string("half"), std::monostate{}, {}, int64_t{8}},
       std::string(5000, 'b')},
  };
  // Compares a row read back with its spec: every column but the BLOB exactly, the BLOB by
  // content.
  auto check = [&](Transaction* txn, const Row& got, const Spec& spec) {
    INFO("read " << RowText(got) << " wrote " << RowText(spec.row));
    REQUIRE(got.size() == spec.row.size());
    for (size_t c = 0; c < got.size(); ++c) {
      if (c == kBlobCol) continue;
      CAPTURE(c);
      REQUIRE(testing::SameValue(got[c], spec.row[c]));
    }
    if (!spec.blob) {
      REQUIRE(IsNull(got[kBlobCol]));
    } else {
      REQUIRE(std::holds_alternative<BlobId>(got[kBlobCol]));
      REQUIRE(ReadBlob(txn, std::get<BlobId>(got[kBlobCol])) == *spec.blob);
    }
  };
  std::vector<RecordId> ids;
  {
    auto db = OpenOrFail(tmp.path(), CreateOptions(4096));
    Table t = VALUE_OR_FAIL(db->CreateTable(schema));
    auto txn = VALUE_OR_FAIL(db->Begin());
    for (const Spec& spec : specs) {
      Row r = spec.row;
      if (spec.blob) {
        BlobId b{};
        if (!spec.blob->empty()) REQUIRE_OK(txn->Append(&b, *spec.blob));
        r[kBlobCol] = b;
      } else {
        r[kBlobCol] = std::monostate{};
      }
      ids.push_back(VALUE_OR_FAIL(txn->Insert(t, r)));
    }
    for (size_t i = 0; i < ids.size(); ++i)
      check(txn.get(), *VALUE_OR_FAIL(txn->Get(t, ids[i])), specs[i]);
    // Rows that do not fit the schema are refused.
    REQUIRE(absl::IsInvalidArgument(txn->Insert(t, Row{int64_t{1}, 1.0, std::string(),
                                                       std::string(), BlobId{}, std::monostate{}})
                                        .status()));  // NOT NULL
    REQUIRE(absl::IsInvalidArgument(txn->Insert(t, Row{std::string("x"), 1.0, std::string(),
                                                       std::string(), BlobId{}, int64_t{1}})
                                        .status()));  // wrong type
    REQUIRE(absl::IsInvalidArgument(txn->Insert(t, Row{int64_t{1}, int64_t{1}, std::string(),
                                                       std::string(), BlobId{}, int64_t{1}})
                                        .status()));  // int for double
    REQUIRE(absl::IsInvalidArgument(
        txn->Insert(t, Row{int64_t{1}, 1.0, std::string(), int64_t{2}, BlobId{}, int64_t{1}})
            .status()));  // int for bytes
    REQUIRE(absl::IsInvalidArgument(txn->Insert(t, Row{int64_t{1}, 1.0, std::string(),
                                                       std::string(), std::string("b"), int64_t{1}})
                                        .status()));                             // string for BLOB
    REQUIRE(absl::IsInvalidArgument(txn->Insert(t, Row{int64_t{1}}).status()));  // arity
    REQUIRE(absl::IsInvalidArgument(txn->Update(
        t, ids[0],
        Row{int64_t{1}, 1.0, std::string(), std::string(), BlobId{}, std::monostate{}})));
    auto all = VALUE_OR_FAIL(testing::ScanAll(txn.get(), t));
    REQUIRE(all.size() == specs.size());
    REQUIRE_OK(txn->Commit());
    txn.reset();
    REQUIRE_OK(db->Close());
  }
  auto db = OpenOrFail(tmp.path(), OpenOptions());
  Table t = VALUE_OR_FAIL(db->GetTable("types"));
  auto txn = VALUE_OR_FAIL(db->Begin());
  for (size_t i = 0; i < ids.size(); ++i) {
    CAPTURE(i);
    auto r = VALUE_OR_FAIL(txn->Get(t, ids[i]));
    REQUIRE(r.has_value());
    check(txn.get(), *r, specs[i]);
  }
  // Update every value of a row to NULL and back.
  Row nulls{std::monostate{}, std::monostate{}, std::monostate{},
            std::monostate{}, std::monostate{}, int64_t{0}};
  REQUIRE_OK(txn->Update(t, ids[2], nulls));
  REQUIRE(SameRow(*VALUE_OR_FAIL(txn->Get(t, ids[2])), nulls));
  REQUIRE_OK(txn->Commit());
  txn.reset();
  auto t2 = VALUE_OR_FAIL(db->Begin());
  REQUIRE(SameRow(*VALUE_OR_FAIL(t2->Get(t, ids[2])), nulls));
  REQUIRE_OK(t2->Update(
      t, ids[1],
      Row{int64_t{5}, 2.5, std::string("s"), std::string("b"), std::monostate{}, int64_t{9}}));
  REQUIRE(SameRow(
      *VALUE_OR_FAIL(t2->Get(t, ids[1])),
      Row{int64_t{5}, 2.5, std::string("s"), std::string("b"), std::monostate{}, int64_t{9}}));
  REQUIRE_OK(t2->Commit());
  t2.reset();
  RequireValidateClean(db.get());
  REQUIRE_OK(db->Close());
}

TEST_CASE("Get of a record id that never existed is empty", "[db]") {
  TempDb tmp;
  auto db = OpenOrFail(tmp.path(), CreateOptions());
  Table t = VALUE_OR_FAIL(db->CreateTable(ItemsSchema()));
  std::vector<RecordId> ids = InsertItems(db.get(), t, 3);
  auto txn = VALUE_OR_FAIL(db->Begin());
  for (uint64_t v : {ids.back().value + 1, uint64_t{1} << 40, ~uint64_t{0}}) {
    auto r = VALUE_OR_FAIL(txn->Get(t, RecordId{v}));
    REQUIRE_FALSE(r.has_value());
    REQUIRE(absl::IsNotFound(txn->Update(t, RecordId{v}, ItemRow(1))));
    REQUIRE(absl::IsNotFound(txn->Delete(t, RecordId{v})));
  }
  REQUIRE_OK(txn->Commit());
  txn.reset();
  REQUIRE_OK(db->Close());
}

// ------------------------------------------------------------------------- validation

TEST_CASE("Validate is clean after a mix of work, and frees unreachable pages", "[db]") {
  TempDb tmp;
  std::mt19937_64 rng(7);
  auto db = OpenOrFail(tmp.path(), CreateOptions(4096, 32));
  Table t = VALUE_OR_FAIL(db->CreateTable(ItemsSchema()));
  Index by_id = VALUE_OR_FAIL(db->CreateIndex({"by_id", "items", {"id"}, true}));
  Index by_score = VALUE_OR_FAIL(db->CreateIndex({"by_score", "items", {"score", "name"}}));
  std::vector<RecordId> ids = InsertItems(db.get(), t, 400);
  size_t live = ids.size();
  for (int round = 0; round < 6; ++round) {
    auto txn = VALUE_OR_FAIL(db->Begin());
    for (size_t i = static_cast<size_t>(round); i < ids.size(); i += 7) {
      absl::Status s = txn->Update(
          t, ids[i],
          Row{static_cast<int64_t>(i) + 1, std::string(static_cast<size_t>(rng() % 400), 'u'),
              static_cast<double>(rng() % 50)});
      if (!absl::IsNotFound(s)) REQUIRE_OK(s);
    }
    if (round % 2 == 1) {
      for (size_t i = static_cast<size_t>(round); i < ids.size(); i += 29) {
        if (txn->Delete(t, ids[i]).ok()) --live;
      }
      REQUIRE_OK(txn->Commit());
    } else if (round == 2) {
      for (int64_t k = 0; k < 50; ++k) REQUIRE_OK(txn->Insert(t, ItemRow(5000 + k)));
      REQUIRE_OK(txn->Rollback());
    } else {
      REQUIRE_OK(txn->Commit());
    }
  }
  REQUIRE_FALSE(db->CreateIndex({"bad_unique", "items", {"score"}, true}).ok());
  {
    auto txn = VALUE_OR_FAIL(db->Begin());
    auto rows = VALUE_OR_FAIL(testing::ScanAll(txn.get(), t));
    REQUIRE(rows.size() == live);
    auto by = VALUE_OR_FAIL(testing::IndexRange(txn.get(), by_id, {}, {}));
    REQUIRE(by.size() == live);
    auto bs = VALUE_OR_FAIL(testing::IndexRange(txn.get(), by_score, {}, {}));
    REQUIRE(bs.size() == live);
    REQUIRE_OK(txn->Commit());
  }
  ValidationReport rep = VALUE_OR_FAIL(db->Validate({.free_unreachable = true}));
  INFO("first error: " << (rep.errors.empty() ? std::string() : rep.errors[0]));
  REQUIRE(rep.ok());
  REQUIRE(rep.records >= live);
  REQUIRE(rep.index_entries >= 2 * live);
  REQUIRE(rep.freed_pages == rep.unreachable_pages.size());
  ValidationReport again = VALUE_OR_FAIL(db->Validate());
  REQUIRE(again.ok());
  REQUIRE(again.unreachable_pages.empty());
  REQUIRE(again.freed_pages == 0);
  // Freed pages are reused, and the database is still sound after more work and a reopen.
  InsertItems(db.get(), VALUE_OR_FAIL(db->CreateTable(ItemsSchema("more"))), 100);
  REQUIRE_OK(db->Close());
  auto db2 = OpenOrFail(tmp.path(), OpenOptions(32));
  ValidationReport after = VALUE_OR_FAIL(db2->Validate());
  INFO("first error after reopen: " << (after.errors.empty() ? std::string() : after.errors[0]));
  REQUIRE(after.ok());
  REQUIRE(after.unreachable_pages.empty());
  REQUIRE_OK(db2->Close());
}

TEST_CASE("operations on a closed database fail cleanly", "[db]") {
  TempDb tmp;
  auto db = OpenOrFail(tmp.path(), CreateOptions());
  Table t = VALUE_OR_FAIL(db->CreateTable(ItemsSchema()));
  Index ix = VALUE_OR_FAIL(db->CreateIndex({"by_id", "items", {"id"}, true}));
  std::vector<RecordId> ids = InsertItems(db.get(), t, 3);
  // A transaction still active at Close is ended (rolled back): it can do nothing afterwards.
  auto txn = VALUE_OR_FAIL(db->Begin());
  REQUIRE_OK(txn->Insert(t, ItemRow(4)).status());
  REQUIRE_OK(txn->Update(t, ids[0], ItemRow(10)));
  REQUIRE_OK(db->Close());
  REQUIRE_OK(db->Close());  // a second Close is harmless
  REQUIRE_FALSE(txn->Insert(t, ItemRow(5)).ok());
  REQUIRE_FALSE(txn->Get(t, ids[0]).ok());
  REQUIRE_FALSE(txn->Scan(t).ok());
  REQUIRE_FALSE(txn->Lookup(ix, {int64_t{1}}).ok());
  REQUIRE_FALSE(txn->IndexScan(ix, {}, {}).ok());
  REQUIRE_FALSE(txn->Commit().ok());
  txn.reset();
  REQUIRE(absl::IsFailedPrecondition(db->Begin().status()));
  REQUIRE(absl::IsFailedPrecondition(db->CreateTable(ItemsSchema("x")).status()));
  REQUIRE(absl::IsFailedPrecondition(db->CreateIndex({"i", "items", {"id"}}).status()));
  REQUIRE(absl::IsFailedPrecondition(db->Validate().status()));
  db.reset();
  // The ended transaction's changes are not there after a reopen.
  auto again = OpenOrFail(tmp.path(), OpenOptions());
  Table t2 = VALUE_OR_FAIL(again->GetTable("items"));
  auto r = VALUE_OR_FAIL(again->Begin());
  auto rows = VALUE_OR_FAIL(testing::ScanAll(r.get(), t2));
  REQUIRE(rows.size() == 3);
  REQUIRE(SameRow(rows[0].second, ItemRow(1)));
  REQUIRE_OK(r->Commit());
  r.reset();
  RequireValidateClean(again.get());
  REQUIRE_OK(again->Close());
}

}  // namespace
}  // namespace ember
