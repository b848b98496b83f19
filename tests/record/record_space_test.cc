// Record placement under space pressure. Record headers are variable length (a small head takes
// 2-4 bytes), so a head can need more bytes when it is rewritten (a new back pointer, a longer
// transaction number, a fragment pointer) than it had. These tests fill pages with tiny rows,
// then grow, shrink, delete and roll back rows in many transactions, with old snapshots keeping
// back versions alive, and check that every write finds room, every row reads back as the model
// says, and Validate() stays clean.
#include <catch2/catch.hpp>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ember/ember.h"
#include "tests/support/db_util.h"

namespace ember {
namespace {

using testing::CreateOptions;
using testing::OpenOrFail;
using testing::RowText;
using testing::SameRow;
using testing::TempDb;

struct SpaceDb {
  TempDb tmp;
  std::unique_ptr<Database> db;
  Table t;

  SpaceDb() {
    db = OpenOrFail(tmp.path(), CreateOptions(4096, 32));
    t = VALUE_OR_FAIL(
        db->CreateTable({"s", {{"id", ColumnType::kInt64, false}, {"b", ColumnType::kBytes}}}));
  }
  ~SpaceDb() {
    if (db) (void)db->Close();
  }
  void Reopen() {
    REQUIRE_OK(db->Close());
    db.reset();
    Options o = CreateOptions(4096, 32);
    o.create_if_missing = false;
    db = OpenOrFail(tmp.path(), o);
    t = VALUE_OR_FAIL(db->GetTable("s"));
  }
  void CheckAll(const std::map<RecordId, Row>& model) {
    auto txn = VALUE_OR_FAIL(db->Begin());
    auto rows = VALUE_OR_FAIL(testing::ScanAll(txn.get(), t));
    REQUIRE(rows.size() == model.size());
    for (const auto& [rec, row] : rows) {
      auto it = model.find(rec);
      REQUIRE(it != model.end());
      INFO("record " << rec.value << ": " << RowText(row) << " vs " << RowText(it->second));
      REQUIRE(SameRow(row, it->second));
    }
    REQUIRE_OK(txn->Commit());
    ValidationReport rep = VALUE_OR_FAIL(db->Validate());
    INFO("errors: " << rep.errors.size() << (rep.errors.empty() ? "" : " first: " + rep.errors[0]));
    REQUIRE(rep.ok());
    REQUIRE(rep.unreachable_pages.empty());
  }
};

// A value of one of three sizes: NULL, a few bytes, or a few hundred (which makes the head grow
// past the room a page of tiny rows keeps).
Value RandomValue(std::mt19937_64& rng) {
  switch (rng() % 4) {
    case 0: return Value{};
    case 1: return std::string(rng() % 6, 'a');
    case 2: return std::string(rng() % 24, 'b');
    default: return std::string(100 + rng() % 500, static_cast<char>('c' + rng() % 20));
  }
}

TEST_CASE("record space: tiny rows on full pages grow, shrink and go back, every write placed",
          "[record][space]") {
  // Seed 33 once fragmented a delete stub into an empty fragment chain.
  const uint64_t seed = GENERATE(1, 2, 3, 33);
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  SpaceDb s;
  std::map<RecordId, Row> model;
  {
    auto txn = VALUE_OR_FAIL(s.db->Begin());
    for (int64_t id = 0; id < 1500; ++id) {
      Row row{Value{id}, Value{}};
      model[VALUE_OR_FAIL(txn->Insert(s.t, row))] = row;
    }
    REQUIRE_OK(txn->Commit());
  }
  int64_t next_id = 1500;
  std::unique_ptr<Transaction> old_snapshot;  // keeps back versions from being collected
  for (int step = 0; step < 2500; ++step) {
    if (step % 300 == 0) {
      if (old_snapshot) REQUIRE_OK(old_snapshot->Commit());
      old_snapshot = (rng() % 2) ? VALUE_OR_FAIL(s.db->Begin()) : nullptr;
    }
    auto txn = VALUE_OR_FAIL(s.db->Begin());
    std::map<RecordId, std::optional<Row>> changes;
    const int ops = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < ops; ++k) {
      auto it = model.lower_bound(RecordId{rng() % (model.rbegin()->first.value + 1)});
      if (it == model.end()) it = model.begin();
      const RecordId rec = it->first;
      if (changes.count(rec) && !changes[rec]) continue;  // deleted in this transaction
      const int what = static_cast<int>(rng() % 10);
      if (what < 7) {
        Row row{Value{std::get<int64_t>(it->second[0])}, RandomValue(rng)};
        REQUIRE_OK(txn->Update(s.t, rec, row));
        changes[rec] = row;
      } else if (what < 9) {
        REQUIRE_OK(txn->Delete(s.t, rec));
        changes[rec] = std::nullopt;
      } else {
        Row row{Value{next_id++}, RandomValue(rng)};
        changes[VALUE_OR_FAIL(txn->Insert(s.t, row))] = row;
      }
    }
    if (rng() % 6 == 0) {
      REQUIRE_OK(txn->Rollback());
      continue;
    }
    REQUIRE_OK(txn->Commit());
    for (auto& [rec, row] : changes) {
      if (row) model[rec] = *row;
      else model.erase(rec);
    }
    if (model.size() < 200) {  // keep the pages populated
      auto ins = VALUE_OR_FAIL(s.db->Begin());
      for (int k = 0; k < 300; ++k) {
        Row row{Value{next_id++}, Value{}};
        model[VALUE_OR_FAIL(ins->Insert(s.t, row))] = row;
      }
      REQUIRE_OK(ins->Commit());
    }
    if (step % 500 == 499) s.CheckAll(model);
  }
  if (old_snapshot) REQUIRE_OK(old_snapshot->Commit());
  s.CheckAll(model);
  s.Reopen();
  s.CheckAll(model);
}

}  // namespace
}  // namespace ember
