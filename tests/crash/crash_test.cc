// Crash-recovery tests of the durability model (architecture.md "Durability": careful write with
// precedence, force at commit, no WAL):
//  1. SIGKILL: a forked child runs random transactions and logs each commit to a side file; the
//     parent kills it at a random moment, reopens the database and checks that exactly the logged
//     commits (plus, or minus, the single one in flight) are there, over many kills of one file.
//  2. Power loss: in process, through io::FaultFile: DropUnsynced() after TEST_SimulateCrash()
//  leaves
//     what the last fsync made durable; the committed transactions must all be there, nothing
//     else. The same again through ReorderFile (reorder_file.h), where each unsynced page write
//     independently may or may not have reached the disk.
//  3. I/O errors: EIO / ENOSPC on the nth write, EIO on the nth fsync: the call that meets it
//     returns an error (never crashes); after a crash everything committed before is intact.
// After every crash: Validate() is clean (unreachable pages are allowed, then freed and the
// database validated again), the table scan matches the model exactly, and both indexes agree
// with the scan.
//
// Page size and write path: each power-loss run and I/O-error case draws its page size (4096,
// 8192 or 16384) and its write path (io_uring or pwrite) from the seed, and checks that the
// writes took that path. The SIGKILL test draws the write path per kill and its page size once:
// the kernel can cut a write of a page larger than 4 KiB at a page-cache boundary when SIGKILL
// arrives, which the doublewrite area repairs.
//
// Environment: EMBER_CRASH_SEED (a number, or "random"; default fixed, printed by every test),
// EMBER_CRASH_KILLS (SIGKILL rounds, default 50), EMBER_CRASH_MAX_DELAY_MS (longest kill delay,
// default 100), EMBER_CRASH_PAGE_SIZE (forces the SIGKILL test's page size),
// EMBER_CRASH_POWER_RUNS (seeds per power-loss test, default 50),
// EMBER_CRASH_DIR (where the databases go; default /dev/shm), EMBER_CRASH_KEEP=<dir> (copy a
// database that fails its checks there), EMBER_CRASH_VERBOSE=1 (a summary line per test; 2: one
// per SIGKILL round).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/db/database_impl.h"
#include "tests/crash/crash_model.h"
#include "tests/support/child_process.h"
#include "tests/support/crash_util.h"
#include "tests/support/fault_file.h"
#include "tests/support/reorder_file.h"
#include "tests/support/side_log.h"

