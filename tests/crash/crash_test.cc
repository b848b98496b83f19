// Crash-recovery tests of the durability model (architecture.md "Durability": careful write with
// precedence, force at commit, no WAL):
//  1. SIGKILL: a forked child runs random transactions and logs each commit to a side file; the
//     parent kills it at a random moment, reopens the database and checks that exactly the logged
//     commits (plus, or minus, the single one in flight) are there, over many kills of one file.
//  2. Power loss: in process, through io::FaultFile: DropUnsynced() after SimulateCrash() leaves
//     what the last fsync made durable; the committed transactions must all be there, nothing
//     else. The same again through ReorderFile (reorder_file.h), where each unsynced page write
//     independently may or may not have reached the disk.
//  3. I/O errors: EIO / ENOSPC on the nth write, EIO on the nth fsync: the call that meets it
//     returns an error (never crashes); after a crash everything committed before is intact.
// After every crash: Validate() is clean (unreachable pages are allowed, then freed and the
// database validated again), the table scan matches the model exactly, and both indexes agree
// with the scan.
//
// Environment: EMBER_CRASH_SEED (a number, or "random"; default fixed), EMBER_CRASH_KILLS
// (SIGKILL rounds, default 50), EMBER_CRASH_MAX_DELAY_MS (longest kill delay, default 100),
// EMBER_CRASH_PAGE_SIZE (SIGKILL test page size, default 4096: the kernel can cut a pwrite() of a
// larger page at a 4 KiB page-cache boundary when SIGKILL arrives, and the engine has no
// torn-page protection, so with 8192 a rare kill shows up as a checksum DataLoss),
// EMBER_CRASH_POWER_RUNS (seeds per power-loss test, default 50),
// EMBER_CRASH_DIR (where the databases go; default /dev/shm), EMBER_CRASH_KEEP=<dir> (copy a
// database that fails its checks there), EMBER_CRASH_VERBOSE=1 (a summary line per test; 2: one
// per SIGKILL round).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "engine/db/db_state.h"
#include "engine/io/fault_file.h"
#include "tests/crash/crash_model.h"
#include "tests/crash/reorder_file.h"
#include "tests/io/temp_dir.h"

