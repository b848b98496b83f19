// A crash in the middle of a mass update: the transaction's pages partly reached disk
// through evictions (a tiny cache), then the process dies (or the machine loses power: unsynced
// writes vanish). After reopening, the state committed before the mass update must be intact:
// Validate() clean, every row and index entry as committed (nothing of the dead transaction
// visible), and garbage collection must remove every version the dead transaction left behind.
//
// The crash comes at many points, a few per run drawn from the printed seed (EMBER_CRASH_SEED
// replays one, EMBER_MASS_CRASH_ROUNDS sets how many per combination, default 3): after a random
// number of rows of one of the three update passes, or when the disk dies at a random write
// (every write from then on fails, the update meets the error, then the crash). Each round also
// draws its page size and write path (crash_util.h), and checks the writes took that path.
#include <catch2/catch.hpp>
#include <cerrno>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "engine/db/database_impl.h"
#include "tests/support/crash_util.h"
#include "tests/support/db_util.h"
#include "tests/support/fault_file.h"

namespace ember {
namespace {

// Rows of the table: 3000 at 4096-byte pages, more at larger pages, so that the transaction's
// pages outgrow the cache (and get written before the crash) at every page size.
int64_t RowsFor(uint32_t page_size) { return 3000 * int64_t{page_size / 4096}; }

int64_t CommittedVal(int64_t id) { return id * 3; }

Options SmallCache(uint32_t page_size, bool use_io_uring) {
  Options o;
  o.page_size = page_size;
  // The mass update evicts (writes) its own pages long before it ends (16: the smallest cache).
  o.cache_pages = page_size == 4096 ? 24 : 16;
  o.forced_writes = true;
  o.use_io_uring = use_io_uring;
  return o;
}

void CreateTemplate(const std::string& path, uint32_t page_size) {
  Options o = SmallCache(page_size, true);
  o.create_if_missing = true;
  std::unique_ptr<Database> db = VALUE_OR_FAIL(Database::Open(path, o));
  TableSchema ts{"TST", {{"ID", ColumnType::kInt64, false}, {"VAL", ColumnType::kInt64, false}}};
  Table t = VALUE_OR_FAIL(db->CreateTable(ts));
  REQUIRE_OK(db->CreateIndex({"TST_PK", "TST", {"ID"}, true}).status());
  REQUIRE_OK(db->CreateIndex({"TST_VAL", "TST", {"VAL"}, false}).status());
  std::unique_ptr<Transaction> tx = VALUE_OR_FAIL(db->Begin());
  for (int64_t id = 1; id <= RowsFor(page_size); ++id) {
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

void CheckCommittedState(Database* db, int64_t rows) {
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
  REQUIRE(n == rows);
  // Every VAL reachable through its index, in order, each row once.
  std::unique_ptr<Cursor> ic = VALUE_OR_FAIL(tx->IndexScan(by_val, {}, {}));
  int64_t m = 0, prev = -1;
  for (; ic->Valid(); ++m) {
    const int64_t v = std::get<int64_t>(ic->row()[1]);
    REQUIRE(v > prev);
    prev = v;
    REQUIRE_OK(ic->Next());
  }
  REQUIRE(m == rows);
  for (int64_t id : {int64_t{1}, rows / 2, rows}) {
    auto hit = VALUE_OR_FAIL(tx->Lookup(by_id, Row{id}));
    REQUIRE(hit.has_value());
    REQUIRE(std::get<int64_t>(hit->second[1]) == CommittedVal(id));
  }
  REQUIRE_OK(tx->Commit());
}

// Where a round crashes: after `row` rows of update pass `pass` (0..2), or, with `dead_disk_at`
// nonzero, when the update meets the failure of that write and every later one.
struct KillPoint {
  int pass = 2;
  int64_t row = 0;
  uint64_t dead_disk_at = 0;
};

KillPoint DrawKillPoint(std::mt19937_64& rng, int64_t rows) {
  KillPoint k;
  if (rng() % 3 == 0) {
    k.dead_disk_at = 1 + rng() % 400;
    return k;
  }
  k.pass = static_cast<int>(rng() % 3);
  k.row = static_cast<int64_t>(rng() % (rows + 1));  // rows: after the last row, before commit
  return k;
}

// One round: a copy of the template, three update passes of one transaction with a crash at
// `kill`, maybe a power loss, and the checks.
void MassUpdateCrashRound(const std::string& template_path, const std::string& path,
                          uint32_t page_size, bool use_io_uring, const KillPoint& kill,
                          bool power_loss, bool no_savepoint) {
  std::filesystem::copy_file(template_path, path,
                             std::filesystem::copy_options::overwrite_existing);
  io::FileOptions fo;
  fo.mode = io::OpenMode::kOpenExisting;
  fo.use_io_uring = use_io_uring;
  auto owned = std::make_unique<io::FaultFile>(VALUE_OR_FAIL(io::OpenPosixFile(path, fo)));
  io::FaultFile* ff = owned.get();
  const Options o = SmallCache(page_size, use_io_uring);
  std::unique_ptr<db::DatabaseImpl> d =
      VALUE_OR_FAIL(db::DatabaseImpl::OpenFile(std::move(owned), o, false));
  Table t = VALUE_OR_FAIL(d->GetTable("TST"));
  TransactionOptions to;
  to.no_savepoint = no_savepoint;
  std::unique_ptr<Transaction> tx = VALUE_OR_FAIL(d->Begin(to));
  const uint64_t writes_before = d->stats().pages.writes;
  if (kill.dead_disk_at != 0) ff->FailWriteAfter(kill.dead_disk_at, EIO, /*sticky=*/true);
  bool crashed = false;
  auto crash = [&] {
    d->TEST_SimulateCrash();
    crashed = true;
  };
  for (int pass = 0; pass < 3 && !crashed; ++pass) {
    const bool here = kill.dead_disk_at == 0 && pass == kill.pass;
    absl::Status s = UpdateAll(tx.get(), t, pass == 2 ? 5 : 1, here ? kill.row : -1, crash);
    if (kill.dead_disk_at != 0 && !s.ok()) {
      // The dead disk's error, or a transaction it doomed (a statement's undo met it too).
      INFO("the update met: " << s.ToString());
      REQUIRE((absl::IsInternal(s) || absl::IsFailedPrecondition(s)));
      crash();
    }
    REQUIRE(s.ok() != crashed);
  }
  if (!crashed) {  // the disk outlived the three passes: crash before the commit
    // The small cache wrote some of the transaction's pages already.
    REQUIRE(d->stats().pages.writes > writes_before);
    crash();
  }
  testing::RequireWritePath(use_io_uring, ff->write_path_counts(), false);
  tx.reset();  // the database is "dead": nothing more reaches the file
  ff->FailWriteAfter(0, 0);
  if (power_loss) REQUIRE_OK(ff->DropUnsynced());
  d.reset();

  std::unique_ptr<Database> db = VALUE_OR_FAIL(Database::Open(path, o));
  CheckCommittedState(db.get(), RowsFor(page_size));
  // The dead transaction's versions are garbage: collecting them leaves nothing behind.
  REQUIRE_OK(db->CollectGarbage());
  TableStats ts = VALUE_OR_FAIL(db->GetTableStats(VALUE_OR_FAIL(db->GetTable("TST"))));
  CHECK(ts.dead_versions == 0);
  CHECK(ts.back_versions == 0);
  CHECK(ts.records == static_cast<uint64_t>(RowsFor(page_size)));
  CheckCommittedState(db.get(), RowsFor(page_size));
  REQUIRE_OK(db->Close());
  db = VALUE_OR_FAIL(Database::Open(path, o));
  CheckCommittedState(db.get(), RowsFor(page_size));
  REQUIRE_OK(db->Close());
}

TEST_CASE("crash in the middle of a mass update keeps the committed state",
          "[exhaustive][savepoint][gc]") {
  const bool power_loss = GENERATE(false, true);
  const bool no_savepoint = GENERATE(false, true);
  const uint64_t seed =
      testing::AnnounceSeed("mass update", 0x3A55'0D7Eull) + power_loss * 2 + no_savepoint;
  const uint64_t rounds = testing::EnvU64("EMBER_MASS_CRASH_ROUNDS", 3);
  CAPTURE(power_loss, no_savepoint, seed);
  testing::TempDir dir;
  std::mt19937_64 rng(seed);
  std::map<uint32_t, std::string> templates;  // page size -> template database
  for (uint64_t round = 0; round < rounds; ++round) {
    Options drawn;
    testing::DrawPageSizeAndPath(rng, &drawn);
    const KillPoint kill = DrawKillPoint(rng, RowsFor(drawn.page_size));
    CAPTURE(round, drawn.page_size, drawn.use_io_uring, kill.pass, kill.row, kill.dead_disk_at);
    std::string& tmpl = templates[drawn.page_size];
    if (tmpl.empty()) {
      tmpl = dir.File("template-" + std::to_string(drawn.page_size) + ".edb");
      CreateTemplate(tmpl, drawn.page_size);
    }
    MassUpdateCrashRound(tmpl, dir.File("mass.edb"), drawn.page_size, drawn.use_io_uring, kill,
                         power_loss, no_savepoint);
  }
}

}  // namespace
}  // namespace ember
