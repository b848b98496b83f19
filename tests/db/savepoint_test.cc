// Savepoints, statements and the undo log through the public API: nested named savepoints with
// release and rollback-to (every row checked with Get, table scans, index lookups and index
// scans over a unique and a non-unique index after each step), rollback after thousands of
// repeated updates, RunStatement (failing, nested), the immediate undo of a single failing call,
// savepoint name reuse, unknown names, a full rollback leaving no versions and letting the OIT
// advance, no_savepoint (savepoints refused, doomed transactions, dead versions), undo log
// statistics and spilling, a reopen after rollbacks, and a rollback whose undo fails.
#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ember/ember.h"
#include "engine/cache/buffer_cache.h"
#include "engine/db/database_impl.h"
#include "engine/page/data_page.h"
#include "engine/page/doublewrite_page.h"
#include "tests/support/db_util.h"

namespace ember {
namespace {

using testing::IsError;
using testing::OpenOrFail;
using testing::RowText;
using testing::SameRow;
using testing::TempDb;

// The rows a transaction should see: record number -> (id, k, v).
using Model = std::map<uint64_t, Row>;

int64_t IdOf(const Row& r) { return std::get<int64_t>(r[0]); }
int64_t KOf(const Row& r) { return std::get<int64_t>(r[1]); }

Row MakeRow(int64_t id, int64_t k, std::string v) { return Row{id, k, std::move(v)}; }

// Table t(id int64 NOT NULL, k int64, v string) with a unique index on id and a non-unique one
// on k.
struct Fixture : testing::TableDb {
  // Every record number ever used and every id ever used, to check what must be absent.
  std::set<uint64_t> all_recs;
  std::set<int64_t> all_ids;

  explicit Fixture(Options o = testing::CreateOptions(4096, 128)) : TableDb(std::move(o)) {}

  std::unique_ptr<Transaction> Begin(TransactionOptions o = {}) {
    return VALUE_OR_FAIL(db->Begin(o));
  }

  // Inserts (id, id % 7, "c<id>") for ids 1..n in one committed transaction.
  Model Seed(int64_t n) {
    auto txn = Begin();
    Model m;
    for (int64_t id = 1; id <= n; ++id) {
      Row r = MakeRow(id, id % 7, "c" + std::to_string(id));
      RecordId rid = VALUE_OR_FAIL(txn->Insert(t, r));
      m[rid.value] = r;
      all_recs.insert(rid.value);
      all_ids.insert(id);
    }
    REQUIRE_OK(txn->Commit());
    return m;
  }

  // --- changes applied to the database and to a model at once
  void Ins(Transaction* txn, Model& m, int64_t id, int64_t k, const std::string& v) {
    Row r = MakeRow(id, k, v);
    RecordId rid = VALUE_OR_FAIL(txn->Insert(t, r));
    REQUIRE(m.count(rid.value) == 0);
    m[rid.value] = r;
    all_recs.insert(rid.value);
    all_ids.insert(id);
  }
  // Updates the record holding `id` (found in the model).
  void Upd(Transaction* txn, Model& m, int64_t id, int64_t new_id, int64_t k,
           const std::string& v) {
    const uint64_t rec = RecOf(m, id);
    Row r = MakeRow(new_id, k, v);
    REQUIRE_OK(txn->Update(t, RecordId{rec}, r));
    m[rec] = r;
    all_ids.insert(new_id);
  }
  void Del(Transaction* txn, Model& m, int64_t id) {
    const uint64_t rec = RecOf(m, id);
    REQUIRE_OK(txn->Delete(t, RecordId{rec}));
    m.erase(rec);
  }
  static uint64_t RecOf(const Model& m, int64_t id) {
    for (const auto& [rec, r] : m) {
      if (IdOf(r) == id) return rec;
    }
    FAIL("no row with id " << id << " in the model");
    return 0;
  }

  // Checks that `txn` sees exactly `m`: Get of every record ever used, a table scan, Lookup on
  // both indexes for every row and every id ever used, full index scans of both indexes, and
  // an index scan of every k value.
  void Verify(Transaction* txn, const Model& m, const std::string& step) {
    INFO("step: " << step);
    for (uint64_t rec : all_recs) {
      std::optional<Row> got = VALUE_OR_FAIL(txn->Get(t, RecordId{rec}));
      auto it = m.find(rec);
      if (it == m.end()) {
        INFO("record " << rec << " got " << (got ? RowText(*got) : "none"));
        REQUIRE_FALSE(got.has_value());
      } else {
        INFO("record " << rec << " want " << RowText(it->second));
        REQUIRE(got.has_value());
        INFO("got " << RowText(*got));
        REQUIRE(SameRow(*got, it->second));
      }
    }
    auto scan = VALUE_OR_FAIL(testing::ScanAll(txn, t));
    REQUIRE(scan.size() == m.size());
    {
      size_t i = 0;
      for (const auto& [rec, r] : m) {
        INFO("scan position " << i << " want record " << rec << " " << RowText(r) << " got "
                              << scan[i].first.value << " " << RowText(scan[i].second));
        REQUIRE(scan[i].first.value == rec);
        REQUIRE(SameRow(scan[i].second, r));
        ++i;
      }
    }
    // Unique index: every id ever used, present or not.
    std::map<int64_t, uint64_t> by_id_want;
    for (const auto& [rec, r] : m) by_id_want[IdOf(r)] = rec;
    for (int64_t id : all_ids) {
      auto hit = VALUE_OR_FAIL(txn->Lookup(by_id, {id}));
      auto it = by_id_want.find(id);
      INFO("lookup id " << id);
      if (it == by_id_want.end()) {
        INFO("found " << (hit ? RowText(hit->second) : ""));
        REQUIRE_FALSE(hit.has_value());
      } else {
        REQUIRE(hit.has_value());
        REQUIRE(hit->first.value == it->second);
        REQUIRE(SameRow(hit->second, m.at(it->second)));
      }
    }
    auto ids = VALUE_OR_FAIL(testing::IndexRange(txn, by_id, {}, {}));
    REQUIRE(ids.size() == by_id_want.size());
    {
      size_t i = 0;
      for (const auto& [id, rec] : by_id_want) {
        INFO("id scan position " << i);
        REQUIRE(ids[i].first.value == rec);
        REQUIRE(SameRow(ids[i].second, m.at(rec)));
        ++i;
      }
    }
    // Non-unique index: (k, record) order.
    std::vector<std::pair<int64_t, uint64_t>> by_k_want;
    std::set<int64_t> ks;
    for (const auto& [rec, r] : m) {
      by_k_want.emplace_back(KOf(r), rec);
      ks.insert(KOf(r));
    }
    std::sort(by_k_want.begin(), by_k_want.end());
    auto kscan = VALUE_OR_FAIL(testing::IndexRange(txn, by_k, {}, {}));
    REQUIRE(kscan.size() == by_k_want.size());
    for (size_t i = 0; i < kscan.size(); ++i) {
      INFO("k scan position " << i);
      REQUIRE(kscan[i].first.value == by_k_want[i].second);
      REQUIRE(KOf(kscan[i].second) == by_k_want[i].first);
    }
    for (int64_t k = -2; k <= 12; ++k) ks.insert(k);  // and some values with no rows
    for (int64_t k : ks) {
      auto got = VALUE_OR_FAIL(testing::IndexRange(txn, by_k, {k}, {k}));
      std::vector<uint64_t> want;
      for (const auto& [kk, rec] : by_k_want) {
        if (kk == k) want.push_back(rec);
      }
      INFO("k = " << k);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) REQUIRE(got[i].first.value == want[i]);
      auto one = VALUE_OR_FAIL(txn->Lookup(by_k, {k}));
      REQUIRE(one.has_value() == !want.empty());
      if (one) REQUIRE(one->first.value == want.front());
    }
  }