namespace ember::testing {
namespace {

constexpr uint64_t kFixedSeed = 0xE3BE'2D1Bull;

// An EIO from the file, as io::ErrnoStatus reports it.
bool ExpectedIoError(const absl::Status& s) {
  return absl::IsInternal(s) || s.message().find(std::strerror(EIO)) != absl::string_view::npos;
}

// See RequireModel (crash_util.h).
Model RequireState(Database* db, const Handles& h, const std::vector<int64_t>& absent_ids,
                   const Model& want, const Model* alt, bool* matched_alt = nullptr) {
  auto read = [&](Transaction& t, Model* got, std::vector<std::string>* problems) {
    return ReadState(t, h, absent_ids, got, problems);
  };
  return RequireModel(db, read, want, alt, matched_alt);
}

// ---------------------------------------------------------------- 1. SIGKILL

constexpr int64_t kPreloadRows = 1500;
constexpr uint64_t kChildMaxTxns = 20000;

// The child: runs random transactions until killed. Before each Commit it logs "about to commit"
// with the transaction's effect, after a successful Commit "committed".
[[noreturn]] void RunChild(const ChildArgs& args, const ChildLink& link, Model model,
                           int64_t next_id, int64_t next_tag, uint64_t seed) {
  std::mt19937_64 rng(seed);
  WorkloadShape shape;
  shape.max_ops = 12;
  shape.target_rows = 2500;
  auto txn = [&](Database&, const Handles& h, Transaction* tx, int log_fd) {
    Model view = model;
    Effect eff;
    const int64_t tag = next_tag++;
    OkOrDie(RunRandomOps(tx, h, rng, shape, tag, &next_id, &view, &eff), "operation");
    if (rng() % 100 < 15) {
      OkOrDie(tx->Rollback(), "rollback");
      return;
    }
    AppendDurablyOrDie(log_fd, EncodePending(eff));
    OkOrDie(tx->Commit(), "commit");
    AppendDurablyOrDie(log_fd, EncodeCommitted(tag));
    model = std::move(view);
  };
  RunChildLoop(args, link, GetHandles, txn);
}

TEST_CASE("crash: SIGKILL at random moments loses no committed transaction", "[crash][fork]") {
  const uint64_t seed = AnnounceSeed("SIGKILL", kFixedSeed);
  const uint64_t kills = EnvU64("EMBER_CRASH_KILLS", 50);
  std::mt19937_64 rng(seed);
  const uint32_t drawn_page_size = kCrashPageSizes[rng() % std::size(kCrashPageSizes)];
  const uint32_t page_size =
      static_cast<uint32_t>(EnvU64("EMBER_CRASH_PAGE_SIZE", drawn_page_size));
  const uint64_t max_delay_ms = std::max<uint64_t>(3, EnvU64("EMBER_CRASH_MAX_DELAY_MS", 100));
  CAPTURE(seed, kills, page_size);
  ScratchDir dir("ember-crash");
  REQUIRE(dir.ok());
  const std::string db_path = dir.File("kill.edb");
  const std::string log_path = dir.File("commits.log");
  Model model;  // the verified contents after the previous round

  Options opts;
  opts.page_size = page_size;
  opts.forced_writes = true;
  {
    Options create = opts;
    create.create_if_missing = true;
    std::unique_ptr<Database> db = ValueOr(Database::Open(db_path, create), "create");
    const Handles h = ValueOr(CreateSchema(db.get()), "create schema");
    // Start from a table of some size, so that the kills meet multi-level B-trees, full data
    // pages and splits rather than a handful of rows.
    std::unique_ptr<Transaction> tx = ValueOr(db->Begin(), "Begin");
    std::mt19937_64 load_rng(seed ^ 0x10AD);
    for (int64_t id = 1; id <= kPreloadRows; ++id) {
      RowState st{0, 0, 0, RandomLen(load_rng)};
      st.rec = ValueOr(tx->Insert(h.table, MakeRow(id, st)), "preload insert").value;
      model[id] = st;
    }
    CRASH_REQUIRE_OK(tx->Commit());
    CRASH_REQUIRE_OK(db->Close());
  }

  uint64_t commits = 0, in_flight_seen = 0, in_flight_kept = 0, unreachable = 0, torn = 0;
  for (uint64_t round = 0; round < kills; ++round) {
    Options child_opts = opts;
    const uint32_t caches[] = {24, 64, 256, 2048};
    child_opts.cache_pages = caches[rng() % 4];
    child_opts.use_io_uring = rng() % 2 == 0;
    const int64_t base = static_cast<int64_t>(round + 1) * 1'000'000;
    const uint64_t child_seed = rng();
    const int delay_ms = 2 + static_cast<int>(rng() % (max_delay_ms - 1));
    // Usually the delay counts from when the child has the database open, so that a loaded
    // machine (slow open) still gets work done before the kill; one round in five counts from
    // the fork, so kills also land in the open itself (recovery marking dead transactions).
    const bool from_fork = rng() % 5 == 0;
    CAPTURE(round, child_seed, delay_ms, from_fork, child_opts.cache_pages,
            child_opts.use_io_uring);
    { std::ofstream truncate(log_path, std::ios::trunc); }
    const ChildArgs args{db_path, log_path, child_opts, kChildMaxTxns};
    ForkAndKill([&](const ChildLink& link) { RunChild(args, link, model, base, base, child_seed); },
                delay_ms, from_fork);

    const SideLog<Op> log = RequireSideLog<Op>(log_path);
    torn += log.torn_tail ? 1 : 0;
    Model want;
    std::optional<Model> alt;
    ExpectedStates(log, model, &want, &alt);
    std::set<int64_t> touched;
    for (const Effect& e : log.committed) {
      for (const Op& op : e.ops) touched.insert(op.id);
    }
    if (log.pending) {
      for (const Op& op : log.pending->ops) touched.insert(op.id);
    }
    std::vector<int64_t> absent(touched.begin(), touched.end());
    for (int64_t id = base; id < base + 64; ++id) absent.push_back(id);
    CAPTURE(log.committed.size(), log.pending.has_value());

    std::unique_ptr<Database> db = ValueOr(Database::Open(db_path, opts), "reopen after the kill");
    unreachable += RequireValidAfterCrash(db.get(), db_path);
    const Handles h = ValueOr(GetHandles(db.get()), "handles");
    bool kept = false;
    model = RequireState(db.get(), h, absent, want, alt ? &*alt : nullptr, &kept);
    CRASH_REQUIRE_OK(db->Close());
    if (Verbosity() > 1) {
      std::fprintf(
          stderr, "[crash] round %llu: delay %d ms, cache %u, %zu commits, %s\n",
          static_cast<unsigned long long>(round), delay_ms, child_opts.cache_pages,
          log.committed.size(),
          log.pending ? (kept ? "in flight: durable" : "in flight: lost") : "none in flight");
    }
    commits += log.committed.size();
    in_flight_seen += log.pending ? 1 : 0;
    in_flight_kept += kept ? 1 : 0;
  }
  // The workload must have done something for the test to mean anything.
  CHECK(commits > 0);
  if (Verbosity() > 0) {
    std::fprintf(stderr,
                 "[crash] SIGKILL: seed %llu, %llu kills, %llu commits, %llu in flight at the kill "
                 "(%llu of them durable), %llu unreachable pages freed, %llu torn log tails, %zu "
                 "rows at the end\n",
                 static_cast<unsigned long long>(seed), static_cast<unsigned long long>(kills),
                 static_cast<unsigned long long>(commits),
                 static_cast<unsigned long long>(in_flight_seen),
                 static_cast<unsigned long long>(in_flight_kept),
                 static_cast<unsigned long long>(unreachable),
                 static_cast<unsigned long long>(torn), model.size());
  }
}

// ---------------------------------------------------------------- 2. power loss

struct PowerLossStats {
  uint64_t commits = 0, rollbacks = 0, in_flight = 0, unreachable = 0, reverted = 0, torn = 0;
  uint64_t cuts = 0, cut_in_commit = 0, in_doubt_kept = 0;
};

// One seed: a fresh database, two rounds of (random transactions, maybe one left in flight,
// power loss, reopen and check). With reordering, half the rounds also cut the power at a random
// write, which usually lands inside a commit's flush: that commit fails with EIO and its outcome
// is unknown (all or nothing).
void PowerLossRun(uint64_t seed, LossModel loss, PowerLossStats* stats) {
  std::mt19937_64 rng(seed);
  ScratchDir dir("ember-crash");
  REQUIRE(dir.ok());
  const std::string path = dir.File("power.edb");
  Options opts;
  DrawPageSizeAndPath(rng, &opts);
  const uint32_t caches[] = {16, 24, 64, 2048};
  opts.cache_pages = caches[rng() % 4];
  opts.forced_writes = true;
  CAPTURE(opts.page_size, opts.use_io_uring, opts.cache_pages);
  WorkloadShape shape;
  shape.target_rows = 300;
  WorkloadShape big_shape = shape;  // the transaction left in flight
  big_shape.max_ops = 40;
  Model committed;
  int64_t next_id = 1, next_tag = 1;
  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    PowerLossDb d = OpenPowerLossDb(path, opts, loss, round == 0);
    const Handles h = round == 0 ? ValueOr(CreateSchema(d.db.get()), "create schema")
                                 : ValueOr(GetHandles(d.db.get()), "handles");
    // Creating the schema committed pages: they went the claimed way.
    RequireWritePath(opts.use_io_uring, d.file()->write_path_counts(), round == 0);
    const bool cut = d.reorder != nullptr && rng() % 2 == 0;
    if (cut) {
      d.reorder->CutPowerAtWrite(1 + rng() % 150);
      ++stats->cuts;
    }
    CAPTURE(cut);
    std::optional<Model> in_doubt;  // the state if the commit the power cut hit did commit
    bool dead = false;
    // Any error must be the power cut's.
    auto check = [&](const absl::Status& s, const char* what) {
      if (s.ok()) return true;
      INFO(what << ": " << s.ToString());
      REQUIRE(cut);
      REQUIRE(d.reorder->powered_off());
      REQUIRE(ExpectedIoError(s));
      dead = true;
      return false;
    };
    const int ntx = 1 + static_cast<int>(rng() % 30);
    for (int i = 0; i < ntx && !dead; ++i) {
      absl::StatusOr<std::unique_ptr<Transaction>> tx = d.db->Begin(TransactionOptions{});
      if (!check(tx.status(), "Begin")) break;
      Model view = committed;
      Effect eff;
      // A quarter of the transactions update a few rows again and again (savepoints in half).
      const uint32_t kind = rng() % 8;
      const absl::Status ops =
          kind < 2 ? RunRepeatedUpdates(tx->get(), h, rng, next_tag++, kind == 1, &view, &eff)
                   : RunRandomOps(tx->get(), h, rng, shape, next_tag++, &next_id, &view, &eff);
      if (!check(ops, "operation")) break;
      if (rng() % 100 < 20) {
        if (!check((*tx)->Rollback(), "Rollback")) break;
        ++stats->rollbacks;
      } else if (absl::Status s = (*tx)->Commit(); !check(s, "Commit")) {
        in_doubt = std::move(view);
        ++stats->cut_in_commit;
      } else {
        committed = std::move(view);
        ++stats->commits;
      }
    }
    // Maybe a transaction with changes that never commits (with a small cache some of its pages
    // have been evicted to disk by now).
    std::unique_ptr<Transaction> in_flight;
    if (!dead && rng() % 2) {
      in_flight = ValueOr(d.db->Begin(TransactionOptions{}), "Begin");
      Model view = committed;
      Effect eff;
      const absl::Status ops =
          rng() % 3 == 0
              ? RunRepeatedUpdates(in_flight.get(), h, rng, next_tag++, rng() % 2 == 0, &view, &eff)
              : RunRandomOps(in_flight.get(), h, rng, big_shape, next_tag++, &next_id, &view, &eff);
      if (check(ops, "operation")) {
        ++stats->in_flight;
      }
    }
    d.db->TEST_SimulateCrash();
    RequireWritePath(opts.use_io_uring, d.file()->write_path_counts(), round == 0);
    stats->reverted += d.LosePower(rng);
    if (d.reorder != nullptr) stats->torn += d.reorder->torn();
    in_flight.reset();  // a no-op rollback: the database is gone
    d.db.reset();

    std::unique_ptr<Database> db = ValueOr(Database::Open(path, opts), "reopen after power loss");
    stats->unreachable += RequireValidAfterCrash(db.get());
    const Handles h2 = ValueOr(GetHandles(db.get()), "handles after reopen");
    std::vector<int64_t> absent;
    for (int64_t id = std::max<int64_t>(1, next_id - 100); id < next_id + 5; ++id)
      absent.push_back(id);
    bool kept = false;
    committed =
        RequireState(db.get(), h2, absent, committed, in_doubt ? &*in_doubt : nullptr, &kept);
    stats->in_doubt_kept += kept ? 1 : 0;
    CRASH_REQUIRE_OK(db->Close());
  }
}

void PowerLossTest(LossModel loss, const char* name) {
  const uint64_t seed = AnnounceSeed(name, kFixedSeed);
  const uint64_t runs = EnvU64("EMBER_CRASH_POWER_RUNS", 50);
  PowerLossStats stats;
  for (uint64_t i = 0; i < runs; ++i) {
    const uint64_t run_seed = seed * 1000003 + i;
    CAPTURE(seed, i, run_seed);
    PowerLossRun(run_seed, loss, &stats);
  }
  CHECK(stats.commits > 0);
  if (Verbosity() > 0) {
    Report("[crash] ", name, ": seed ", seed, ", ", runs, " runs, ", stats.commits, " commits, ",
           stats.rollbacks, " rollbacks, ", stats.in_flight, " in flight, ", stats.unreachable,
           " unreachable pages freed, ", stats.reverted, " page versions lost (", stats.torn,
           " torn), ", stats.cuts, " power cuts (", stats.cut_in_commit, " in a commit, ",
           stats.in_doubt_kept, " of those durable)");
  }
}

TEST_CASE("crash: power loss (FaultFile::DropUnsynced) keeps exactly the committed transactions",
          "[exhaustive][crash]") {
  PowerLossTest(LossModel::kDropUnsynced, "power loss");
}

TEST_CASE("crash: power loss with unsynced page writes reordered keeps the committed transactions",
          "[exhaustive][crash]") {
  PowerLossTest(LossModel::kReorder, "power loss, reordered");
}

// ---------------------------------------------------------------- 3. I/O errors

enum class Fault { kWriteEio, kWriteEnospcSticky, kSyncEio, kReadEio, kShortWrite };

const char* FaultName(Fault f) {
  switch (f) {
    case Fault::kWriteEio: return "EIO on the nth write";
    case Fault::kWriteEnospcSticky: return "ENOSPC from the nth write on";
    case Fault::kSyncEio: return "EIO on the nth fsync";
    case Fault::kReadEio: return "EIO on the nth read";
    case Fault::kShortWrite: return "a short nth write";
  }
  return "?";
}

// The error a call returns when it meets the fault: the fault itself, or (savepoints) the
// transaction doomed by it: a statement that failed and whose undo met the fault as well (undo
// writes pages too) returns FailedPrecondition "transaction N is doomed ...: <the fault>".
bool ExpectedError(Fault f, const absl::Status& s) {
  if (f == Fault::kShortWrite) return false;  // the file finishes a short write itself
  if (absl::IsFailedPrecondition(s) && s.message().find(" is doomed ") != absl::string_view::npos) {
    const absl::string_view cause = s.message().substr(s.message().find(": ") + 2);
    return f == Fault::kWriteEnospcSticky
               ? absl::StartsWith(cause, "RESOURCE_EXHAUSTED")
               : cause.find(std::strerror(EIO)) != absl::string_view::npos;
  }
  if (f == Fault::kWriteEnospcSticky) return absl::IsResourceExhausted(s);
  return ExpectedIoError(s);
}

struct IoStats {
  uint64_t cases = 0, fired = 0, commit_failures = 0, other_failures = 0;
};

// One case: from a copy of the template database, a workload meets the fault; the failing call
// must return the expected error. With a transient fault the engine must then go on working.
// Then a crash (power loss through DropUnsynced) and a check of the committed state.
void IoErrorCase(Fault fault, uint64_t n, uint64_t seed, const std::string& template_path,
                 const Model& template_model, int64_t first_id, IoStats* stats) {
  std::mt19937_64 rng(seed);
  ScratchDir dir("ember-crash");
  REQUIRE(dir.ok());
  const std::string path = dir.File("io.edb");
  std::filesystem::copy_file(template_path, path);
  Options opts;
  opts.cache_pages = rng() % 2 ? 16 : 256;
  opts.forced_writes = true;
  opts.use_io_uring = rng() % 2 == 0;
  if (fault == Fault::kReadEio) opts.cache_pages = 16;  // reads all through the workload
  CAPTURE(opts.cache_pages, opts.use_io_uring);
  PowerLossDb opened = OpenPowerLossDb(path, opts, LossModel::kDropUnsynced, /*create=*/false);
  io::FaultFile* ff = opened.fault;
  std::unique_ptr<db::DatabaseImpl> d = std::move(opened.db);
  const Handles h = ValueOr(GetHandles(d.get()), "handles");
  switch (fault) {
    case Fault::kWriteEio: ff->FailWriteAfter(n, EIO); break;
    case Fault::kWriteEnospcSticky: ff->FailWriteAfter(n, ENOSPC, /*sticky=*/true); break;
    case Fault::kSyncEio: ff->FailSyncAfter(n, EIO); break;
    case Fault::kReadEio: ff->FailReadAfter(n, EIO); break;
    case Fault::kShortWrite: ff->ShortWriteAfter(n, 1000); break;
  }
  WorkloadShape shape;
  // Sometimes big transactions: with the small cache their pages get evicted (written) before
  // the commit, so the fault can also meet an Insert/Update/Delete.
  if (rng() % 3 == 0) shape.max_ops = 40;
  Model committed = template_model;
  int64_t next_id = first_id, next_tag = first_id;
  absl::Status failure;
  std::string failed_call;
  bool did_commit = false;
  // Runs one random transaction; returns false when a call failed (recorded in failure).
  auto one_txn = [&]() -> bool {
    did_commit = false;
    absl::StatusOr<std::unique_ptr<Transaction>> tx = d->Begin(TransactionOptions{});
    if (!tx.ok()) {
      failure = tx.status();
      failed_call = "Begin";
      return false;
    }
    Model view = committed;
    Effect eff;
    if (absl::Status s = RunRandomOps(tx->get(), h, rng, shape, next_tag++, &next_id, &view, &eff);
        !s.ok()) {
      failure = s;
      failed_call = "Insert/Update/Delete";
      return false;  // the destructor rolls the transaction back
    }
    if (rng() % 100 < 15) {
      if (absl::Status s = (*tx)->Rollback(); !s.ok()) {
        failure = s;
        failed_call = "Rollback";
        return false;
      }
      return true;
    }
    if (absl::Status s = (*tx)->Commit(); !s.ok()) {
      failure = s;
      failed_call = "Commit";
      // The commit failed: roll it back as an application would. Its changes must not appear.
      absl::Status rb = (*tx)->Rollback();
      INFO("Rollback after the failed commit: " << rb.ToString());
      CHECK((rb.ok() || ExpectedError(fault, rb)));
      return false;
    }
    committed = std::move(view);
    did_commit = true;
    return true;
  };
  for (int i = 0; i < 25 && failure.ok(); ++i) one_txn();
  ++stats->cases;
  if (fault == Fault::kShortWrite) {
    INFO("failed call: " << failed_call << ": " << failure.ToString());
    REQUIRE(failure.ok());  // no error: the write was finished
    if (ff->writes() >= n) ++stats->fired;
  }
  // A failed read may be met by the background collector rather than by a call, or retried;
  // a failed home write after its record's sync, or a collector's, fails no call (the record
  // holds the image), a collector's failed sync is a background error; the fault counts as met
  // when the nth read, write or sync happened.
  if (fault == Fault::kReadEio && failure.ok() && ff->reads() >= n) ++stats->fired;
  if (fault == Fault::kWriteEio && failure.ok() && ff->writes() >= n) ++stats->fired;
  if (fault == Fault::kSyncEio && failure.ok() && ff->syncs() >= n) ++stats->fired;
  if (!failure.ok()) {
    ++stats->fired;
    ++(failed_call == "Commit" ? stats->commit_failures : stats->other_failures);
    INFO("failed call: " << failed_call << ": " << failure.ToString());
    REQUIRE(ExpectedError(fault, failure));
    if (fault == Fault::kWriteEnospcSticky) {
      // The disk stays full: whatever is tried now fails cleanly with the same error, and no
      // transaction that writes can commit.
      failure = absl::OkStatus();
      failed_call.clear();
      one_txn();
      INFO("after the disk filled: " << failed_call << ": " << failure.ToString());
      CHECK((failure.ok() || ExpectedError(fault, failure)));
      CHECK_FALSE(did_commit);  // every random transaction writes
    } else {
      // A transient error: the engine goes on working.
      for (int i = 0; i < 5; ++i) {
        failure = absl::OkStatus();
        const bool ok = one_txn();
        INFO("transaction " << i << " after the transient error: " << failed_call << ": "
                            << failure.ToString());
        REQUIRE(ok);
      }
    }
  }
  // A full disk from the first write on may have let nothing through.
  RequireWritePath(opts.use_io_uring, ff->write_path_counts(),
                   !(fault == Fault::kWriteEnospcSticky && n == 1));
  if (fault == Fault::kWriteEnospcSticky && n % 2 == 1) {
    // Close on a full disk: an error, not a crash; nothing it could not write may count.
    absl::Status s = d->Close();
    INFO("Close on a full disk: " << s.ToString());
    CHECK((s.ok() || ExpectedError(fault, s)));
  } else {
    d->TEST_SimulateCrash();
  }
  CRASH_REQUIRE_OK(ff->DropUnsynced());
  d.reset();

  std::unique_ptr<Database> db = ValueOr(Database::Open(path, opts), "reopen after the I/O error");
  RequireValidAfterCrash(db.get());
  const Handles h2 = ValueOr(GetHandles(db.get()), "handles after reopen");
  std::vector<int64_t> absent;
  for (int64_t id = first_id; id < next_id + 2; ++id) absent.push_back(id);
  RequireState(db.get(), h2, absent, committed, nullptr);
  CRASH_REQUIRE_OK(db->Close());
}

TEST_CASE(
    "crash: a fault at the nth write or fsync or read (EIO or ENOSPC or a short write) "
    "fails the call cleanly and loses nothing committed",
    "[exhaustive][crash]") {
  const uint64_t seed = AnnounceSeed("I/O errors", kFixedSeed);
  CAPTURE(seed);
  ScratchDir dir("ember-crash");
  REQUIRE(dir.ok());
  // A template database with some committed rows, copied for every case.
  const std::string template_path = dir.File("template.edb");
  Model model;
  std::mt19937_64 rng(seed);
  int64_t next_id = 1, next_tag = 1;
  // The page size of every case (they copy the template); each case draws its write path.
  const uint32_t page_size = kCrashPageSizes[rng() % std::size(kCrashPageSizes)];
  CAPTURE(page_size);
  {
    Options create;
    create.create_if_missing = true;
    create.page_size = page_size;
    std::unique_ptr<Database> db = ValueOr(Database::Open(template_path, create), "create");
    const Handles h = ValueOr(CreateSchema(db.get()), "create schema");
    // Big enough (some hundred rows, many more pages than the small cache of the cases below)
    // that a transaction's work evicts pages.
    WorkloadShape shape;
    shape.max_ops = 16;
    for (int i = 0; i < 80; ++i) {
      std::unique_ptr<Transaction> tx = ValueOr(db->Begin(), "Begin");
      Model view = model;
      Effect eff;
      CRASH_REQUIRE_OK(RunRandomOps(tx.get(), h, rng, shape, next_tag++, &next_id, &view, &eff));
      CRASH_REQUIRE_OK(tx->Commit());
      model = std::move(view);
    }
    if (Verbosity() > 0) {
      std::fprintf(stderr, "[crash] I/O errors: template of %zu rows, %llu pages\n", model.size(),
                   static_cast<unsigned long long>(db->stats().page_count));
    }
    CRASH_REQUIRE_OK(db->Close());
  }
  const int64_t first_id = 1'000'000;
  // Every n from 1 up to a bound per kind; EMBER_CRASH_IO_MAX_N raises every bound (past the
  // workload's own count, a case meets no fault and counts as not fired).
  const Fault faults[] = {Fault::kWriteEio, Fault::kWriteEnospcSticky, Fault::kSyncEio,
                          Fault::kReadEio, Fault::kShortWrite};
  IoStats stats[std::size(faults)];
  const uint64_t max_n_env = EnvU64("EMBER_CRASH_IO_MAX_N", 0);
  uint64_t points = 0, met = 0;
  for (size_t fi = 0; fi < std::size(faults); ++fi) {
    const Fault fault = faults[fi];
    // A case reads some 15-30 pages with its 16-page cache (a flush writes a whole record's
    // worth of pages, so fewer are read back).
    const uint64_t max_n = max_n_env != 0 ? max_n_env
                           : fault == Fault::kWriteEio || fault == Fault::kWriteEnospcSticky ? 60
                           : fault == Fault::kReadEio                                        ? 20
                                                                                             : 30;
    for (uint64_t n = 1; n <= max_n; ++n) {
      const uint64_t case_seed = seed ^ (n * 0x9E3779B97F4A7C15ull) ^ (uint64_t{fi} << 56);
      CAPTURE(FaultName(fault), n, case_seed);
      IoErrorCase(fault, n, case_seed, template_path, model, first_id, &stats[fi]);
    }
    // Most n must actually have hit the workload (with the default bounds, which lie inside
    // every kind's count).
    if (max_n_env == 0) CHECK(stats[fi].fired * 2 > stats[fi].cases);
    points += stats[fi].cases;
    met += stats[fi].fired;
    if (Verbosity() > 0) {
      std::fprintf(stderr,
                   "[crash] %s: %llu cases, fault met in %llu (%llu in Commit, %llu elsewhere)\n",
                   FaultName(fault), static_cast<unsigned long long>(stats[fi].cases),
                   static_cast<unsigned long long>(stats[fi].fired),
                   static_cast<unsigned long long>(stats[fi].commit_failures),
                   static_cast<unsigned long long>(stats[fi].other_failures));
    }
  }
  if (Verbosity() > 0) {
    Report("[crash] I/O errors: ", points, " fault points tried, ", met,
           " met by the workload; after each a power loss, a reopen, Validate and the committed "
           "state checked");
  }
}

// The ids in table t, read in one transaction.
std::vector<int64_t> IdsIn(Database* db) {
  const Table t = ValueOr(db->GetTable("t"), "GetTable");
  std::unique_ptr<Transaction> tx = ValueOr(db->Begin(), "Begin");
  std::unique_ptr<Cursor> c = ValueOr(tx->Scan(t), "Scan");
  std::vector<int64_t> ids;
  while (c->Valid()) {
    ids.push_back(std::get<int64_t>(c->row()[0]));
    CRASH_REQUIRE_OK(c->Next());
  }
  CRASH_REQUIRE_OK(tx->Commit());
  std::sort(ids.begin(), ids.end());
  return ids;
}

// A commit whose TIP write was never known durable (the sync after it failed: with protection
// the one sync of its record, without it the TIP's) has its commit mark in the cached TIP page
// and maybe in the file: the next sync - another transaction's commit here, before the
// application has rolled the failed one back - must not make it committed.
TEST_CASE(
    "crash: a commit that failed at its last sync stays rolled back through later commits "
    "and a power loss",
    "[crash]") {
  ScratchDir dir("ember-crash");
  REQUIRE(dir.ok());
  std::mt19937_64 rng(1);
  for (const int mode : {0, 1, 2, 3}) {
    const bool sticky = mode & 1, protect = mode < 2;
    CAPTURE(sticky, protect);
    const std::string path = dir.File(absl::StrCat(sticky ? "sticky" : "once", mode, ".edb"));
    Options opts;
    opts.doublewrite = protect;
    opts.page_size = 4096;
    opts.forced_writes = true;
    opts.use_io_uring = false;
    opts.gc_policy = GcPolicy::kCooperative;  // no other thread syncs: the order is the test's
    PowerLossDb d = OpenPowerLossDb(path, opts, LossModel::kDropUnsynced, /*create=*/true);
    const Table t = ValueOr(d.db->CreateTable({"t", {{"id", ColumnType::kInt64, false}}}), "t");
    auto insert = [&](int64_t id) {
      std::unique_ptr<Transaction> tx = ValueOr(d.db->Begin(TransactionOptions{}), "Begin");
      CRASH_REQUIRE_OK(tx->Insert(t, Row{id}).status());
      return tx;
    };
    // How many syncs a one-row commit makes once the table has its pages: the last one makes
    // the TIP's commit bit durable (with protection it is the only one).
    CRASH_REQUIRE_OK(insert(1)->Commit());
    const uint64_t before = d.fault->syncs();
    CRASH_REQUIRE_OK(insert(7)->Commit());
    const uint64_t per_commit = d.fault->syncs() - before;
    REQUIRE((protect ? per_commit == 1 : per_commit >= 2));

    std::unique_ptr<Transaction> failed = insert(2);
    d.fault->FailSyncAfter(per_commit, EIO, sticky);
    const absl::Status c = failed->Commit();
    INFO("the failed commit: " << c.ToString());
    REQUIRE_FALSE(c.ok());
    // Once: the transaction is rolled back for good (its dead mark synced), and the database
    // goes on. Sticky: nothing can be made durable; the outcome is in doubt and the transaction
    // stays active, so nothing of it is backed out.
    REQUIRE(c.code() == (sticky ? absl::StatusCode::kUnknown : absl::StatusCode::kInternal));
    REQUIRE(IdsIn(d.db.get()) == std::vector<int64_t>{1, 7});
    const absl::Status later = insert(3)->Commit();
    INFO("the next commit: " << later.ToString());
    REQUIRE(later.ok() == !sticky);
    const absl::Status rb = failed->Rollback();
    REQUIRE((sticky ? rb.code() == absl::StatusCode::kUnknown : rb.ok()));
    d.db->TEST_SimulateCrash();
    d.LosePower(rng);
    failed.reset();
    d.db.reset();

    std::unique_ptr<Database> db = ValueOr(Database::Open(path, opts), "reopen");
    RequireValidAfterCrash(db.get());
    REQUIRE(IdsIn(db.get()) ==
            (sticky ? std::vector<int64_t>{1, 7} : std::vector<int64_t>{1, 3, 7}));
    CRASH_REQUIRE_OK(db->Close());
  }
}

}  // namespace
}  // namespace ember::testing
