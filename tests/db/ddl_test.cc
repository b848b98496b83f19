// DropTable, DropIndex and SetIndexActive through the public API: what readers and writers see
// during and after each (an older snapshot keeps reading a dropped table; nothing reads through
// a dropped or inactive index), that the pages go back to the free list once no snapshot can
// read them (and are reused), that the catalog keeps the result across a reopen and a crash,
// and that Validate stays clean throughout.
#include <atomic>
#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ember/ember.h"
#include "engine/db/database_impl.h"
#include "tests/support/db_util.h"

namespace ember {
namespace {

using testing::CreateOptions;
using testing::IsError;
using testing::OpenOrFail;
using testing::RequireValid;
using testing::ScanAll;
using testing::TableDb;

// Validate clean, and no orphan BLOB (a drop takes a table's BLOBs with it).
void RequireValidNoOrphans(Database* db, const std::string& when) {
  REQUIRE(RequireValid(db, when).orphan_blobs.empty());
}

// Table `name`(id, k, v) with indexes name_id (unique) and name_k, and `rows` rows whose v is
// long enough every 10th row to be stored as a BLOB of several pages.
Table MakeTable(Database* db, const std::string& name, int rows) {
  Table t = VALUE_OR_FAIL(db->CreateTable({name,
                                           {{"id", ColumnType::kInt64, false},
                                            {"k", ColumnType::kInt64},
                                            {"v", ColumnType::kString}}}));
  REQUIRE_OK(db->CreateIndex({name + "_id", name, {"id"}, true}).status());
  REQUIRE_OK(db->CreateIndex({name + "_k", name, {"k"}, false}).status());
  auto txn = VALUE_OR_FAIL(db->Begin());
  for (int i = 0; i < rows; ++i) {
    const std::string v =
        i % 10 == 0 ? std::string(20000, static_cast<char>('a' + i % 26)) : absl::StrCat("row ", i);
    REQUIRE_OK(txn->Insert(t, {int64_t{i}, int64_t{i % 7}, v}).status());
  }
  REQUIRE_OK(txn->Commit());
  return t;
}

uint32_t PageCount(Database* db) { return static_cast<uint32_t>(db->stats().page_count); }

TEST_CASE("DropTable frees its pages, indexes and BLOBs for reuse", "[ddl]") {
  testing::TempDb tmp;
  auto db = OpenOrFail(tmp.path(), CreateOptions(4096, 256));
  MakeTable(db.get(), "a", 2000);
  const uint32_t grown = PageCount(db.get());
  REQUIRE_OK(db->DropTable("a"));
  CHECK(IsError(db->GetTable("a").status(), absl::StatusCode::kNotFound));
  CHECK(IsError(db->GetIndex("a_id").status(), absl::StatusCode::kNotFound));
  CHECK(db->TableNames().empty());
  RequireValidNoOrphans(db.get(), "after the drop");
  // The same table again fits in the pages the drop gave back.
  MakeTable(db.get(), "a", 2000);
  CHECK(PageCount(db.get()) <= grown + 8);
  RequireValidNoOrphans(db.get(), "after the table was made again");
  REQUIRE_OK(db->DropTable("a"));
  CHECK(IsError(db->DropTable("a"), absl::StatusCode::kNotFound, "no table a"));
  REQUIRE_OK(db->Close());
  db = OpenOrFail(tmp.path(), CreateOptions(4096, 256));
  CHECK(IsError(db->GetTable("a").status(), absl::StatusCode::kNotFound));
  RequireValidNoOrphans(db.get(), "after reopen");
  MakeTable(db.get(), "a", 2000);
  CHECK(PageCount(db.get()) <= grown + 8);
}

TEST_CASE("A snapshot older than a drop still reads the table, and its pages wait for it",
          "[ddl]") {
  TableDb f;
  for (int i = 0; i < 300; ++i) {
    auto txn = VALUE_OR_FAIL(f.db->Begin());
    REQUIRE_OK(txn->Insert(f.t, {int64_t{i}, int64_t{i % 5},
                                 i % 50 == 0 ? std::string(9000, 'x') : std::string("v")})
                   .status());
    REQUIRE_OK(txn->Commit());
  }
  auto old = VALUE_OR_FAIL(f.db->Begin());
  REQUIRE(VALUE_OR_FAIL(ScanAll(old.get(), f.t)).size() == 300);
  REQUIRE_OK(f.db->DropTable("t"));

  // The old snapshot: scans and gets still work, BLOB values included.
  auto rows = VALUE_OR_FAIL(ScanAll(old.get(), f.t));
  REQUIRE(rows.size() == 300);
  CHECK(std::get<std::string>(rows[0].second[2]).size() == 9000);
  REQUIRE(VALUE_OR_FAIL(old->Get(f.t, rows[5].first)).has_value());
  // Its indexes are gone for everyone; writes are refused.
  CHECK(IsError(old->Lookup(f.by_id, {int64_t{3}}).status(), absl::StatusCode::kNotFound,
                "was dropped"));
  CHECK(IsError(old->Insert(f.t, {int64_t{1000}, int64_t{0}, std::string("n")}).status(),
                absl::StatusCode::kNotFound, "was dropped"));
  CHECK(IsError(old->Delete(f.t, rows[0].first), absl::StatusCode::kNotFound));

  // A new snapshot does not see it; the name can be taken meanwhile.
  auto fresh = VALUE_OR_FAIL(f.db->Begin());
  CHECK(IsError(ScanAll(fresh.get(), f.t).status(), absl::StatusCode::kNotFound, "table t"));
  CHECK(IsError(fresh->Get(f.t, rows[0].first).status(), absl::StatusCode::kNotFound));
  CHECK(IsError(f.db->GetTableStats(f.t).status(), absl::StatusCode::kNotFound));
  REQUIRE_OK(fresh->Commit());
  Table again = VALUE_OR_FAIL(f.db->CreateTable({"t", {{"x", ColumnType::kInt64}}}));
  {
    auto w = VALUE_OR_FAIL(f.db->Begin());
    REQUIRE_OK(w->Insert(again, {int64_t{1}}).status());
    REQUIRE_OK(w->Commit());
  }
  // Validate counts the waiting pages as in use.
  RequireValidNoOrphans(f.db.get(), "while the old snapshot reads");
  REQUIRE(VALUE_OR_FAIL(ScanAll(old.get(), f.t)).size() == 300);
  const uint32_t before_free = PageCount(f.db.get());

  REQUIRE_OK(old->Commit());  // the last reader: the pages go now
  RequireValidNoOrphans(f.db.get(), "after the old snapshot ended");
  // The dropped table's rows again, in a new table: they fit in the pages it gave back.
  Table u = VALUE_OR_FAIL(f.db->CreateTable({"u",
                                             {{"id", ColumnType::kInt64, false},
                                              {"k", ColumnType::kInt64},
                                              {"v", ColumnType::kString}}}));
  {
    auto w = VALUE_OR_FAIL(f.db->Begin());
    for (const auto& [id, row] : rows) REQUIRE_OK(w->Insert(u, row).status());
    REQUIRE_OK(w->Commit());
  }
  CHECK(PageCount(f.db.get()) <= before_free + 8);
  RequireValidNoOrphans(f.db.get(), "after reuse");
}

TEST_CASE("DropTable waits for no writer: uncommitted changes refuse it", "[ddl]") {
  TableDb f;
  auto w = VALUE_OR_FAIL(f.db->Begin());
  REQUIRE_OK(w->Insert(f.t, {int64_t{1}, int64_t{1}, std::string("a")}).status());
  CHECK(IsError(f.db->DropTable("t"), absl::StatusCode::kFailedPrecondition, "uncommitted"));
  REQUIRE_OK(w->Rollback());
  auto w2 = VALUE_OR_FAIL(f.db->Begin());
  REQUIRE_OK(w2->Insert(f.t, {int64_t{2}, int64_t{1}, std::string("b")}).status());
  CHECK(IsError(f.db->DropTable("t"), absl::StatusCode::kFailedPrecondition));
  REQUIRE_OK(w2->Commit());
  // A reader does not hold it up.
  auto r = VALUE_OR_FAIL(f.db->Begin());
  REQUIRE(VALUE_OR_FAIL(ScanAll(r.get(), f.t)).size() == 1);
  REQUIRE_OK(f.db->DropTable("t"));
  REQUIRE_OK(r->Rollback());
  RequireValidNoOrphans(f.db.get(), "after the drop");
}

TEST_CASE("DropIndex: gone for every reader, writes go on, pages reused", "[ddl]") {
  TableDb f;
  {
    auto w = VALUE_OR_FAIL(f.db->Begin());
    for (int i = 0; i < 3000; ++i) {
      REQUIRE_OK(w->Insert(f.t, {int64_t{i}, int64_t{i % 11}, std::string("v")}).status());
    }
    REQUIRE_OK(w->Commit());
  }
  auto old = VALUE_OR_FAIL(f.db->Begin());
  REQUIRE(VALUE_OR_FAIL(old->Lookup(f.by_k, {int64_t{3}})).has_value());
  REQUIRE_OK(f.db->DropIndex("t_k"));
  CHECK(IsError(old->Lookup(f.by_k, {int64_t{3}}).status(), absl::StatusCode::kNotFound));
  CHECK(IsError(f.db->GetIndex("t_k").status(), absl::StatusCode::kNotFound));
  CHECK(IsError(f.db->GetIndexStats(f.by_k).status(), absl::StatusCode::kNotFound));
  CHECK(IsError(f.db->DropIndex("t_k"), absl::StatusCode::kNotFound));
  // The other index and the table work; writes no longer touch the dropped index.
  {
    auto w = VALUE_OR_FAIL(f.db->Begin());
    REQUIRE_OK(w->Insert(f.t, {int64_t{5000}, int64_t{3}, std::string("n")}).status());
    REQUIRE(VALUE_OR_FAIL(w->Lookup(f.by_id, {int64_t{5000}})).has_value());
    REQUIRE_OK(w->Commit());
  }
  RequireValidNoOrphans(f.db.get(), "while an older snapshot is open");
  const uint32_t pages = PageCount(f.db.get());
  REQUIRE_OK(old->Commit());
  RequireValidNoOrphans(f.db.get(), "after the drop was reaped");
  // The same index again, under the same name: built from the table, in the freed pages.
  Index k = VALUE_OR_FAIL(f.db->CreateIndex({"t_k", "t", {"k"}, false}));
  // (A bulk build takes aligned runs of 8 pages and more; the dropped tree, built by inserts,
  // was scattered between data pages: the file may grow by a run.)
  CHECK(PageCount(f.db.get()) <= pages + 16);
  {
    auto r = VALUE_OR_FAIL(f.db->Begin());
    auto rows = VALUE_OR_FAIL(testing::IndexRange(r.get(), k, {int64_t{3}}, {int64_t{3}}));
    CHECK(rows.size() == 3000 / 11 + 1 + 1);  // i % 11 == 3 below 3000, and id 5000
  }
  f.Reopen();
  RequireValidNoOrphans(f.db.get(), "after reopen");
}

TEST_CASE("SetIndexActive: inactive drops the tree, active rebuilds it", "[ddl]") {
  TableDb f;
  {
    auto w = VALUE_OR_FAIL(f.db->Begin());
    for (int i = 0; i < 2000; ++i) {
      REQUIRE_OK(w->Insert(f.t, {int64_t{i}, int64_t{i % 13}, std::string("v")}).status());
    }
    REQUIRE_OK(w->Commit());
  }
  const uint32_t pages = PageCount(f.db.get());
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    REQUIRE_OK(f.db->SetIndexActive("t_id", false));
    REQUIRE_OK(f.db->SetIndexActive("t_id", false));  // already: nothing to do
    // Still in the catalog, not usable, not enforced.
    Index ix = VALUE_OR_FAIL(f.db->GetIndex("t_id"));
    auto w = VALUE_OR_FAIL(f.db->Begin());
    CHECK(IsError(w->Lookup(ix, {int64_t{1}}).status(), absl::StatusCode::kFailedPrecondition,
                  "inactive"));
    const int64_t extra = 10000 + round;
    REQUIRE_OK(w->Insert(f.t, {extra, int64_t{1}, std::string("x")}).status());
    REQUIRE_OK(w->Commit());
    RequireValidNoOrphans(f.db.get(), "inactive");
    f.Reopen();  // the catalog keeps it inactive (TableDb's Open finds it by name)
    CHECK(IsError(VALUE_OR_FAIL(f.db->Begin())->Lookup(f.by_id, {int64_t{1}}).status(),
                  absl::StatusCode::kFailedPrecondition));
    REQUIRE_OK(f.db->SetIndexActive("t_id", true));
    auto r = VALUE_OR_FAIL(f.db->Begin());
    REQUIRE(VALUE_OR_FAIL(r->Lookup(f.by_id, {extra})).has_value());
    REQUIRE(VALUE_OR_FAIL(r->Lookup(f.by_id, {int64_t{1999}})).has_value());
    REQUIRE_OK(r->Commit());
    IndexStats st = VALUE_OR_FAIL(f.db->GetIndexStats(f.by_id));
    CHECK(st.entries == 2000 + static_cast<uint64_t>(round) + 1);
    RequireValidNoOrphans(f.db.get(), "active again");
  }
  // Three rebuilds in the pages the deactivations freed.
  CHECK(PageCount(f.db.get()) <= pages + 16);
}

TEST_CASE("SetIndexActive(true) over duplicate keys fails and the index stays inactive", "[ddl]") {
  TableDb f;
  REQUIRE_OK(f.db->SetIndexActive("t_id", false));
  {
    auto w = VALUE_OR_FAIL(f.db->Begin());
    REQUIRE_OK(w->Insert(f.t, {int64_t{7}, int64_t{1}, std::string("a")}).status());
    REQUIRE_OK(w->Insert(f.t, {int64_t{7}, int64_t{2}, std::string("b")}).status());
    REQUIRE_OK(w->Commit());
  }
  CHECK(IsError(f.db->SetIndexActive("t_id", true), absl::StatusCode::kAlreadyExists, "t_id"));
  auto r = VALUE_OR_FAIL(f.db->Begin());
  CHECK(IsError(r->Lookup(f.by_id, {int64_t{7}}).status(), absl::StatusCode::kFailedPrecondition));
  REQUIRE_OK(r->Commit());
  RequireValidNoOrphans(f.db.get(), "after the failed activation");
  // Fix the data and try again.
  {
    auto w = VALUE_OR_FAIL(f.db->Begin());
    auto rows = VALUE_OR_FAIL(ScanAll(w.get(), f.t));
    REQUIRE(rows.size() == 2);
    REQUIRE_OK(w->Delete(f.t, rows[1].first));
    REQUIRE_OK(w->Commit());
  }
  REQUIRE_OK(f.db->SetIndexActive("t_id", true));
  auto r2 = VALUE_OR_FAIL(f.db->Begin());
  CHECK(VALUE_OR_FAIL(r2->Lookup(f.by_id, {int64_t{7}})).has_value());
  REQUIRE_OK(r2->Commit());
  RequireValidNoOrphans(f.db.get(), "after the activation");
  CHECK(IsError(f.db->SetIndexActive("nope", true), absl::StatusCode::kNotFound));
}

TEST_CASE("A crash after a drop, before its pages were freed, loses nothing", "[ddl]") {
  testing::TempDb tmp;
  Options o = CreateOptions(4096, 256);
  {
    auto db = OpenOrFail(tmp.path(), o);
    MakeTable(db.get(), "a", 1500);
    MakeTable(db.get(), "b", 500);
    auto old = VALUE_OR_FAIL(db->Begin());  // holds the dropped pages
    REQUIRE_OK(db->DropTable("a"));
    REQUIRE_OK(db->DropIndex("b_k"));
    REQUIRE_OK(db->SetIndexActive("b_id", false));
    static_cast<db::DatabaseImpl*>(db.get())->TEST_SimulateCrash();
    old.reset();
    db.reset();
  }
  auto db = OpenOrFail(tmp.path(), o);
  // The open after the crash freed what the drops left (Validate(free_unreachable)).
  CHECK(db->stats().opened_after_crash);
  CHECK(db->stats().pages_reclaimed_at_open > 0);
  CHECK(IsError(db->GetTable("a").status(), absl::StatusCode::kNotFound));
  CHECK(IsError(db->GetIndex("b_k").status(), absl::StatusCode::kNotFound));
  Table b = VALUE_OR_FAIL(db->GetTable("b"));
  Index b_id = VALUE_OR_FAIL(db->GetIndex("b_id"));
  auto r = VALUE_OR_FAIL(db->Begin());
  CHECK(VALUE_OR_FAIL(ScanAll(r.get(), b)).size() == 500);
  CHECK(IsError(r->Lookup(b_id, {int64_t{1}}).status(), absl::StatusCode::kFailedPrecondition));
  REQUIRE_OK(r->Commit());
  RequireValidNoOrphans(db.get(), "after the reopen");
  REQUIRE_OK(db->SetIndexActive("b_id", true));
  RequireValidNoOrphans(db.get(), "after reactivation");
}

TEST_CASE("Drops run beside readers and writers of other tables", "[ddl][concurrency]") {
  testing::TempDb tmp;
  Options o = CreateOptions(4096, 512);
  auto db = OpenOrFail(tmp.path(), o);
  Table keep = MakeTable(db.get(), "keep", 200);
  std::atomic<bool> stop{false};
  std::atomic<int> writes{0};
  testing::ErrorLog errors;
  auto check = [&](const absl::Status& s) {
    if (!s.ok()) errors.Add(s.ToString());
    return s.ok();
  };
  std::thread writer([&] {
    int64_t next = 1000;
    while (!stop.load()) {
      absl::StatusOr<std::unique_ptr<Transaction>> w = db->Begin();
      if (!check(w.status()) ||
          !check((*w)->Insert(keep, {next++, int64_t{1}, std::string("w")}).status()) ||
          !check((*w)->Commit())) {
        return;
      }
      writes.fetch_add(1);
    }
  });
  std::thread reader([&] {
    while (!stop.load()) {
      absl::StatusOr<std::unique_ptr<Transaction>> r = db->Begin();
      if (!check(r.status())) return;
      absl::StatusOr<std::vector<std::pair<RecordId, Row>>> rows = ScanAll(r->get(), keep);
      if (!check(rows.status())) return;
      if (rows->size() < 200) errors.Add("keep lost rows");
      if (!check((*r)->Commit())) return;
    }
  });
  for (int i = 0; i < 6; ++i) {
    const std::string name = absl::StrCat("d", i);
    MakeTable(db.get(), name, 300);
    Table t = VALUE_OR_FAIL(db->GetTable(name));
    // A reader of the doomed table on its own thread, racing the drop.
    std::thread doomed([&db, &errors, &check, t] {
      absl::StatusOr<std::unique_ptr<Transaction>> r = db->Begin();
      if (!check(r.status())) return;
      absl::StatusOr<std::vector<std::pair<RecordId, Row>>> rows = ScanAll(r->get(), t);
      if (rows.ok() ? rows->size() != 300 : !absl::IsNotFound(rows.status())) {
        errors.Add(absl::StrCat("doomed table: ", rows.status().ToString()));
      }
      check((*r)->Commit());
    });
    REQUIRE_OK(db->SetIndexActive(name + "_k", false));
    REQUIRE_OK(db->DropTable(name));
    doomed.join();
  }
  stop.store(true);
  writer.join();
  reader.join();
  RequireNoErrors(errors);
  CHECK(writes.load() > 0);
  RequireValidNoOrphans(db.get(), "after the drops");
  REQUIRE_OK(db->Close());
}

}  // namespace
}  // namespace ember