  // After everything is committed and collected, every record has one version: the indexes
  // must hold exactly one entry per row each, and Validate must be clean.
  void RequireCleanIndexes(size_t rows, const std::string& step) {
    INFO("step: " << step);
    REQUIRE_OK(db->CollectGarbage());
    ValidationReport rep = VALUE_OR_FAIL(db->Validate());
    for (const std::string& e : rep.errors) UNSCOPED_INFO(e);
    REQUIRE(rep.ok());
    CHECK(rep.index_entries == 2 * rows);
  }
};

TEST_CASE("savepoint: nested savepoints, release and rollback-to, rows checked everywhere",
          "[savepoint]") {
  Fixture f;
  Model base = f.Seed(30);
  auto txn = f.Begin();
  auto other = f.Begin();  // started before: sees only the seed throughout
  Model m = base;

  // Level 0 (transaction): value, key and id changes, a delete, inserts.
  for (int64_t id = 1; id <= 5; ++id)
    f.Upd(txn.get(), m, id, id, id % 7, "t0-" + std::to_string(id));
  for (int64_t id = 6; id <= 8; ++id) f.Upd(txn.get(), m, id, id, 100 + id, "k0");
  f.Del(txn.get(), m, 9);
  f.Ins(txn.get(), m, 101, 1, "n101");
  f.Ins(txn.get(), m, 102, 2, "n102");
  f.Ins(txn.get(), m, 103, 3, "n103");
  const Model m0 = m;
  f.Verify(txn.get(), m, "level 0");

  REQUIRE_OK(txn->Savepoint("A"));
  for (int64_t id = 1; id <= 3; ++id)
    f.Upd(txn.get(), m, id, id, id % 7, "A-" + std::to_string(id));
  f.Upd(txn.get(), m, 6, 6, 200, "A6");         // own version, key changed again
  f.Upd(txn.get(), m, 10, 110, 10 % 7, "A10");  // unique key changed
  f.Upd(txn.get(), m, 11, 11, 4, "A11");        // committed row, key changed
  f.Del(txn.get(), m, 101);                     // own insert deleted
  f.Del(txn.get(), m, 12);                      // committed row deleted
  f.Ins(txn.get(), m, 104, 4, "n104");
  f.Ins(txn.get(), m, 105, 5, "n105");
  const Model m1 = m;
  f.Verify(txn.get(), m, "after A");

  REQUIRE_OK(txn->Savepoint("B"));
  f.Upd(txn.get(), m, 1, 1, 1, "B1");
  f.Upd(txn.get(), m, 110, 10, 3, "B10");  // id back to its committed value
  f.Del(txn.get(), m, 2);
  f.Ins(txn.get(), m, 106, 6, "n106");
  f.Upd(txn.get(), m, 104, 104, 9, "B104");
  f.Ins(txn.get(), m, 9, 9, "id 9 again");     // the id deleted at level 0
  f.Ins(txn.get(), m, 12, 12, "id 12 again");  // the id deleted in A
  f.Upd(txn.get(), m, 13, 13, 5, "B13");
  const Model m2 = m;
  f.Verify(txn.get(), m, "after B");

  REQUIRE_OK(txn->Savepoint("C"));
  for (int64_t id = 14; id <= 20; ++id) f.Upd(txn.get(), m, id, id, (id * 3) % 11, "C");
  f.Del(txn.get(), m, 3);
  f.Del(txn.get(), m, 106);
  f.Ins(txn.get(), m, 107, 7, "n107");
  f.Upd(txn.get(), m, 9, 209, 2, "C9");
  f.Verify(txn.get(), m, "after C");

  REQUIRE_OK(txn->RollbackToSavepoint("C"));
  m = m2;
  f.Verify(txn.get(), m, "rolled back to C");

  // C is kept (empty): change again, roll back again, change again and release.
  f.Upd(txn.get(), m, 1, 1, 8, "C'1");
  f.Del(txn.get(), m, 104);
  REQUIRE_OK(txn->RollbackToSavepoint("C"));
  m = m2;
  f.Verify(txn.get(), m, "rolled back to C again");
  f.Upd(txn.get(), m, 1, 1, 8, "C''1");
  f.Ins(txn.get(), m, 108, 8, "n108");
  f.Del(txn.get(), m, 13);
  const Model m3 = m;
  REQUIRE_OK(txn->ReleaseSavepoint("C"));
  f.Verify(txn.get(), m, "released C");
  REQUIRE(IsError(txn->RollbackToSavepoint("C"), absl::StatusCode::kNotFound));
  REQUIRE(IsError(txn->ReleaseSavepoint("C"), absl::StatusCode::kNotFound));
  f.Verify(txn.get(), m3, "after NotFound");

  // Rolling back to B undoes B and the released C.
  REQUIRE_OK(txn->RollbackToSavepoint("B"));
  m = m1;
  f.Verify(txn.get(), m, "rolled back to B");

  // More in B, a savepoint D inside, then release B: B and D go, their changes stay.
  f.Upd(txn.get(), m, 4, 4, 6, "B'4");
  REQUIRE_OK(txn->Savepoint("D"));
  f.Upd(txn.get(), m, 4, 4, 7, "D4");
  f.Ins(txn.get(), m, 109, 9, "n109");
  f.Del(txn.get(), m, 105);
  const Model m4 = m;
  REQUIRE_OK(txn->ReleaseSavepoint("B"));
  f.Verify(txn.get(), m, "released B (and D)");
  REQUIRE(IsError(txn->RollbackToSavepoint("D"), absl::StatusCode::kNotFound));
  REQUIRE(IsError(txn->RollbackToSavepoint("B"), absl::StatusCode::kNotFound));
  f.Verify(txn.get(), m4, "after NotFound for B and D");

  // A still exists: rolling back to it undoes everything since, including released B and D.
  REQUIRE_OK(txn->RollbackToSavepoint("A"));
  m = m0;
  f.Verify(txn.get(), m, "rolled back to A");
  f.Verify(other.get(), base, "other transaction");

  REQUIRE_OK(txn->Commit());
  REQUIRE_OK(other->Commit());
  auto reader = f.Begin();
  f.Verify(reader.get(), m0, "committed");
  REQUIRE_OK(reader->Commit());
  f.RequireCleanIndexes(m0.size(), "after commit");
}

TEST_CASE("savepoint: rollback after thousands of updates of the same rows restores them",
          "[savepoint]") {
  const bool touched_before = GENERATE(false, true);
  INFO("rows changed before the savepoint: " << touched_before);
  Fixture f;
  Model m = f.Seed(200);
  auto txn = f.Begin();
  if (touched_before) {
    for (const auto& [rec, r] : Model(m)) {
      f.Upd(txn.get(), m, IdOf(r), IdOf(r), KOf(r) + 1, "before-" + std::to_string(IdOf(r)));
    }
  }
  const Model at_sp = m;
  REQUIRE_OK(txn->Savepoint("sp"));
  const uint64_t records_at_sp = txn->undo_stats().records;
  std::mt19937_64 rng(11);
  for (int round = 0; round < 25; ++round) {
    for (const auto& [rec, r] : at_sp) {
      const int64_t id = IdOf(r);
      // Keys change too (both indexes), ids within a disjoint range so they stay unique.
      const int64_t new_id = round % 2 ? id + 100000 : id;
      REQUIRE_OK(txn->Update(f.t, RecordId{rec},
                             MakeRow(new_id, static_cast<int64_t>(rng() % 13),
                                     std::string(rng() % 200, 'a' + round % 26))));
      f.all_ids.insert(new_id);
    }
  }
  // One entry per record per level, however often each changed.
  CHECK(txn->undo_stats().records == records_at_sp + at_sp.size());
  REQUIRE_OK(txn->RollbackToSavepoint("sp"));
  CHECK(txn->undo_stats().records == records_at_sp);
  f.Verify(txn.get(), at_sp, "rolled back after 5000 updates");
  REQUIRE_OK(txn->Commit());
  auto reader = f.Begin();
  f.Verify(reader.get(), at_sp, "committed");
  REQUIRE_OK(reader->Commit());
  f.RequireCleanIndexes(at_sp.size(), "after commit");
}

TEST_CASE("savepoint: a failing RunStatement undoes exactly its changes", "[savepoint]") {
  Fixture f;
  Model m = f.Seed(20);
  auto txn = f.Begin();
  f.Upd(txn.get(), m, 1, 1, 50, "before stmt");
  f.Ins(txn.get(), m, 100, 1, "n100");
  f.Del(txn.get(), m, 2);
  const Model before = m;

  SECTION("body returns an error") {
    Model scratch = m;
    absl::Status s = txn->RunStatement([&]() -> absl::Status {
      f.Upd(txn.get(), scratch, 1, 1, 51, "in stmt");  // own version again
      f.Upd(txn.get(), scratch, 3, 300, 52, "in stmt");
      f.Upd(txn.get(), scratch, 300, 301, 53, "twice in stmt");
      f.Ins(txn.get(), scratch, 101, 4, "n101");
      f.Del(txn.get(), scratch, 100);
      f.Del(txn.get(), scratch, 4);
      return absl::InvalidArgumentError("boom");
    });
    REQUIRE(IsError(s, absl::StatusCode::kInvalidArgument, "boom"));
    f.Verify(txn.get(), before, "after failed statement");
  }
  SECTION("a call inside fails and the body passes the error on") {
    Model scratch = m;
    absl::Status s = txn->RunStatement([&]() -> absl::Status {
      f.Upd(txn.get(), scratch, 5, 5, 60, "in stmt");
      f.Ins(txn.get(), scratch, 102, 6, "n102");
      // Duplicate id: fails.
      absl::StatusOr<RecordId> dup = txn->Insert(f.t, MakeRow(6, 0, "dup"));
      if (!dup.ok()) return dup.status();
      return absl::OkStatus();
    });
    REQUIRE(IsError(s, absl::StatusCode::kAlreadyExists));
    f.Verify(txn.get(), before, "after failed statement");
  }
  SECTION("a successful statement keeps its changes") {
    REQUIRE_OK(txn->RunStatement([&]() -> absl::Status {
      f.Upd(txn.get(), m, 1, 1, 51, "in stmt");
      f.Ins(txn.get(), m, 101, 4, "n101");
      f.Del(txn.get(), m, 7);
      return absl::OkStatus();
    }));
    f.Verify(txn.get(), m, "after statement");
  }
  SECTION("nested statements") {
    Model outer = m;
    REQUIRE_OK(txn->RunStatement([&]() -> absl::Status {
      f.Upd(txn.get(), outer, 8, 8, 70, "outer");
      Model inner = outer;
      absl::Status s = txn->RunStatement([&]() -> absl::Status {
        f.Upd(txn.get(), inner, 8, 8, 71, "inner");
        f.Upd(txn.get(), inner, 9, 9, 72, "inner");
        f.Ins(txn.get(), inner, 103, 0, "inner");
        return absl::AbortedError("inner fails");
      });
      if (!IsError(s, absl::StatusCode::kAborted, "inner fails")) {
        return absl::InternalError("inner statement returned " + s.ToString());
      }
      f.Verify(txn.get(), outer, "after failed inner");
      // A succeeding inner statement's changes belong to the outer one.
      Model inner2 = outer;
      absl::Status s2 = txn->RunStatement([&]() -> absl::Status {
        f.Upd(txn.get(), inner2, 10, 10, 73, "inner2");
        return absl::OkStatus();
      });
      if (!s2.ok()) return s2;
      outer = inner2;
      f.Upd(txn.get(), outer, 11, 11, 74, "outer after");
      return absl::OkStatus();
    }));
    m = outer;
    f.Verify(txn.get(), m, "after outer");

    // Now an outer statement that fails after a successful inner one: all of it goes.
    Model scratch = m;
    absl::Status s = txn->RunStatement([&]() -> absl::Status {
      f.Upd(txn.get(), scratch, 12, 12, 75, "outer2");
      absl::Status in = txn->RunStatement([&]() -> absl::Status {
        f.Upd(txn.get(), scratch, 13, 13, 76, "inner ok");
        f.Del(txn.get(), scratch, 14);
        return absl::OkStatus();
      });
      if (!in.ok()) return in;
      return absl::CancelledError("outer fails");
    });
    REQUIRE(IsError(s, absl::StatusCode::kCancelled));
    f.Verify(txn.get(), m, "after failed outer");
  }
  SECTION("a savepoint made inside a failing statement goes with it") {
    Model scratch = m;
    absl::Status s = txn->RunStatement([&]() -> absl::Status {
      f.Upd(txn.get(), scratch, 15, 15, 80, "stmt");
      if (absl::Status sp = txn->Savepoint("inside"); !sp.ok()) return sp;
      f.Upd(txn.get(), scratch, 16, 16, 81, "after inside");
      return absl::InternalError("fail with the savepoint open");
    });
    REQUIRE(IsError(s, absl::StatusCode::kInternal));
    f.Verify(txn.get(), before, "after failed statement");
    REQUIRE(IsError(txn->RollbackToSavepoint("inside"), absl::StatusCode::kNotFound));
  }
  SECTION("a statement inside a savepoint, then rollback to the savepoint") {
    REQUIRE_OK(txn->Savepoint("s"));
    Model in_sp = m;
    REQUIRE_OK(txn->RunStatement([&]() -> absl::Status {
      f.Upd(txn.get(), in_sp, 17, 17, 90, "stmt in s");
      f.Ins(txn.get(), in_sp, 104, 0, "n104");
      return absl::OkStatus();
    }));
    f.Verify(txn.get(), in_sp, "statement in savepoint");
    REQUIRE_OK(txn->RollbackToSavepoint("s"));
    f.Verify(txn.get(), before, "rolled back to s");
  }
  // The transaction goes on working and commits what it should.
  REQUIRE_OK(txn->Commit());
}

TEST_CASE("savepoint: a unique violation in a single call undoes just that call", "[savepoint]") {
  Fixture f;
  Model m = f.Seed(10);
  auto txn = f.Begin();
  f.Ins(txn.get(), m, 1000, 3, "n1000");
  f.Upd(txn.get(), m, 4, 4, 40, "own version");  // an own version to fail over
  const Model before = m;

  SECTION("Insert of a duplicate id") {
    REQUIRE(IsError(txn->Insert(f.t, MakeRow(5, 99, "dup")).status(),
                    absl::StatusCode::kAlreadyExists));
    REQUIRE(IsError(txn->Insert(f.t, MakeRow(1000, 98, "dup of own insert")).status(),
                    absl::StatusCode::kAlreadyExists));
  }
  SECTION("Update of a committed row to a duplicate id (and a new k)") {
    REQUIRE(IsError(txn->Update(f.t, RecordId{Fixture::RecOf(m, 2)}, MakeRow(3, 77, "x")),
                    absl::StatusCode::kAlreadyExists));
  }
  SECTION("Update of an own version to a duplicate id (and a new k)") {
    REQUIRE(IsError(txn->Update(f.t, RecordId{Fixture::RecOf(m, 4)}, MakeRow(1000, 78, "x")),
                    absl::StatusCode::kAlreadyExists));
  }
  SECTION("Update of an own insert to a duplicate id") {
    REQUIRE(IsError(txn->Update(f.t, RecordId{Fixture::RecOf(m, 1000)}, MakeRow(6, 79, "x")),
                    absl::StatusCode::kAlreadyExists));
  }
  SECTION("inside a savepoint, over rows changed in it") {
    REQUIRE_OK(txn->Savepoint("s"));
    Model in_s = m;
    f.Upd(txn.get(), in_s, 7, 7, 70, "in s");
    REQUIRE(IsError(txn->Update(f.t, RecordId{Fixture::RecOf(in_s, 7)}, MakeRow(8, 71, "x")),
                    absl::StatusCode::kAlreadyExists));
    REQUIRE(IsError(txn->Insert(f.t, MakeRow(7, 72, "dup")).status(),
                    absl::StatusCode::kAlreadyExists));
    f.Verify(txn.get(), in_s, "in savepoint after failures");
    REQUIRE_OK(txn->RollbackToSavepoint("s"));
  }
  SECTION("inside a statement whose body ignores the failure") {
    Model in_stmt = m;
    REQUIRE_OK(txn->RunStatement([&]() -> absl::Status {
      f.Upd(txn.get(), in_stmt, 9, 9, 90, "stmt");
      absl::Status s = txn->Update(f.t, RecordId{Fixture::RecOf(in_stmt, 9)}, MakeRow(10, 91, "x"));
      if (!absl::IsAlreadyExists(s))
        return absl::InternalError("expected a duplicate: " + s.ToString());
      return absl::OkStatus();
    }));
    f.Verify(txn.get(), in_stmt, "statement kept its good change");
    REQUIRE_OK(txn->Commit());
    auto r = f.Begin();
    f.Verify(r.get(), in_stmt, "committed");
    REQUIRE_OK(r->Commit());
    f.RequireCleanIndexes(in_stmt.size(), "after commit");
    return;
  }
  f.Verify(txn.get(), before, "after the failed call");
  // The transaction is still usable and its earlier changes commit.
  REQUIRE_OK(txn->Commit());
  auto r = f.Begin();
  f.Verify(r.get(), before, "committed");
  REQUIRE_OK(r->Commit());
  f.RequireCleanIndexes(before.size(), "after commit");
}

TEST_CASE("savepoint: reusing a name replaces the savepoint", "[savepoint]") {
  Fixture f;
  Model m = f.Seed(10);
  auto txn = f.Begin();
  REQUIRE_OK(txn->Savepoint("a"));
  f.Upd(txn.get(), m, 1, 1, 11, "first a");
  const Model after_first = m;
  REQUIRE_OK(txn->Savepoint("a"));
  f.Upd(txn.get(), m, 2, 2, 12, "second a");
  f.Ins(txn.get(), m, 50, 5, "n50");
  REQUIRE_OK(txn->RollbackToSavepoint("a"));  // to the newer one: the first change stays
  f.Verify(txn.get(), after_first, "rolled back to the newer a");
  m = after_first;
  f.Upd(txn.get(), m, 3, 3, 13, "in newer a again");
  REQUIRE_OK(txn->ReleaseSavepoint("a"));
  // The older one was released when the name was reused: nothing named a is left.
  REQUIRE(IsError(txn->RollbackToSavepoint("a"), absl::StatusCode::kNotFound));
  f.Verify(txn.get(), m, "after release");
  REQUIRE_OK(txn->Commit());
  auto r = f.Begin();
  f.Verify(r.get(), m, "committed");
  REQUIRE_OK(r->Commit());
}

TEST_CASE("savepoint: reusing a name makes the older one unnamed, later ones stay", "[savepoint]") {
  // transaction.h: creating a savepoint with an existing name makes the older one unnamed; the
  // savepoints made after it are untouched.
  Fixture f;
  Model m = f.Seed(5);
  auto txn = f.Begin();
  REQUIRE_OK(txn->Savepoint("a"));
  f.Upd(txn.get(), m, 1, 1, 11, "in a");
  REQUIRE_OK(txn->Savepoint("b"));
  f.Upd(txn.get(), m, 2, 2, 12, "in b");
  REQUIRE_OK(txn->Savepoint("a"));
  f.Upd(txn.get(), m, 3, 3, 13, "in new a");
  // b still exists: rolling back to it undoes "in b" and "in new a" (the new a goes with it).
  REQUIRE_OK(txn->RollbackToSavepoint("b"));
  CHECK(IsError(txn->RollbackToSavepoint("a"), absl::StatusCode::kNotFound));
  REQUIRE_OK(txn->ReleaseSavepoint("b"));
  CHECK(IsError(txn->ReleaseSavepoint("b"), absl::StatusCode::kNotFound));
  REQUIRE_OK(txn->Rollback());
}

TEST_CASE("savepoint: unknown names are NotFound and change nothing", "[savepoint]") {
  Fixture f;
  Model m = f.Seed(5);
  auto txn = f.Begin();
  f.Upd(txn.get(), m, 1, 1, 10, "changed");
  REQUIRE(IsError(txn->RollbackToSavepoint("nope"), absl::StatusCode::kNotFound, "nope"));
  REQUIRE(IsError(txn->ReleaseSavepoint("nope"), absl::StatusCode::kNotFound, "nope"));
  REQUIRE(IsError(txn->Savepoint(""), absl::StatusCode::kInvalidArgument));
  REQUIRE_OK(txn->Savepoint("x"));
  REQUIRE_OK(txn->ReleaseSavepoint("x"));
  REQUIRE(IsError(txn->ReleaseSavepoint("x"), absl::StatusCode::kNotFound));
  f.Verify(txn.get(), m, "after NotFound");
  REQUIRE_OK(txn->Commit());
  // On an ended transaction: FailedPrecondition.
  REQUIRE(IsError(txn->Savepoint("y"), absl::StatusCode::kFailedPrecondition));
  REQUIRE(IsError(txn->RollbackToSavepoint("x"), absl::StatusCode::kFailedPrecondition));
}

TEST_CASE("savepoint: a full rollback leaves no versions and lets the OIT advance", "[savepoint]") {
  Options o = testing::CreateOptions(4096, 128);
  o.gc_policy = GcPolicy::kCooperative;  // nothing collects behind the test's back
  Fixture f(o);
  Model base = f.Seed(300);
  const TableStats st0 = VALUE_OR_FAIL(f.db->GetTableStats(f.t));
  REQUIRE(st0.records == 300);
  REQUIRE(st0.back_versions == 0);

  auto txn = f.Begin();
  const uint64_t id = txn->id();
  Model m = base;
  for (int64_t i = 1; i <= 150; ++i) f.Upd(txn.get(), m, i, i, i % 5, std::string(300, 'u'));
  REQUIRE_OK(txn->Savepoint("s"));
  for (int64_t i = 1; i <= 50; ++i) f.Upd(txn.get(), m, i, i + 1000, 9, "again");
  for (int64_t i = 151; i <= 200; ++i) f.Del(txn.get(), m, i);
  REQUIRE_OK(txn->ReleaseSavepoint("s"));
  for (int64_t i = 0; i < 100; ++i) f.Ins(txn.get(), m, 5000 + i, i % 3, std::string(200, 'n'));
  const TableStats mid = VALUE_OR_FAIL(f.db->GetTableStats(f.t));
  REQUIRE(mid.back_versions > 0);
  REQUIRE(txn->undo_stats().records > 0);
  REQUIRE_OK(txn->Rollback());

  const TableStats st = VALUE_OR_FAIL(f.db->GetTableStats(f.t));
  CHECK(st.records == st0.records);
  CHECK(st.back_versions == 0);
  CHECK(st.back_version_bytes == 0);
  CHECK(st.delete_stubs == 0);
  CHECK(st.dead_versions == 0);
  // The rolled-back transaction counts as committed (with nothing in it): it is not interesting.
  const DatabaseStats ds = f.db->stats();
  CHECK(ds.oldest_interesting > id);

  auto r = f.Begin();
  f.Verify(r.get(), base, "after rollback");
  REQUIRE_OK(r->Commit());
  ValidationReport rep = VALUE_OR_FAIL(f.db->Validate());
  for (const std::string& e : rep.errors) UNSCOPED_INFO(e);
  REQUIRE(rep.ok());
  // Without any garbage collection: the undo removed every index entry it had added.
  CHECK(rep.index_entries == 2 * base.size());
}

TEST_CASE(
    "savepoint: no_savepoint refuses savepoints, dooms on a failed statement, "
    "rolls back dead",
    "[savepoint]") {
  const bool db_wide = GENERATE(false, true);
  INFO("no_savepoint set " << (db_wide ? "in Options" : "in TransactionOptions"));
  Options o = testing::CreateOptions(4096, 128);
  o.gc_policy = GcPolicy::kCooperative;
  o.no_savepoint = db_wide;
  Fixture f(o);
  Model base = f.Seed(20);
  TransactionOptions to;
  to.no_savepoint = !db_wide;
  auto txn = f.Begin(to);
  const uint64_t id = txn->id();
  REQUIRE(IsError(txn->Savepoint("s"), absl::StatusCode::kFailedPrecondition));
  REQUIRE(IsError(txn->ReleaseSavepoint("s"), absl::StatusCode::kFailedPrecondition));
  REQUIRE(IsError(txn->RollbackToSavepoint("s"), absl::StatusCode::kFailedPrecondition));
  CHECK(txn->undo_stats().records == 0);

  Model m = base;
  f.Upd(txn.get(), m, 1, 1, 30, "ns");
  f.Ins(txn.get(), m, 100, 1, "n100");
  // A single failing call is still undone at once and the transaction goes on.
  REQUIRE(IsError(txn->Update(f.t, RecordId{Fixture::RecOf(m, 2)}, MakeRow(3, 31, "dup")),
                  absl::StatusCode::kAlreadyExists));
  REQUIRE(
      IsError(txn->Insert(f.t, MakeRow(4, 32, "dup")).status(), absl::StatusCode::kAlreadyExists));
  f.Verify(txn.get(), m, "after failed single calls");
  // A failing statement that changed nothing does not doom.
  REQUIRE(IsError(txn->RunStatement([] { return absl::InvalidArgumentError("nothing done"); }),
                  absl::StatusCode::kInvalidArgument));
  f.Upd(txn.get(), m, 5, 5, 33, "still fine");
  f.Verify(txn.get(), m, "after failed empty statement");

  SECTION("a statement failing after changes dooms the transaction") {
    absl::Status s = txn->RunStatement([&]() -> absl::Status {
      REQUIRE_OK(txn->Update(f.t, RecordId{Fixture::RecOf(m, 6)}, MakeRow(6, 34, "doomed")));
      return absl::InvalidArgumentError("boom");
    });
    REQUIRE_FALSE(s.ok());
    CHECK(std::string(s.message()).find("boom") != std::string::npos);
    // Every later call fails; Commit too.
    CHECK(IsError(txn->Insert(f.t, MakeRow(200, 0, "x")).status(),
                  absl::StatusCode::kFailedPrecondition));
    CHECK(IsError(txn->Update(f.t, RecordId{Fixture::RecOf(m, 7)}, MakeRow(7, 0, "x")),
                  absl::StatusCode::kFailedPrecondition));
    CHECK(IsError(txn->Get(f.t, RecordId{Fixture::RecOf(m, 7)}).status(),
                  absl::StatusCode::kFailedPrecondition));
    CHECK(IsError(txn->RunStatement([] { return absl::OkStatus(); }),
                  absl::StatusCode::kFailedPrecondition));
    CHECK(IsError(txn->Commit(), absl::StatusCode::kFailedPrecondition));
    REQUIRE_OK(txn->Rollback());
  }
  SECTION("Rollback marks the transaction dead") { REQUIRE_OK(txn->Rollback()); }
  const TableStats st = VALUE_OR_FAIL(f.db->GetTableStats(f.t));
  CHECK(st.dead_versions > 0);  // left to garbage collection
  // Dead transactions stay interesting until their versions are gone.
  CHECK(f.db->stats().oldest_interesting <= id);
  ValidationReport rep = VALUE_OR_FAIL(f.db->Validate());
  for (const std::string& e : rep.errors) UNSCOPED_INFO(e);
  REQUIRE(rep.ok());
  // Dead: nothing of it is visible to others. (With the cooperative policy the scan inside
  // Verify also collects the dead versions it meets.)
  auto r = f.Begin();
  f.Verify(r.get(), base, "after the dead rollback");
  REQUIRE_OK(r->Commit());
}

TEST_CASE(
    "savepoint: undo_stats counts records and memory, spills past a tiny limit, "
    "rollback stays exact",
    "[savepoint]") {
  const bool tiny = GENERATE(false, true);
  INFO("undo_memory_limit tiny: " << tiny);
  Options o = testing::CreateOptions(4096, 256);
  o.gc_policy = GcPolicy::kCooperative;
  if (tiny) o.undo_memory_limit = 2048;
  Fixture f(o);
  Model base = f.Seed(300);
  auto txn = f.Begin();
  CHECK(txn->undo_stats().records == 0);
  Model m = base;
  // Level 0: one kRemoveHead entry each, no before-images. The versions written here (~1 KB
  // each) are what the savepoint's entries keep as before-images.
  for (int64_t i = 1; i <= 300; ++i) f.Upd(txn.get(), m, i, i, i % 7, std::string(1000, 'a'));
  UndoLogStats s0 = txn->undo_stats();
  CHECK(s0.records == 300);
  CHECK(s0.memory_bytes > 0);
  CHECK(s0.peak_memory_bytes >= s0.memory_bytes);
  const Model at_sp = m;
  REQUIRE_OK(txn->Savepoint("sp"));
  // In the savepoint: own versions overwritten, so each entry keeps a before-image (~1 KB),
  // once per record however often it changes.
  std::mt19937_64 rng(5);
  for (int round = 0; round < 3; ++round) {
    for (int64_t i = 1; i <= 300; ++i) {
      std::string v(900 + rng() % 300, '\0');
      for (char& c : v) c = static_cast<char>('a' + rng() % 26);
      f.Upd(txn.get(), m, i, i, (i + round) % 7, v);
    }
  }
  UndoLogStats s1 = txn->undo_stats();
  CHECK(s1.records == 600);
  CHECK(s1.peak_memory_bytes >= s1.memory_bytes);
  if (tiny) {
    CHECK(s1.spilled_bytes > 0);
    CHECK(s1.peak_spilled_bytes >= s1.spilled_bytes);
    CHECK(s1.memory_bytes < 300 * 1000);  // the images are not all in memory
  } else {
    CHECK(s1.spilled_bytes == 0);
    CHECK(s1.peak_spilled_bytes == 0);
    CHECK(s1.memory_bytes >= 300 * 1000);  // the before-images are in memory
  }
  REQUIRE_OK(txn->RollbackToSavepoint("sp"));
  f.Verify(txn.get(), at_sp, "rolled back to sp");
  UndoLogStats s2 = txn->undo_stats();
  CHECK(s2.records == 300);
  CHECK(s2.spilled_bytes == 0);
  CHECK(s2.peak_memory_bytes >= s1.memory_bytes);
  if (tiny) CHECK(s2.peak_spilled_bytes >= s1.spilled_bytes);
  REQUIRE_OK(txn->Rollback());
  auto r = f.Begin();
  f.Verify(r.get(), base, "after full rollback");
  REQUIRE_OK(r->Commit());
  const TableStats st = VALUE_OR_FAIL(f.db->GetTableStats(f.t));
  CHECK(st.back_versions == 0);
  CHECK(st.records == 300);
}

TEST_CASE("savepoint: rollback restores deleted own rows on pages filled up meanwhile",
          "[savepoint]") {
  // An own version deleted (a small stub now) and its room taken by later inserts of the same
  // transaction: the undo restores records in record-number order, so the big version goes back
  // while the page is still full of the inserts it will remove afterwards.
  Fixture f;
  std::mt19937_64 rng(21);
  auto big = [&](size_t n) {
    std::string v(n, '\0');
    for (char& c : v) c = static_cast<char>('a' + rng() % 26);
    return v;
  };
  Model m;
  {
    auto txn = f.Begin();
    for (int64_t id = 1; id <= 12; ++id) f.Ins(txn.get(), m, id, id % 3, big(900));
    REQUIRE_OK(txn->Commit());
  }
  auto txn = f.Begin();
  for (int64_t id = 1; id <= 12; ++id) f.Upd(txn.get(), m, id, id, id % 3, big(1000));
  const Model at_sp = m;
  REQUIRE_OK(txn->Savepoint("s"));
  for (int64_t id = 1; id <= 12; ++id) f.Del(txn.get(), m, id);
  for (int64_t id = 100; id < 160; ++id) f.Ins(txn.get(), m, id, 1, big(700));
  f.Verify(txn.get(), m, "deleted and refilled");
  REQUIRE_OK(txn->RollbackToSavepoint("s"));
  f.Verify(txn.get(), at_sp, "rolled back to s");
  REQUIRE_OK(txn->Commit());
  auto r = f.Begin();
  f.Verify(r.get(), at_sp, "committed");
  REQUIRE_OK(r->Commit());
  f.RequireCleanIndexes(at_sp.size(), "after commit");
}

TEST_CASE("savepoint: after rollbacks the database reopens valid with the data intact",
          "[savepoint]") {
  Fixture f;
  Model m = f.Seed(100);
  {
    auto txn = f.Begin();
    f.Upd(txn.get(), m, 1, 1, 10, "kept");
    f.Ins(txn.get(), m, 500, 5, "kept insert");
    const Model kept = m;
    REQUIRE_OK(txn->Savepoint("s"));
    for (int64_t i = 2; i <= 60; ++i)
      f.Upd(txn.get(), m, i, i + 1000, i % 4, std::string(500, 'x'));
    for (int64_t i = 61; i <= 80; ++i) f.Del(txn.get(), m, i);
    for (int64_t i = 0; i < 30; ++i) f.Ins(txn.get(), m, 600 + i, 1, "gone");
    REQUIRE_OK(txn->RollbackToSavepoint("s"));
    m = kept;
    REQUIRE_OK(txn->Commit());
  }
  {
    auto txn = f.Begin();
    Model scratch = m;
    for (int64_t i = 1; i <= 100; ++i) {
      f.Upd(txn.get(), scratch, i, i + 2000, 3, std::string(700, 'y'));
    }
    f.Del(txn.get(), scratch, 500);
    REQUIRE_OK(txn->Rollback());
  }
  f.Reopen();
  ValidationReport rep = VALUE_OR_FAIL(f.db->Validate());
  for (const std::string& e : rep.errors) UNSCOPED_INFO(e);
  REQUIRE(rep.ok());
  auto r = f.Begin();
  f.Verify(r.get(), m, "after reopen");
  REQUIRE_OK(r->Commit());
  f.RequireCleanIndexes(m.size(), "after reopen and collection");
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

TEST_CASE(
    "savepoint: a rollback whose undo meets a damaged page reports it, marks the "
    "transaction dead and leaves the committed rows visible",
    "[savepoint]") {
  Options o = testing::CreateOptions(4096, 16);  // the smallest cache: updated pages leave it
  o.gc_policy = GcPolicy::kCooperative;
  Fixture f(o);
  Model base;
  {
    auto txn = f.Begin();
    std::mt19937 rng(3);
    for (int64_t id = 1; id <= 600; ++id) {  // incompressible rows: 40 data pages or so
      std::string v(200, '\0');
      for (char& c : v) c = static_cast<char>('a' + rng() % 26);
      f.Ins(txn.get(), base, id, id, v);
    }
    REQUIRE_OK(txn->Commit());
  }
  auto txn = f.Begin();
  for (const auto& [rec, row] : base) {
    REQUIRE_OK(txn->Update(f.t, RecordId{rec}, MakeRow(IdOf(row), KOf(row) + 1000, "changed")));
  }
  // The table's first data page (sequence 0) went to disk long ago, holding our versions:
  // damage it there, as a bad sector would (once the doublewrite area's lazy home writes are
  // done: until then a page evicted is read back from its record's image, not from its home).
  REQUIRE_OK(static_cast<db::DatabaseImpl*>(f.db.get())->cache()->Checkpoint());
  const uint32_t ps = 4096;
  const std::string bytes = testing::ReadFileBytes(f.tmp.path());
  uint32_t victim = 0;
  for (uint32_t p = page::DoublewriteEnd(ps); (p + 1) * size_t{ps} <= bytes.size() && victim == 0;
       ++p) {
    const auto* d = reinterpret_cast<const uint8_t*>(bytes.data()) + size_t{p} * ps;
    if (page::GetType(d) == page::PageType::kData && page::DpRelation(d) == f.t.id() &&
        page::DpSequence(d) == 0) {
      victim = p;
    }
  }
  REQUIRE(victim != 0);
  {
    std::fstream file(f.tmp.path(), std::ios::in | std::ios::out | std::ios::binary);
    const size_t at = size_t{victim} * ps + ps / 2;
    file.seekp(static_cast<std::streamoff>(at));
    const char flipped = static_cast<char>(bytes[at] ^ 0x5A);
    file.write(&flipped, 1);
    REQUIRE(file.good());
  }
  const std::string page_name = "page " + std::to_string(victim);
  const absl::Status s = txn->Rollback();
  INFO("Rollback: " << s.ToString());
  CHECK(IsError(s, absl::StatusCode::kDataLoss, page_name));
  CHECK(IsError(s, absl::StatusCode::kDataLoss, "marked dead"));
  // The transaction has ended all the same.
  CHECK(absl::IsFailedPrecondition(txn->Rollback()));
  CHECK(absl::IsFailedPrecondition(txn->Commit()));
  // Its changes are invisible: every row off the damaged page reads as committed before it.
  auto r = f.Begin();
  size_t good = 0, lost = 0;
  for (const auto& [rec, row] : base) {
    absl::StatusOr<std::optional<Row>> got = r->Get(f.t, RecordId{rec});
    if (got.ok()) {
      REQUIRE(got->has_value());
      INFO("record " << rec << ": " << RowText(**got));
      REQUIRE(SameRow(**got, row));
      ++good;
    } else {
      REQUIRE(IsError(got.status(), absl::StatusCode::kDataLoss, page_name));
      ++lost;
    }
  }
  CHECK(good > 500);
  CHECK(lost > 0);
  // A lookup through the index on k finds no row of the dead transaction.
  for (int64_t id : {int64_t{300}, int64_t{600}}) {
    absl::StatusOr<std::vector<std::pair<RecordId, Row>>> hits =
        testing::IndexRange(r.get(), f.by_k, Row{id + 1000}, Row{id + 1000});
    REQUIRE_OK(hits.status());
    CHECK(hits->empty());
  }
  REQUIRE_OK(r->Commit());
}

TEST_CASE("savepoint: a transaction given an ended one's undo log sees nothing of it",
          "[savepoint]") {
  // The database hands the undo log of an ended transaction (its memory) to the next one.
  Fixture f;
  Model m = f.Seed(40);
  const bool commit_first = GENERATE(true, false);
  INFO((commit_first ? "first commits" : "first rolls back") << " with savepoints open");
  {
    auto first = f.Begin();
    Model mine = m;
    REQUIRE_OK(first->Savepoint("a"));
    for (int64_t id = 1; id <= 40; ++id) f.Upd(first.get(), mine, id, id, 100 + id, "first");
    REQUIRE_OK(first->Savepoint("b"));
    f.Ins(first.get(), mine, 500, 5, "first's row");
    if (commit_first) {
      REQUIRE_OK(first->Commit());
      m = mine;
    } else {
      REQUIRE_OK(first->Rollback());
    }
  }
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    auto txn = f.Begin();
    CHECK(txn->undo_stats().records == 0);
    CHECK(txn->undo_stats().spilled_bytes == 0);
    CHECK(IsError(txn->RollbackToSavepoint("a"), absl::StatusCode::kNotFound));
    CHECK(IsError(txn->ReleaseSavepoint("b"), absl::StatusCode::kNotFound));
    Model mine = m;
    REQUIRE_OK(txn->Savepoint("a"));
    for (int64_t id = 1; id <= 40; id += 2) f.Upd(txn.get(), mine, id, id, id % 7, "r");
    REQUIRE_OK(txn->RollbackToSavepoint("a"));
    f.Verify(txn.get(), m, "rolled back to a");
    for (int64_t id = 2; id <= 40; id += 2) f.Upd(txn.get(), mine, id, id, id % 5, "s");
    REQUIRE_OK(txn->Rollback());
    auto r = f.Begin();
    f.Verify(r.get(), m, "after the rollback");
    REQUIRE_OK(r->Commit());
  }
}

}  // namespace
}  // namespace ember
