// No error is dropped: the background collector's errors reach the user
// (DatabaseStats, the next CollectGarbage / Close) and the page it failed on is retried; a
// version that does not decode is DataLoss naming its page and line wherever it is read (index
// build, unique check, collection, Validate); Validate(free_unreachable) frees nothing when the
// walk found errors; cleanup that fails in a Commit that is durable anyway is reported, and the
// Commit still says the transaction is committed.
#include <catch2/catch.hpp>
#include <string>

#include "ember/ember.h"
#include "engine/cache/page_space.h"
#include "engine/db/database_impl.h"
#include "engine/db/garbage_collector.h"
#include "tests/support/damage_util.h"
#include "tests/support/db_util.h"

namespace ember {
namespace {

using testing::DamagedVersion;
using testing::DamageVersion;
using testing::IsError;
using testing::PlaceOf;
using testing::RepairVersion;
using testing::TableDb;

db::DatabaseImpl* Impl(Database* db) { return static_cast<db::DatabaseImpl*>(db); }

bool Mentions(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

Options BackgroundGc() {
  Options o = testing::CreateOptions(4096, 128);
  o.gc_policy = GcPolicy::kBackground;  // readers collect nothing: only the collector does
  return o;
}

RecordId InsertCommitted(Database* db, const Table& t, Row row) {
  auto tx = VALUE_OR_FAIL(db->Begin());
  RecordId id = VALUE_OR_FAIL(tx->Insert(t, row));
  REQUIRE_OK(tx->Commit());
  return id;
}

TEST_CASE(
    "errors: the background collector's error reaches stats, CollectGarbage and Close, "
    "and its page is retried",
    "[errors][gc]") {
  TableDb f(BackgroundGc());
  db::DatabaseImpl* impl = Impl(f.db.get());
  const RecordId id = InsertCommitted(f.db.get(), f.t, {int64_t{1}, int64_t{10}, std::string("a")});
  // A deleted record: the collector removes it and its index entries, for which it decodes
  // the version that goes - damaged before the delete commits, so the collector sees it.
  auto tx = VALUE_OR_FAIL(f.db->Begin());
  REQUIRE_OK(tx->Delete(f.t, id));
  const DamagedVersion d = DamageVersion(impl, f.t, id, /*depth=*/1);
  REQUIRE_OK(tx->Commit());

  absl::Status round = impl->gc()->RunOnce();  // a retry if the collector's thread was first
  INFO(round.ToString());
  CHECK(IsError(round, absl::StatusCode::kDataLoss, PlaceOf(d)));
  CHECK(IsError(round, absl::StatusCode::kDataLoss, "does not decode"));
  DatabaseStats st = f.db->stats();
  CHECK(st.background_errors >= 1);
  CHECK(Mentions(st.last_background_error, PlaceOf(d)));
  CHECK(st.gc_pages_queued >= 1);  // kept for a retry, not forgotten
  CHECK(st.gc_records_removed == 0);

  SECTION("the next CollectGarbage returns it, once") {
    RepairVersion(impl, d);
    absl::Status s = f.db->CollectGarbage();
    CHECK(IsError(s, absl::StatusCode::kDataLoss, PlaceOf(d)));
    REQUIRE_OK(f.db->CollectGarbage());
  }
  SECTION("the retry collects the page once the damage is gone") {
    RepairVersion(impl, d);
    REQUIRE_OK(impl->gc()->RunOnce());
    CHECK(f.db->stats().gc_pages_queued == 0);
    CHECK(f.db->stats().gc_records_removed == 1);
    auto rep = VALUE_OR_FAIL(f.db->Validate());
    CHECK(rep.ok());
  }
  SECTION("Close returns it, and closes cleanly all the same") {
    RepairVersion(impl, d);
    absl::Status s = f.db->Close();
    CHECK(IsError(s, absl::StatusCode::kDataLoss, PlaceOf(d)));
    f.db.reset();
    f.Open(false);
    CHECK_FALSE(f.db->stats().opened_after_crash);
    auto rep = VALUE_OR_FAIL(f.db->Validate());
    CHECK(rep.ok());
  }
}

TEST_CASE("errors: a version that does not decode is DataLoss naming its page and line",
          "[errors]") {
  TableDb f;
  db::DatabaseImpl* impl = Impl(f.db.get());
  const RecordId id = InsertCommitted(f.db.get(), f.t, {int64_t{7}, int64_t{70}, std::string("x")});
  InsertCommitted(f.db.get(), f.t, {int64_t{8}, int64_t{80}, std::string("y")});
  const DamagedVersion d = DamageVersion(impl, f.t, id);

  SECTION("Validate reports it") {
    auto rep = VALUE_OR_FAIL(f.db->Validate());
    REQUIRE_FALSE(rep.ok());
    bool named = false;
    for (const std::string& e : rep.errors) named |= Mentions(e, PlaceOf(d));
    INFO(rep.errors[0]);
    CHECK(named);
  }
  SECTION("an index build refuses the table") {
    absl::Status s = f.db->CreateIndex({"t_v", "t", {"v"}, false}).status();
    CHECK(IsError(s, absl::StatusCode::kDataLoss, PlaceOf(d)));
    CHECK(absl::IsNotFound(f.db->GetIndex("t_v").status()));
  }
  SECTION("a unique check that reaches it fails") {
    auto tx = VALUE_OR_FAIL(f.db->Begin());
    absl::Status s = tx->Insert(f.t, {int64_t{7}, int64_t{1}, std::string("dup")}).status();
    CHECK(IsError(s, absl::StatusCode::kDataLoss, PlaceOf(d)));
    // The refused insert was undone: the transaction goes on.
    REQUIRE_OK(tx->Insert(f.t, {int64_t{9}, int64_t{90}, std::string("z")}).status());
    REQUIRE_OK(tx->Commit());
  }
  SECTION("garbage collection of the record fails") {
    auto tx = VALUE_OR_FAIL(f.db->Begin());
    REQUIRE_OK(tx->Update(f.t, RecordId{id}, {int64_t{7}, int64_t{71}, std::string("x2")}));
    REQUIRE_OK(tx->Commit());
    // The damaged version is now the back version; the new one keeps the key of neither.
    absl::Status s = f.db->CollectGarbage();
    CHECK(IsError(s, absl::StatusCode::kDataLoss, "does not decode"));
  }
}

TEST_CASE("errors: Validate(free_unreachable) frees nothing when the walk found errors",
          "[errors]") {
  TableDb f;
  db::DatabaseImpl* impl = Impl(f.db.get());
  const RecordId id = InsertCommitted(f.db.get(), f.t, {int64_t{1}, int64_t{1}, std::string("a")});
  // A leaked page: allocated, referenced by nothing.
  page::PageNo leaked;
  {
    absl::StatusOr<cache::PageRef> p = impl->space()->Allocate(0);
    REQUIRE(p.ok());
    leaked = p->page_no();
    page::InitPage(p->data(), 4096, page::PageType::kBlob, leaked);
    p->Mark(0);
  }
  const DamagedVersion d = DamageVersion(impl, f.t, id);
  auto rep = VALUE_OR_FAIL(f.db->Validate({.free_unreachable = true}));
  CHECK_FALSE(rep.ok());
  CHECK(rep.freed_pages == 0);
  CHECK(std::find(rep.unreachable_pages.begin(), rep.unreachable_pages.end(), leaked) !=
        rep.unreachable_pages.end());
  RepairVersion(impl, d);
  auto fixed = VALUE_OR_FAIL(f.db->Validate({.free_unreachable = true}));
  INFO((fixed.errors.empty() ? std::string() : fixed.errors[0]));
  CHECK(fixed.ok());
  CHECK(fixed.freed_pages == 1);
}

// A table with a BLOB column and no index: a transaction that replaces its own row's BLOB
// drops the first one, which its Commit frees (FreeDroppedBlobs) after reading the record's
// chain.
TEST_CASE("errors: a Commit whose cleanup fails commits, returns OK and reports the cleanup",
          "[errors][blob]") {
  testing::TempDb tmp;
  auto db = testing::OpenOrFail(tmp.path(), testing::CreateOptions(4096, 128));
  Table t = VALUE_OR_FAIL(
      db->CreateTable({"b", {{"id", ColumnType::kInt64, false}, {"data", ColumnType::kBlob}}}));
  auto tx = VALUE_OR_FAIL(db->Begin());
  auto w1 = VALUE_OR_FAIL(tx->CreateBlob());
  REQUIRE_OK(w1->Write(std::string(10000, 'a')));
  const RecordId id = VALUE_OR_FAIL(tx->Insert(t, {int64_t{1}, w1->id()}));
  auto w2 = VALUE_OR_FAIL(tx->CreateBlob());
  REQUIRE_OK(w2->Write(std::string(10000, 'b')));
  REQUIRE_OK(tx->Update(t, id, {int64_t{2}, w2->id()}));
  const DamagedVersion d = DamageVersion(Impl(db.get()), t, id);
  REQUIRE(db->stats().background_errors == 0);
  const uint64_t commits = db->stats().commits;
  REQUIRE_OK(tx->Commit());  // committed: OK, whatever the cleanup did
  DatabaseStats st = db->stats();
  CHECK(st.commits == commits + 1);
  CHECK(st.background_errors == 1);
  CHECK(Mentions(st.last_background_error, "committed"));
  CHECK(Mentions(st.last_background_error, PlaceOf(d)));
  absl::Status s = db->CollectGarbage();
  CHECK(IsError(s, absl::StatusCode::kDataLoss, PlaceOf(d)));
  REQUIRE_OK(db->CollectGarbage());  // returned once
  RepairVersion(Impl(db.get()), d);
  auto later = VALUE_OR_FAIL(db->Begin());
  auto row = VALUE_OR_FAIL(later->Get(t, id));
  REQUIRE(row.has_value());
  CHECK(std::get<int64_t>((*row)[0]) == 2);  // the repaired bytes: the committed version
  REQUIRE_OK(later->Commit());
  // The BLOB the cleanup could not free is an orphan, which Validate frees.
  auto rep = VALUE_OR_FAIL(db->Validate({.free_unreachable = true}));
  CHECK(rep.ok());
  REQUIRE_OK(db->Close());
}

}  // namespace
}  // namespace ember
