// Validate reads every page of every stored BLOB: a damaged BLOB data page
// - listed by the BLOB's header record (level 1) or by one of its list pages (level 2) - is
// reported by Validate, naming the page, not first found by the next reader.
#include <catch2/catch.hpp>
#include <string>

#include "ember/ember.h"
#include "engine/blob/blob_format.h"
#include "engine/db/database_impl.h"
#include "engine/page/blob_page.h"
#include "engine/util/coding.h"
#include "tests/support/db_util.h"

namespace ember {
namespace {

// One data page of stored BLOB `id` (the middle one), found through its header record.
page::PageNo SomeDataPage(Database* db, const Table& t, BlobId id) {
  auto* impl = static_cast<db::DatabaseImpl*>(db);
  record::Relation* rel = internal::TableState::From(t)->relation.get();
  std::string body =
      VALUE_OR_FAIL(rel->ReadBlobRecord(blob::IdPage(id.value), blob::IdLine(id.value)));
  blob::BlobHeader h = VALUE_OR_FAIL(blob::DecodeBlobHeader(body));
  REQUIRE(!h.pages.empty());
  const page::PageNo p = h.pages[h.pages.size() / 2];
  if (h.level == 1) return p;
  REQUIRE(h.level == 2);
  auto list = VALUE_OR_FAIL(impl->cache()->Fetch(p, cache::LatchMode::kShared));
  REQUIRE(page::BlobUsed(list.data()) > 0);
  return util::Get32(page::BlobData(list.data()) + 4 * (page::BlobUsed(list.data()) / 2));
}

TEST_CASE("validate: a damaged BLOB page is reported by Validate", "[validate][blob]") {
  const size_t size = GENERATE(size_t{20000}, size_t{600} * 4096);  // level 1, level 2
  CAPTURE(size);
  testing::TempDb tmp;
  Options o = testing::CreateOptions(4096, 64);
  auto db = testing::OpenOrFail(tmp.path(), o);
  Table t = VALUE_OR_FAIL(
      db->CreateTable({"b", {{"id", ColumnType::kInt64, false}, {"data", ColumnType::kBlob}}}));
  auto tx = VALUE_OR_FAIL(db->Begin());
  auto w = VALUE_OR_FAIL(tx->CreateBlob());
  REQUIRE_OK(w->Write(std::string(size, 'q')));
  const RecordId rec = VALUE_OR_FAIL(tx->Insert(t, {int64_t{1}, w->id()}));
  auto row = VALUE_OR_FAIL(tx->Get(t, rec));
  REQUIRE(row.has_value());
  const BlobId stored = std::get<BlobId>((*row)[1]);
  REQUIRE_OK(tx->Commit());
  const page::PageNo victim = SomeDataPage(db.get(), t, stored);
  {
    auto clean = VALUE_OR_FAIL(db->Validate());
    REQUIRE(clean.ok());
  }
  REQUIRE_OK(db->Close());
  db.reset();

  std::string bytes = testing::ReadFileBytes(tmp.path());
  REQUIRE(bytes.size() >= (uint64_t{victim} + 1) * 4096);
  bytes[uint64_t{victim} * 4096 + 1000] ^= 0x5A;  // a data byte: only the checksum tells
  testing::WriteFileBytes(tmp.path(), bytes);

  o.create_if_missing = false;
  db = testing::OpenOrFail(tmp.path(), o);
  auto rep = VALUE_OR_FAIL(db->Validate());
  REQUIRE_FALSE(rep.ok());
  bool named = false;
  for (const std::string& e : rep.errors) {
    named |= e.find("page " + std::to_string(victim) + ":") != std::string::npos;
  }
  INFO(rep.errors[0]);
  CHECK(named);
  REQUIRE_OK(db->Close());
}

}  // namespace
}  // namespace ember
