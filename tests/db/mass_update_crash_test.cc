// A crash in the middle of a mass update (issue 3): the transaction's pages partly reached disk
// through evictions (a tiny cache), then the process dies (or the machine loses power: unsynced
// writes vanish). After reopening, the state committed before the mass update must be intact:
// Validate() clean, every row and index entry as committed, and garbage collection must remove
// every version the dead transaction left behind.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "engine/db/db_state.h"
#include "engine/io/fault_file.h"
#include "tests/db/db_test_util.h"

namespace ember {
namespace {

constexpr int64_t kRows = 3000;

int64_t CommittedVal(int64_t id) { return id * 3; }

Options SmallCache() {
  Options o;
  o.page_size = 4096;
  o.cache_pages = 24;  // the mass update evicts (writes) its own pages long before it ends
  o.forced_writes = true;
  o.use_io_uring = false;
  return o;
}

void CreateTemplate(const std::string& path) {
  Options o = SmallCache();
  o.create_if_missing = true;
  std::unique_ptr<Database> db = VALUE_OR_FAIL(Database::Open(path, o));
  TableSchema ts{"TST", {{"ID", ColumnType::kInt64, false}, {"VAL", ColumnType::kInt64, false}}};
  Table t = VALUE_OR_FAIL(db->CreateTable(ts));
  REQUIRE_OK(db->CreateIndex({"TST_PK", "TST", {"ID"}, true}).status());
  REQUIRE_OK(db->CreateIndex({"TST_VAL", "TST", {"VAL"}, false}).status());
  std::unique_ptr<Transaction> tx = VALUE_OR_FAIL(db->Begin());
  for (int64_t id = 1; id <= kRows; ++id) {
    REQUIRE_OK(tx->Insert(t, Row{id, CommittedVal(id)}).status());
  }
  REQUIRE_OK(tx->Commit());
  REQUIRE_OK(db->Close());
}

// `update tst set val = val + delta`, stopping (and calling `crash`) after `stop_after` rows.
absl::Status UpdateAll(Transaction* tx, const Table& t, int64_t delta, int64_t stop_after,
                       const std::function<void()>& crash) {
  return tx->RunStatement([&]() -> absl::Status {
    absl::StatusOr<std::unique_ptr<Cursor>> c = tx->Scan(t);
    if (!c.ok()) return c.status();
    int64_t n = 0;
    for (; (*c)->Valid(); ++n) {
      if (n == stop_after) {
        crash();
        return absl::AbortedError("crashed");
      }
      const Row& r = (*c)->row();
      Row nr{r[0], std::get<int64_t>(r[1]) + delta};
      if (absl::Status s = tx->Update(t, (*c)->id(), nr); !s.ok()) return s;
      if (absl::Status s = (*c)->Next(); !s.ok()) return s;
    }
    return absl::OkStatus();
  });
}

void CheckCommittedState(Database* db) {
  ValidationReport rep = VALUE_OR_FAIL(db->Validate());
  INFO("first validation error: " << (rep.errors.empty() ? std::string() : rep.errors[0]));
  REQUIRE(rep.ok());
  Table t = VALUE_OR_FAIL(db->GetTable("TST"));
  Index by_val = VALUE_OR_FAIL(db->GetIndex("TST_VAL"));
  Index by_id = VALUE_OR_FAIL(db->GetIndex("TST_PK"));
  std::unique_ptr<Transaction> tx = VALUE_OR_FAIL(db->Begin());
  std::unique_ptr<Cursor> c = VALUE_OR_FAIL(tx->Scan(t));
  int64_t n = 0;
  for (; c->Valid(); ++n) {
    const int64_t id = std::get<int64_t>(c->row()[0]);
    REQUIRE(std::get<int64_t>(c->row()[1]) == CommittedVal(id));
    REQUIRE_OK(c->Next());
  }
  REQUIRE(n == kRows);
  // Every VAL reachable through its index, in order, each row once.
  std::unique_ptr<Cursor> ic = VALUE_OR_FAIL(tx->IndexScan(by_val, {}, {}));
  int64_t m = 0, prev = -1;
  for (; ic->Valid(); ++m) {
    const int64_t v = std::get<int64_t>(ic->row()[1]);
    REQUIRE(v > prev);
    prev = v;
    REQUIRE_OK(ic->Next());
  }
  REQUIRE(m == kRows);
  for (int64_t id : {int64_t{1}, kRows / 2, kRows}) {
    auto hit = VALUE_OR_FAIL(tx->Lookup(by_id, Row{id}));
    REQUIRE(hit.has_value());
    REQUIRE(std::get<int64_t>(hit->second[1]) == CommittedVal(id));
  }
  REQUIRE_OK(tx->Commit());
}

TEST_CASE("crash in the middle of a mass update keeps the committed state", "[savepoint][gc]") {
  const bool power_loss = GENERATE(false, true);
  const bool no_savepoint = GENERATE(false, true);
  CAPTURE(power_loss, no_savepoint);
  testing::TempDir dir;
  const std::string path = dir.File("mass.edb");
  CreateTemplate(path);

  io::FileOptions fo;
  fo.mode = io::OpenMode::kOpenExisting;
  fo.use_io_uring = false;
  auto owned = std::make_unique<io::FaultFile>(VALUE_OR_FAIL(io::OpenPosixFile(path, fo)));
  io::FaultFile* ff = owned.get();
  std::unique_ptr<db::DatabaseImpl> d =
      VALUE_OR_FAIL(db::DatabaseImpl::OpenFile(std::move(owned), SmallCache(), false));
  Table t = VALUE_OR_FAIL(d->GetTable("TST"));
  TransactionOptions to;
  to.no_savepoint = no_savepoint;
  std::unique_ptr<Transaction> tx = VALUE_OR_FAIL(d->Begin(to));
  const uint64_t writes_before = d->stats().pages.writes;
  REQUIRE_OK(UpdateAll(tx.get(), t, 1, -1, {}));
  REQUIRE_OK(UpdateAll(tx.get(), t, 1, -1, {}));
  // The small cache wrote some of the transaction's pages already.
  REQUIRE(d->stats().pages.writes > writes_before);
  bool crashed = false;
  absl::Status s = UpdateAll(tx.get(), t, 5, kRows / 2, [&] {
    d->SimulateCrash();
    crashed = true;
  });
  REQUIRE(crashed);
  REQUIRE_FALSE(s.ok());
  tx.reset();  // the database is "dead": nothing more reaches the file
  if (power_loss) REQUIRE_OK(ff->DropUnsynced());
  d.reset();

  Options o = SmallCache();
  std::unique_ptr<Database> db = VALUE_OR_FAIL(Database::Open(path, o));
  CheckCommittedState(db.get());
  // The dead transaction's versions are garbage: collecting them leaves nothing behind.
  REQUIRE_OK(db->CollectGarbage());
  TableStats ts = VALUE_OR_FAIL(db->GetTableStats(VALUE_OR_FAIL(db->GetTable("TST"))));
  CHECK(ts.dead_versions == 0);
  CHECK(ts.back_versions == 0);
  CHECK(ts.records == static_cast<uint64_t>(kRows));
  CheckCommittedState(db.get());
  REQUIRE_OK(db->Close());
  db = VALUE_OR_FAIL(Database::Open(path, o));
  CheckCommittedState(db.get());
  REQUIRE_OK(db->Close());
}

}  // namespace
}  // namespace ember
