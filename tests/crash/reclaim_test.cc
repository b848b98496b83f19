// After a crash: Open reports that the last close was not clean
// (DatabaseStats::opened_after_crash) and frees the pages the crash leaked - here the pages of
// a temporary BLOB kept in the database and an orphan stored BLOB of the transaction that died -
// without the user's help, unless the walk that finds them finds damage (then it frees nothing
// and the damage is a background error that Close returns).
#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "ember/ember.h"
#include "engine/blob/blob_format.h"
#include "engine/db/database_impl.h"
#include "tests/support/db_util.h"

namespace ember {
namespace {

struct Crashed {
  uint64_t leaked_temp_pages = 0;               // pages of the temporary BLOB on disk, allocated
  page::PageNo committed_page = page::kNoPage;  // the data page of a committed row
};

Options ReclaimOptions() {
  Options o = testing::CreateOptions(4096, 64);
  o.blob_temp_space = 0;  // temporary BLOBs in database pages: what a crash can leak
  o.use_io_uring = false;
  return o;
}

Options ReopenOptions(bool reclaim = true) {
  Options o = ReclaimOptions();
  o.create_if_missing = false;
  o.reclaim_after_crash = reclaim;
  return o;
}

// Creates the database with one committed row, then opens it again and dies in the middle of
// a transaction whose temporary BLOB and stored (orphan) BLOB reached the disk.
Crashed CrashWithLeaks(const std::string& path) {
  Crashed c;
  {
    auto db = testing::OpenOrFail(path, ReclaimOptions());
    Table t = VALUE_OR_FAIL(
        db->CreateTable({"b", {{"id", ColumnType::kInt64, false}, {"data", ColumnType::kBlob}}}));
    auto tx = VALUE_OR_FAIL(db->Begin());
    const RecordId rec = VALUE_OR_FAIL(tx->Insert(t, {int64_t{1}, BlobId{}}));
    REQUIRE_OK(tx->Commit());
    c.committed_page =
        VALUE_OR_FAIL(internal::TableState::From(t)->relation->RecordPage(rec.value));
    CHECK_FALSE(db->stats().opened_after_crash);
    REQUIRE_OK(db->Close());
  }
  auto db = testing::OpenOrFail(path, ReopenOptions());
  CHECK_FALSE(db->stats().opened_after_crash);  // closed cleanly
  auto* impl = static_cast<db::DatabaseImpl*>(db.get());
  Table t = VALUE_OR_FAIL(db->GetTable("b"));
  auto tx = VALUE_OR_FAIL(db->Begin());
  auto temp = VALUE_OR_FAIL(tx->CreateBlob());
  REQUIRE_OK(temp->Write(std::string(100000, 't')));
  auto w = VALUE_OR_FAIL(tx->CreateBlob());
  REQUIRE_OK(w->Write(std::string(50000, 's')));
  const RecordId rec = VALUE_OR_FAIL(tx->Insert(t, {int64_t{2}, w->id()}));
  const auto row = VALUE_OR_FAIL(tx->Get(t, rec));
  REQUIRE(row.has_value());
  const page::PageNo header_page = blob::IdPage(std::get<BlobId>((*row)[1]).value);
  // Everything but the row's page (which would make the stored BLOB garbage of a dead version
  // rather than an orphan) reaches the disk: the BLOBs' pages, their header, the PIP.
  const page::PageNo row_page =
      VALUE_OR_FAIL(internal::TableState::From(t)->relation->RecordPage(rec.value));
  REQUIRE(row_page != header_page);
  const uint64_t before = db->stats().page_count;
  for (page::PageNo p = 1; p < before; ++p) {
    if (p == row_page) continue;
    const page::PageNo one[] = {p};
    absl::Status s = impl->cache()->FlushPages(one);
    if (!s.ok()) FAIL("flush page " << p << ": " << s.ToString());
  }
  c.leaked_temp_pages = 100000 / 4000;
  impl->TEST_SimulateCrash();
  temp.reset();
  w.reset();
  tx.reset();  // nothing reaches the file any more
  return c;
}

TEST_CASE("reclaim: an open after a crash reports it and frees the leaked pages",
          "[crash][reclaim]") {
  testing::TempDb tmp;
  const Crashed c = CrashWithLeaks(tmp.path());
  auto db = testing::OpenOrFail(tmp.path(), ReopenOptions());
  DatabaseStats st = db->stats();
  CHECK(st.opened_after_crash);
  CHECK(st.pages_reclaimed_at_open >= c.leaked_temp_pages);
  CHECK(st.blob_pages_reclaimed_at_open >= 50000 / 4096);
  CHECK(st.background_errors == 0);
  auto rep = VALUE_OR_FAIL(db->Validate());
  INFO((rep.errors.empty() ? std::string() : rep.errors[0]));
  CHECK(rep.ok());
  CHECK(rep.unreachable_pages.empty());
  CHECK(rep.orphan_blobs.empty());
  REQUIRE_OK(db->Close());
  db = testing::OpenOrFail(tmp.path(), ReopenOptions());
  CHECK_FALSE(db->stats().opened_after_crash);
  CHECK(db->stats().pages_reclaimed_at_open == 0);
  REQUIRE_OK(db->Close());
}

TEST_CASE("reclaim: with reclaim_after_crash off the crash is reported and the leaks stay",
          "[crash][reclaim]") {
  testing::TempDb tmp;
  const Crashed c = CrashWithLeaks(tmp.path());
  auto db = testing::OpenOrFail(tmp.path(), ReopenOptions(/*reclaim=*/false));
  CHECK(db->stats().opened_after_crash);
  CHECK(db->stats().pages_reclaimed_at_open == 0);
  auto rep = VALUE_OR_FAIL(db->Validate());
  CHECK(rep.ok());
  CHECK(rep.unreachable_pages.size() >= c.leaked_temp_pages);
  CHECK(rep.orphan_blobs.size() == 1);
  REQUIRE_OK(db->Close());
}

TEST_CASE("reclaim: damage found by the walk at open frees nothing and is reported",
          "[crash][reclaim]") {
  testing::TempDb tmp;
  const Crashed c = CrashWithLeaks(tmp.path());
  std::string bytes = testing::ReadFileBytes(tmp.path());
  bytes[uint64_t{c.committed_page} * 4096 + 2000] ^= 0x21;  // fails the page's checksum
  testing::WriteFileBytes(tmp.path(), bytes);
  auto db = testing::OpenOrFail(tmp.path(), ReopenOptions());
  DatabaseStats st = db->stats();
  CHECK(st.opened_after_crash);
  CHECK(st.pages_reclaimed_at_open == 0);
  CHECK(st.blob_pages_reclaimed_at_open == 0);
  CHECK(st.background_errors == 1);
  CHECK(st.last_background_error.find("nothing was freed") != std::string::npos);
  absl::Status s = db->Close();
  CHECK(testing::IsError(s, absl::StatusCode::kDataLoss, "nothing was freed"));
}

}  // namespace
}  // namespace ember
