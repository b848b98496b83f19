// Crashes during sweeps that run beside writers: a SIGKILL at random moments (the kernel keeps
// every completed write, in order), and a power loss at a random write with the unsynced writes
// kept or lost each on its own (ReorderFile). After each crash nothing committed is lost,
// nothing rolled back or unfinished shows, Validate is clean - which includes that no page, and
// no pointer-page slot, is flagged swept over a page holding something a sweep must see - and a
// sweep after the reopen finishes the job.
//
// The writers' rows are a function of a tag: transaction `tag` sets field = tag on the rows
// Touched(tag), so a model is the list of committed tags (a SIGKILL test logs each tag durably
// before its commit starts: the last logged one may or may not have committed).
//
// Environment (besides crash_util.h's): EMBER_SWEEP_CRASH_POWER_RUNS (power-loss rounds,
// default 16), EMBER_SWEEP_CRASH_KILLS (SIGKILL rounds, default 8).
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ember/ember.h"
#include "tests/support/big_table.h"
#include "tests/support/child_process.h"
#include "tests/support/crash_util.h"
#include "tests/support/db_util.h"

namespace ember {
namespace {

using testing::ChildLink;
using testing::OkOrDie;
using testing::ValueOrDie;

constexpr int64_t kRows = 2000;
constexpr int kTouched = 40;

Options SweepCrashOptions() {
  Options o = testing::CreateOptions(4096, 48);  // small: sweeps and commits evict and re-read
  o.gc_policy = GcPolicy::kCooperative;
  o.max_parallel_workers = 2;
  o.parallel_workers = 2;
  o.sweep_interval = 0;
  o.forced_writes = true;
  o.use_io_uring = false;
  return o;
}

std::vector<int64_t> Touched(uint64_t tag) {
  std::vector<int64_t> ids;
  for (int j = 0; j < kTouched; ++j) {
    ids.push_back(static_cast<int64_t>((tag * 7919 + static_cast<uint64_t>(j) * 131) % kRows));
  }
  return ids;
}

// Record ids by row id (rows are inserted in id order into a fresh table: the scan order).
std::vector<RecordId> RecordIds(Database* db, const Table& t) {
  auto r = db->Begin();
  if (!r.ok()) return {};
  std::vector<RecordId> out(kRows);
  auto rows = testing::ScanAll(r->get(), t);
  if (!rows.ok()) return {};
  for (const auto& [rid, row] : *rows) out[static_cast<size_t>(std::get<int64_t>(row[0]))] = rid;
  (void)(*r)->Commit();
  return out;
}

// A database at `path` with table big(id, field, s) of kRows rows (field = -1), indexes on id
// and field, a rolled-back update of every row (dead versions), and a first sweep that flagged
// the pages.
void MakeTemplate(const std::string& path) {
  auto opened = testing::OpenOrFail(path, SweepCrashOptions());
  Database* db = opened.get();
  Table t = testing::MakeBig(db);
  std::vector<RecordId> ids = testing::Fill(db, t, static_cast<int>(kRows), /*field=*/-1);
  TransactionOptions to;
  to.no_savepoint = true;
  auto w = VALUE_OR_FAIL(db->Begin(to));
  for (int64_t i = 0; i < kRows; ++i) {
    REQUIRE_OK(w->Update(t, ids[static_cast<size_t>(i)], {i, int64_t{-2}, std::string(100, 'd')}));
  }
  REQUIRE_OK(w->Rollback());
  SweepResult r = VALUE_OR_FAIL(db->Sweep());
  REQUIRE(r.pages_flagged > 0);
  REQUIRE_OK(db->Close());
}

// One writer transaction of the workload: field = tag on Touched(tag).
absl::Status WriteTag(Database* db, const Table& t, const std::vector<RecordId>& ids, uint64_t tag,
                      bool commit) {
  TransactionOptions to;
  to.no_savepoint = !commit;  // the rolled-back ones leave dead versions for the next sweep
  absl::StatusOr<std::unique_ptr<Transaction>> w = db->Begin(to);
  if (!w.ok()) return w.status();
  for (int64_t id : Touched(tag)) {
    absl::Status s = (*w)->Update(t, ids[static_cast<size_t>(id)],
                                  {id, static_cast<int64_t>(tag), std::string(100, 'w')});
    if (!s.ok()) return s;
  }
  return commit ? (*w)->Commit() : (*w)->Rollback();
}

// field by id as committed after the tags of `tags`, in order.
std::map<int64_t, int64_t> Expected(const std::vector<uint64_t>& tags) {
  std::map<int64_t, int64_t> out;
  for (int64_t i = 0; i < kRows; ++i) out[i] = -1;
  for (uint64_t tag : tags) {
    for (int64_t id : Touched(tag)) out[id] = static_cast<int64_t>(tag);
  }
  return out;
}

// The reopened database: Validate clean, rows as `sure` (the tags known committed) or `sure`
// plus `maybe` (in doubt), and a sweep and its successor leave it clean.
void CheckReopened(const std::string& path, const std::vector<uint64_t>& sure,
                   std::optional<uint64_t> maybe) {
  auto db = testing::OpenOrFail(path, SweepCrashOptions());
  testing::RequireValid(db.get(), "after the crash");
  Table t = VALUE_OR_FAIL(db->GetTable("big"));
  std::map<int64_t, int64_t> got;
  {
    auto r = VALUE_OR_FAIL(db->Begin());
    for (const auto& [rid, row] : VALUE_OR_FAIL(testing::ScanAll(r.get(), t))) {
      got[std::get<int64_t>(row[0])] = std::get<int64_t>(row[1]);
    }
    REQUIRE_OK(r->Commit());
  }
  const std::map<int64_t, int64_t> without = Expected(sure);
  bool ok = got == without;
  if (!ok && maybe) {
    std::vector<uint64_t> with = sure;
    with.push_back(*maybe);
    ok = got == Expected(with);
  }
  INFO(sure.size() << " transactions known committed" << (maybe ? ", one in doubt" : ""));
  REQUIRE(ok);
  SweepResult s1 = VALUE_OR_FAIL(db->Sweep());
  testing::RequireValid(db.get(), "after a sweep");
  SweepResult s2 = VALUE_OR_FAIL(db->Sweep());
  CHECK(s2.versions_removed == 0);
  CHECK(s2.pages_skipped >= s1.pages_flagged);
  CHECK(VALUE_OR_FAIL(db->GetTableStats(t)).dead_versions == 0);
  REQUIRE_OK(db->Close());
}

TEST_CASE(
    "sweep crash: power loss at a random write during sweeps beside writers (unsynced "
    "writes reordered)",
    "[crash][sweep]") {
  const uint64_t seed = testing::AnnounceSeed("sweep power loss", 0x5eed5);
  std::mt19937_64 rng(seed);
  testing::ScratchDir dir("ember-sweep-crash");
  REQUIRE(dir.ok());
  const std::string tmpl = dir.File("template.edb");
  MakeTemplate(tmpl);
  const uint64_t runs = testing::EnvU64("EMBER_SWEEP_CRASH_POWER_RUNS", 16);
  uint64_t cut = 0;
  for (uint64_t round = 0; round < runs; ++round) {
    const std::string path = dir.File("round.edb");
    std::filesystem::remove(path);
    std::filesystem::copy_file(tmpl, path);
    // The workload writes about 300-400 pages (the records' pages go home lazily, in batches).
    const uint64_t at = 1 + rng() % 300;
    INFO("round " << round << ": the power goes at write " << at);
    testing::PowerLossDb p =
        testing::OpenPowerLossDb(path, SweepCrashOptions(), testing::LossModel::kReorder,
                                 /*create=*/false);
    Database* db = p.db.get();
    Table t = VALUE_OR_FAIL(db->GetTable("big"));
    const std::vector<RecordId> ids = RecordIds(db, t);
    REQUIRE(ids.size() == static_cast<size_t>(kRows));
    p.reorder->CutPowerAtWrite(at);
    std::vector<uint64_t> sure;
    std::optional<uint64_t> maybe;
    for (uint64_t tag = 1; tag <= 12; ++tag) {
      const bool commit = tag % 3 != 0;
      absl::Status s = WriteTag(db, t, ids, tag, commit);
      if (!s.ok()) {
        if (commit) maybe = tag;
        break;
      }
      if (commit) sure.push_back(tag);
      if (tag % 2 == 0 && !db->Sweep().ok()) break;
    }
    if (p.reorder->powered_off()) ++cut;
    p.db->TEST_SimulateCrash();
    const uint64_t reverted = p.LosePower(rng);
    p.db.reset();
    if (testing::Verbosity() >= 2) {
      testing::Report("sweep power loss: round ", round, ", write ", at, ": ", sure.size(),
                      " committed, ", maybe ? "one in doubt, " : "", reverted,
                      " page versions reverted");
    }
    CheckReopened(path, sure, maybe);
  }
  INFO(cut << " of " << runs << " rounds lost power before the workload ended");
  CHECK(cut * 2 > runs);
  if (testing::Verbosity() >= 1) {
    testing::Report("[crash] sweep power loss: seed ", seed, ", ", runs, " runs, ", cut,
                    " cut in the middle");
  }
}

TEST_CASE("sweep crash: SIGKILL at random moments of sweeps beside writers",
          "[crash][fork][sweep]") {
  const uint64_t seed = testing::AnnounceSeed("sweep SIGKILL", 0x5eed6);
  std::mt19937_64 rng(seed);
  testing::ScratchDir dir("ember-sweep-kill");
  REQUIRE(dir.ok());
  const std::string path = dir.File("kill.edb");
  const std::string log = dir.File("tags.log");
  MakeTemplate(path);
  std::vector<uint64_t> sure;  // committed before this round's child started
  uint64_t next_tag = 1;
  const uint64_t kills = testing::EnvU64("EMBER_SWEEP_CRASH_KILLS", 8);
  for (uint64_t round = 0; round < kills; ++round) {
    const int delay_ms = 20 + static_cast<int>(rng() % 300);
    INFO("round " << round << ", kill after " << delay_ms << " ms");
    std::filesystem::remove(log);
    const uint64_t first_tag = next_tag;
    testing::ForkAndKill(
        [&](const ChildLink& link) {
          auto db = ValueOrDie(Database::Open(path, SweepCrashOptions()), "open");
          Table t = ValueOrDie(db->GetTable("big"), "table");
          const std::vector<RecordId> ids = RecordIds(db.get(), t);
          if (ids.size() != static_cast<size_t>(kRows)) testing::ChildDie("record ids");
          const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
          if (fd < 0) testing::ChildDie("side log");
          const char ready = 'R';
          ssize_t ignored = ::write(link.ready_fd, &ready, 1);
          (void)ignored;
          ::close(link.ready_fd);
          for (uint64_t tag = first_tag; tag < first_tag + 100000; ++tag) {
            if (::getppid() != link.parent) ::_exit(0);
            const bool commit = tag % 3 != 0;
            if (commit) testing::AppendDurablyOrDie(fd, std::to_string(tag) + "\n");
            OkOrDie(WriteTag(db.get(), t, ids, tag, commit), "write");
            if (tag % 2 == 0) OkOrDie(db->Sweep().status(), "sweep");
          }
          ::_exit(0);
        },
        delay_ms);
    std::vector<uint64_t> logged;
    {
      std::ifstream in(log);
      uint64_t tag;
      while (in >> tag) logged.push_back(tag);
    }
    std::optional<uint64_t> maybe;
    if (!logged.empty()) {
      maybe = logged.back();
      logged.pop_back();
    }
    sure.insert(sure.end(), logged.begin(), logged.end());
    if (testing::Verbosity() >= 2) {
      testing::Report("sweep SIGKILL: round ", round, ": ", sure.size(), " committed so far");
    }
    CheckReopened(path, sure, maybe);
    // Whether the tag in doubt committed: the rows say (CheckReopened accepted either).
    if (maybe) {
      auto db = testing::OpenOrFail(path, SweepCrashOptions());
      auto r = VALUE_OR_FAIL(db->Begin());
      Index by_field = VALUE_OR_FAIL(db->GetIndex("big_field"));
      if (VALUE_OR_FAIL(r->Lookup(by_field, {static_cast<int64_t>(*maybe)})).has_value()) {
        sure.push_back(*maybe);
      }
      REQUIRE_OK(r->Commit());
      REQUIRE_OK(db->Close());
    }
    next_tag = first_tag + 100000;  // no child gets that far
  }
  if (testing::Verbosity() >= 1) {
    testing::Report("[crash] sweep SIGKILL: seed ", seed, ", ", kills, " kills, ", sure.size(),
                    " transactions committed");
  }
}

}  // namespace
}  // namespace ember