namespace ember::crashtest {
namespace {

using ember::testing::TempDir;

// A scratch directory on /dev/shm when there is one (EMBER_CRASH_DIR names another place, e.g.
// a real disk). The in-process tests simulate durability in the fault-injecting file, and a
// SIGKILL loses nothing the kernel already has (tmpfs or not), so a real disk only adds fsync
// latency: on a loaded 2-core machine that cuts the work done between kills tenfold. Falls back
// to TempDir's place.
class ScratchDir {
 public:
  ScratchDir() {
    const char* base = std::getenv("EMBER_CRASH_DIR");
    std::string tmpl = std::string(base && *base ? base : "/dev/shm") + "/ember-crash-XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  bool ok() const { return !path_.empty() || fallback_.ok(); }
  std::string File(const std::string& name) const {
    return path_.empty() ? fallback_.File(name) : path_ + "/" + name;
  }

 private:
  std::string path_;
  TempDir fallback_;
};

uint64_t EnvU64(const char* name, uint64_t def) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return def;
  return std::strtoull(v, nullptr, 0);
}

uint64_t BaseSeed() {
  const char* v = std::getenv("EMBER_CRASH_SEED");
  if (v == nullptr || *v == '\0') return 0xE3BE'2D1Bull;
  if (std::strcmp(v, "random") == 0) return (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  return std::strtoull(v, nullptr, 0);
}

bool Verbose() { return EnvU64("EMBER_CRASH_VERBOSE", 0) != 0; }

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += s + "\n";
  return out;
}

template <class T>
T ValueOr(absl::StatusOr<T> v, const char* what) {
  INFO(what << ": " << v.status().ToString());
  REQUIRE(v.ok());
  return std::move(*v);
}

#define CRASH_REQUIRE_OK(expr)                          \
  do {                                                  \
    const absl::Status crash_status_ = (expr);          \
    INFO(#expr << ": " << crash_status_.ToString());    \
    REQUIRE(crash_status_.ok());                        \
  } while (0)

// An EIO from the file, as io::ErrnoStatus reports it.
bool ExpectedIoError(const absl::Status& s) {
  return absl::IsInternal(s) || s.message().find(std::strerror(EIO)) != absl::string_view::npos;
}

// Validate must be clean. Unreachable pages (allocated, linked from nothing: what a crash may
// leave) are allowed; they are freed and the database validated again. Returns how many there were.
// With EMBER_CRASH_KEEP=<dir>, a database that fails its checks is copied there for post-mortem.
void KeepForPostMortem(const std::string& db_path) {
  const char* keep = std::getenv("EMBER_CRASH_KEEP");
  if (keep == nullptr || *keep == '\0' || db_path.empty()) return;
  std::error_code ec;
  const std::string to = std::string(keep) + "/failed-" + std::to_string(::getpid()) + ".edb";
  std::filesystem::copy_file(db_path, to, std::filesystem::copy_options::overwrite_existing, ec);
  std::fprintf(stderr, "[crash] kept the failing database as %s\n", to.c_str());
}

size_t RequireValid(Database* db, const std::string& db_path = "") {
  ValidationReport rep = ValueOr(db->Validate(ValidateOptions{}), "Validate");
  if (!rep.ok()) KeepForPostMortem(db_path);
  INFO("validation errors:\n" << Join(rep.errors));
  REQUIRE(rep.ok());
  if (rep.unreachable_pages.empty()) return 0;
  ValidationReport freed = ValueOr(db->Validate(ValidateOptions{true}), "Validate(free_unreachable)");
  INFO("errors while freeing:\n" << Join(freed.errors));
  REQUIRE(freed.ok());
  CHECK(freed.freed_pages == freed.unreachable_pages.size());
  ValidationReport again = ValueOr(db->Validate(ValidateOptions{}), "Validate after freeing");
  INFO("errors after freeing:\n" << Join(again.errors));
  REQUIRE(again.ok());
  CHECK(again.unreachable_pages.empty());
  return rep.unreachable_pages.size();
}

// Reads the database back and requires it to equal `want`, or `alt` when given (the in-flight
// transaction's outcome is unknown). Returns the state read and whether it matched `alt`.
Model RequireState(Database* db, const Handles& h, const std::vector<int64_t>& absent_ids,
                   const Model& want, const Model* alt, bool* matched_alt = nullptr) {
  Model got;
  std::vector<std::string> problems;
  CRASH_REQUIRE_OK(ReadState(db, h, absent_ids, &got, &problems));
  INFO("read-back problems:\n" << Join(problems));
  REQUIRE(problems.empty());
  const bool is_want = got == want;
  const bool is_alt = alt != nullptr && got == *alt;
  INFO("difference from the committed state:\n" << DescribeDiff(want, got));
  if (alt != nullptr) INFO("difference from the state with the in-flight transaction:\n" << DescribeDiff(*alt, got));
  REQUIRE((is_want || is_alt));
  if (matched_alt) *matched_alt = is_alt && !is_want;
  return got;
}

// ---------------------------------------------------------------- 1. SIGKILL

[[noreturn]] void ChildDie(int code, const std::string& msg) {
  const std::string m = "crash test child: " + msg + "\n";
  ssize_t ignored = ::write(2, m.data(), m.size());
  (void)ignored;
  ::_exit(code);
}

bool AppendDurably(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t w = ::write(fd, s.data() + done, s.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(w);
  }
  return ::fsync(fd) == 0;
}

constexpr int kChildFailed = 3;
constexpr int64_t kPreloadRows = 1500;
constexpr uint64_t kChildMaxTxns = 20000;  // a safety bound: the parent kills long before

// The child: opens the database, runs random transactions until killed. Before each Commit it
// logs "about to commit" with the transaction's effect, after a successful Commit "committed";
// both with write()+fsync() on an O_APPEND file. Any engine error ends it with kChildFailed.
[[noreturn]] void RunChild(const std::string& db_path, const std::string& log_path,
                           const Options& opts, Model model, int64_t next_id, int64_t next_tag,
                           uint64_t seed, pid_t parent, int ready_fd) {
  const int fd = ::open(log_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) ChildDie(kChildFailed, "cannot open the side log");
  std::mt19937_64 rng(seed);
  absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(db_path, opts);
  if (!db.ok()) ChildDie(kChildFailed, "open: " + db.status().ToString());
  absl::StatusOr<Handles> h = GetHandles(db->get());
  if (!h.ok()) ChildDie(kChildFailed, "handles: " + h.status().ToString());
  WorkloadShape shape;
  shape.max_ops = 12;
  shape.target_rows = 2500;
  // Tell the parent the database is open (its kill delay may count from here).
  const char ready = 'R';
  ssize_t ignored = ::write(ready_fd, &ready, 1);
  (void)ignored;
  ::close(ready_fd);
  for (uint64_t n = 0; n < kChildMaxTxns && ::getppid() == parent; ++n) {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = (*db)->Begin();
    if (!tx.ok()) ChildDie(kChildFailed, "begin: " + tx.status().ToString());
    Model view = model;
    Effect eff;
    const int64_t tag = next_tag++;
    if (absl::Status s = RunRandomOps(tx->get(), *h, rng, shape, tag, &next_id, &view, &eff);
        !s.ok()) {
      ChildDie(kChildFailed, "operation: " + s.ToString());
    }
    if (rng() % 100 < 15) {
      if (absl::Status s = (*tx)->Rollback(); !s.ok()) ChildDie(kChildFailed, "rollback: " + s.ToString());
      continue;
    }
    if (!AppendDurably(fd, EncodePending(eff))) ChildDie(kChildFailed, "side log write failed");
    if (absl::Status s = (*tx)->Commit(); !s.ok()) ChildDie(kChildFailed, "commit: " + s.ToString());
    if (!AppendDurably(fd, EncodeCommitted(tag))) ChildDie(kChildFailed, "side log write failed");
    model = std::move(view);
  }
  if (absl::Status s = (*db)->Close(); !s.ok()) ChildDie(kChildFailed, "close: " + s.ToString());
  ::_exit(0);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST_CASE("crash: SIGKILL at random moments loses no committed transaction", "[crash]") {
  const uint64_t seed = BaseSeed();
  const uint64_t kills = EnvU64("EMBER_CRASH_KILLS", 50);
  const uint32_t page_size = static_cast<uint32_t>(EnvU64("EMBER_CRASH_PAGE_SIZE", 4096));
  const uint64_t max_delay_ms = std::max<uint64_t>(3, EnvU64("EMBER_CRASH_MAX_DELAY_MS", 100));
  CAPTURE(seed, kills, page_size);
  ScratchDir dir;
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

  std::mt19937_64 rng(seed);
  uint64_t commits = 0, in_flight_seen = 0, in_flight_kept = 0, unreachable = 0, torn = 0;
  for (uint64_t round = 0; round < kills; ++round) {
    Options child_opts = opts;
    const uint32_t caches[] = {24, 64, 256, 2048};
    child_opts.cache_pages = caches[rng() % 4];
    const int64_t base = static_cast<int64_t>(round + 1) * 1'000'000;
    const uint64_t child_seed = rng();
    const int delay_ms = 2 + static_cast<int>(rng() % (max_delay_ms - 1));
    // Usually the delay counts from when the child has the database open, so that a loaded
    // machine (slow open) still gets work done before the kill; one round in five counts from
    // the fork, so kills also land in the open itself (recovery marking dead transactions).
    const bool from_fork = rng() % 5 == 0;
    CAPTURE(round, child_seed, delay_ms, from_fork, child_opts.cache_pages);
    {
      std::ofstream truncate(log_path, std::ios::trunc);
    }
    std::fflush(nullptr);
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(ready[0]);
      RunChild(db_path, log_path, child_opts, model, base, base, child_seed, parent, ready[1]);
    }
    ::close(ready[1]);
    if (!from_fork) {
      // Wait for "open" (or the child's end: EOF), at most 20 s.
      struct pollfd pfd = {ready[0], POLLIN, 0};
      (void)::poll(&pfd, 1, 20000);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    ::kill(pid, SIGKILL);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    ::close(ready[0]);  // only now: the child must not get SIGPIPE writing "open"
    if (WIFEXITED(status)) {
      INFO("the child stopped by itself with exit code " << WEXITSTATUS(status)
                                                         << " (its message is on stderr)");
      REQUIRE(WEXITSTATUS(status) == 0);
    } else {
      REQUIRE(WIFSIGNALED(status));
      REQUIRE(WTERMSIG(status) == SIGKILL);
    }

    ParsedLog log;
    std::string why;
    const std::string text = ReadFile(log_path);
    INFO("side log problem: " << why);
    REQUIRE(ParseLog(text, &log, &why));
    torn += log.torn_tail ? 1 : 0;
    Model want = model;
    std::set<int64_t> touched;
    for (const Effect& e : log.committed) {
      ApplyEffect(e, &want);
      for (const Op& op : e.ops) touched.insert(op.id);
    }
    std::optional<Model> alt;
    if (log.pending) {
      alt = want;
      ApplyEffect(*log.pending, &*alt);
      for (const Op& op : log.pending->ops) touched.insert(op.id);
    }
    std::vector<int64_t> absent(touched.begin(), touched.end());
    for (int64_t id = base; id < base + 64; ++id) absent.push_back(id);
    CAPTURE(log.committed.size(), log.pending.has_value());

    std::unique_ptr<Database> db = ValueOr(Database::Open(db_path, opts), "reopen after the kill");
    unreachable += RequireValid(db.get(), db_path);
    const Handles h = ValueOr(GetHandles(db.get()), "handles");
    bool kept = false;
    model = RequireState(db.get(), h, absent, want, alt ? &*alt : nullptr, &kept);
    CRASH_REQUIRE_OK(db->Close());
    if (Verbose() && EnvU64("EMBER_CRASH_VERBOSE", 0) > 1) {
      std::fprintf(stderr, "[crash] round %llu: delay %d ms, cache %u, %zu commits, %s\n",
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
  if (Verbose()) {
    std::fprintf(stderr,
                 "[crash] SIGKILL: seed %llu, %llu kills, %llu commits, %llu in flight at the kill "
                 "(%llu of them durable), %llu unreachable pages freed, %llu torn log tails, %zu "
                 "rows at the end\n",
                 static_cast<unsigned long long>(seed), static_cast<unsigned long long>(kills),
                 static_cast<unsigned long long>(commits),
                 static_cast<unsigned long long>(in_flight_seen),
                 static_cast<unsigned long long>(in_flight_kept),
                 static_cast<unsigned long long>(unreachable), static_cast<unsigned long long>(torn),
                 model.size());
  }
}

// ---------------------------------------------------------------- 2. power loss

enum class LossModel { kDropUnsynced, kReorder };

struct PowerLossStats {
  uint64_t commits = 0, rollbacks = 0, in_flight = 0, unreachable = 0, reverted = 0;
  uint64_t cuts = 0, cut_in_commit = 0, in_doubt_kept = 0;
};

// One seed: a fresh database, two rounds of (random transactions, maybe one left in flight,
// power loss, reopen and check). With reordering, half the rounds also cut the power at a random
// write, which usually lands inside a commit's flush: that commit fails with EIO and its outcome
// is unknown (all or nothing).
void PowerLossRun(uint64_t seed, LossModel loss, PowerLossStats* stats) {
  std::mt19937_64 rng(seed);
  ScratchDir dir;
  REQUIRE(dir.ok());
  const std::string path = dir.File("power.edb");
  Options opts;
  opts.page_size = rng() % 2 ? 4096 : 8192;
  const uint32_t caches[] = {16, 24, 64, 2048};
  opts.cache_pages = caches[rng() % 4];
  opts.forced_writes = true;
  opts.use_io_uring = false;
  CAPTURE(opts.page_size, opts.cache_pages);
  WorkloadShape shape;
  shape.target_rows = 300;
  WorkloadShape big_shape = shape;  // the transaction left in flight
  big_shape.max_ops = 40;
  Model committed;
  int64_t next_id = 1, next_tag = 1;
  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    io::FileOptions fo;
    fo.mode = round == 0 ? io::OpenMode::kCreateNew : io::OpenMode::kOpenExisting;
    fo.use_io_uring = false;
    // No real fdatasync below the fault-injecting file: it alone decides what is durable.
    std::unique_ptr<io::File> base =
        std::make_unique<NoSyncFile>(ValueOr(io::OpenPosixFile(path, fo), "open the file"));
    io::FaultFile* fault = nullptr;
    ReorderFile* reorder = nullptr;
    std::unique_ptr<io::File> file;
    if (loss == LossModel::kDropUnsynced) {
      auto f = std::make_unique<io::FaultFile>(std::move(base));
      fault = f.get();
      file = std::move(f);
    } else {
      auto f = std::make_unique<ReorderFile>(std::move(base));
      reorder = f.get();
      file = std::move(f);
    }
    std::unique_ptr<db::DatabaseImpl> d =
        ValueOr(db::DatabaseImpl::OpenFile(std::move(file), opts, round == 0), "OpenFile");
    const Handles h = round == 0 ? ValueOr(CreateSchema(d.get()), "create schema")
                                 : ValueOr(GetHandles(d.get()), "handles");
    const bool cut = reorder != nullptr && rng() % 2 == 0;
    if (cut) {
      reorder->CutPowerAtWrite(1 + rng() % 150);
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
      REQUIRE(reorder->powered_off());
      REQUIRE(ExpectedIoError(s));
      dead = true;
      return false;
    };
    const int ntx = 1 + static_cast<int>(rng() % 30);
    for (int i = 0; i < ntx && !dead; ++i) {
      absl::StatusOr<std::unique_ptr<Transaction>> tx = d->Begin(TransactionOptions{});
      if (!check(tx.status(), "Begin")) break;
      Model view = committed;
      Effect eff;
      if (!check(RunRandomOps(tx->get(), h, rng, shape, next_tag++, &next_id, &view, &eff),
                 "operation")) {
        break;
      }
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
      in_flight = ValueOr(d->Begin(TransactionOptions{}), "Begin");
      Model view = committed;
      Effect eff;
      if (check(RunRandomOps(in_flight.get(), h, rng, big_shape, next_tag++, &next_id, &view, &eff),
                "operation")) {
        ++stats->in_flight;
      }
    }
    d->SimulateCrash();
    if (fault != nullptr) {
      CRASH_REQUIRE_OK(fault->DropUnsynced());
    } else {
      stats->reverted += ValueOr(reorder->PowerLoss(rng), "PowerLoss");
    }
    in_flight.reset();  // a no-op rollback: the database is gone
    d.reset();

    std::unique_ptr<Database> db = ValueOr(Database::Open(path, opts), "reopen after power loss");
    stats->unreachable += RequireValid(db.get());
    const Handles h2 = ValueOr(GetHandles(db.get()), "handles after reopen");
    std::vector<int64_t> absent;
    for (int64_t id = std::max<int64_t>(1, next_id - 100); id < next_id + 5; ++id) absent.push_back(id);
    bool kept = false;
    committed = RequireState(db.get(), h2, absent, committed, in_doubt ? &*in_doubt : nullptr, &kept);
    stats->in_doubt_kept += kept ? 1 : 0;
    CRASH_REQUIRE_OK(db->Close());
  }
}

void PowerLossTest(LossModel loss, const char* name) {
  const uint64_t seed = BaseSeed();
  const uint64_t runs = EnvU64("EMBER_CRASH_POWER_RUNS", 50);
  PowerLossStats stats;
  for (uint64_t i = 0; i < runs; ++i) {
    const uint64_t run_seed = seed * 1000003 + i;
    CAPTURE(seed, i, run_seed);
    PowerLossRun(run_seed, loss, &stats);
  }
  CHECK(stats.commits > 0);
  if (Verbose()) {
    std::fprintf(stderr,
                 "[crash] %s: seed %llu, %llu runs, %llu commits, %llu rollbacks, %llu in flight, "
                 "%llu unreachable pages freed, %llu page versions lost, %llu power cuts (%llu in "
                 "a commit, %llu of those durable)\n",
                 name, static_cast<unsigned long long>(seed), static_cast<unsigned long long>(runs),
                 static_cast<unsigned long long>(stats.commits),
                 static_cast<unsigned long long>(stats.rollbacks),
                 static_cast<unsigned long long>(stats.in_flight),
                 static_cast<unsigned long long>(stats.unreachable),
                 static_cast<unsigned long long>(stats.reverted),
                 static_cast<unsigned long long>(stats.cuts),
                 static_cast<unsigned long long>(stats.cut_in_commit),
                 static_cast<unsigned long long>(stats.in_doubt_kept));
  }
}

TEST_CASE("crash: power loss (FaultFile::DropUnsynced) keeps exactly the committed transactions",
          "[crash]") {
  PowerLossTest(LossModel::kDropUnsynced, "power loss");
}

TEST_CASE("crash: power loss with unsynced page writes reordered keeps the committed transactions",
          "[crash]") {
  PowerLossTest(LossModel::kReorder, "power loss, reordered");
}

// ---------------------------------------------------------------- 3. I/O errors

enum class Fault { kWriteEio, kWriteEnospcSticky, kSyncEio };

const char* FaultName(Fault f) {
  switch (f) {
    case Fault::kWriteEio: return "EIO on the nth write";
    case Fault::kWriteEnospcSticky: return "ENOSPC from the nth write on";
    case Fault::kSyncEio: return "EIO on the nth fsync";
  }
  return "?";
}

// The error a call returns when it meets the fault: the fault itself, or (savepoints) the
// transaction doomed by it: a statement that failed and whose undo met the fault as well (undo
// writes pages too) returns FailedPrecondition "transaction N is doomed ...: <the fault>".
bool ExpectedError(Fault f, const absl::Status& s) {
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
  ScratchDir dir;
  REQUIRE(dir.ok());
  const std::string path = dir.File("io.edb");
  std::filesystem::copy_file(template_path, path);
  Options opts;
  opts.cache_pages = rng() % 2 ? 16 : 256;
  opts.forced_writes = true;
  opts.use_io_uring = false;
  CAPTURE(opts.cache_pages);
  io::FileOptions fo;
  fo.mode = io::OpenMode::kOpenExisting;
  fo.use_io_uring = false;
  auto owned = std::make_unique<io::FaultFile>(
      std::make_unique<NoSyncFile>(ValueOr(io::OpenPosixFile(path, fo), "open the file")));
  io::FaultFile* ff = owned.get();
  std::unique_ptr<db::DatabaseImpl> d =
      ValueOr(db::DatabaseImpl::OpenFile(std::move(owned), opts, false), "OpenFile");
  const Handles h = ValueOr(GetHandles(d.get()), "handles");
  switch (fault) {
    case Fault::kWriteEio: ff->FailWriteAfter(n, EIO); break;
    case Fault::kWriteEnospcSticky: ff->FailWriteAfter(n, ENOSPC, /*sticky=*/true); break;
    case Fault::kSyncEio: ff->FailSyncAfter(n, EIO); break;
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
  if (fault == Fault::kWriteEnospcSticky && n % 2 == 1) {
    // Close on a full disk: an error, not a crash; nothing it could not write may count.
    absl::Status s = d->Close();
    INFO("Close on a full disk: " << s.ToString());
    CHECK((s.ok() || ExpectedError(fault, s)));
  } else {
    d->SimulateCrash();
  }
  CRASH_REQUIRE_OK(ff->DropUnsynced());
  d.reset();

  std::unique_ptr<Database> db = ValueOr(Database::Open(path, opts), "reopen after the I/O error");
  RequireValid(db.get());
  const Handles h2 = ValueOr(GetHandles(db.get()), "handles after reopen");
  std::vector<int64_t> absent;
  for (int64_t id = first_id; id < next_id + 2; ++id) absent.push_back(id);
  RequireState(db.get(), h2, absent, committed, nullptr);
  CRASH_REQUIRE_OK(db->Close());
}

TEST_CASE("crash: EIO and ENOSPC on writes and fsync fail the call cleanly and lose nothing "
          "committed",
          "[crash]") {
  const uint64_t seed = BaseSeed();
  CAPTURE(seed);
  ScratchDir dir;
  REQUIRE(dir.ok());
  // A template database with some committed rows, copied for every case.
  const std::string template_path = dir.File("template.edb");
  Model model;
  std::mt19937_64 rng(seed);
  int64_t next_id = 1, next_tag = 1;
  {
    Options create;
    create.create_if_missing = true;
    create.page_size = 4096;
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
    if (Verbose()) {
      std::fprintf(stderr, "[crash] I/O errors: template of %zu rows, %llu pages\n", model.size(),
                   static_cast<unsigned long long>(db->stats().page_count));
    }
    CRASH_REQUIRE_OK(db->Close());
  }
  const int64_t first_id = 1'000'000;
  IoStats stats[3];
  const Fault faults[] = {Fault::kWriteEio, Fault::kWriteEnospcSticky, Fault::kSyncEio};
  for (int fi = 0; fi < 3; ++fi) {
    const Fault fault = faults[fi];
    const uint64_t max_n = fault == Fault::kSyncEio ? 30 : 60;
    for (uint64_t n = 1; n <= max_n; ++n) {
      const uint64_t case_seed = seed ^ (n * 0x9E3779B97F4A7C15ull) ^ (uint64_t(fi) << 56);
      CAPTURE(FaultName(fault), n, case_seed);
      IoErrorCase(fault, n, case_seed, template_path, model, first_id, &stats[fi]);
    }
    // Most n must actually have hit the workload.
    CHECK(stats[fi].fired * 2 > stats[fi].cases);
    if (Verbose()) {
      std::fprintf(stderr, "[crash] %s: %llu cases, fault met in %llu (%llu in Commit, %llu elsewhere)\n",
                   FaultName(fault), static_cast<unsigned long long>(stats[fi].cases),
                   static_cast<unsigned long long>(stats[fi].fired),
                   static_cast<unsigned long long>(stats[fi].commit_failures),
                   static_cast<unsigned long long>(stats[fi].other_failures));
    }
  }
}

}  // namespace
}  // namespace ember::crashtest
