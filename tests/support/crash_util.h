// The harness shared by the crash tests (tests/crash/; db/corruption_test.cc borrows its seeds
// and scratch space): their environment knobs, scratch space, assertions, the in-process
// power-loss file stack, and the checks every reopened database goes through (Validate clean,
// contents equal to the test's model). The table, the model and how to read it back stay with
// each test.
//
// Environment: EMBER_CRASH_SEED (a number, or "random"; every test prints the seed it runs with,
// and each round's page size and write path are drawn from it), EMBER_CRASH_DIR (where the
// databases go; default /dev/shm), EMBER_CRASH_KEEP=<dir> (copy a database that fails Validate
// there), EMBER_CRASH_VERBOSE (1: a summary line per test; 2: also one per crash).
#pragma once
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "ember/ember.h"
#include "engine/db/database_impl.h"
#include "tests/support/fault_file.h"
#include "tests/support/reorder_file.h"
#include "tests/support/temp_dir.h"

namespace ember::testing {

// ---------------------------------------------------------------- environment and scratch space

// The number in environment variable `name`, or `def` when it is unset or empty.
uint64_t EnvU64(const char* name, uint64_t def);

// Each test file has its own `fixed` seed, so that the default runs of the two do not share a
// random sequence.
uint64_t BaseSeed(uint64_t fixed);

uint64_t Verbosity();

// The seed of a test, printed so that a failure can be replayed with EMBER_CRASH_SEED (Catch2
// shows its CAPTUREs only on failure, and a run that dies in a sanitizer shows none).
uint64_t AnnounceSeed(const char* test, uint64_t fixed);

// A line on stderr for EMBER_CRASH_VERBOSE, from StrCat pieces (no printf casts of uint64_t).
template <class... Pieces>
void Report(const Pieces&... pieces) {
  const std::string line = absl::StrCat(pieces..., "\n");
  std::fputs(line.c_str(), stderr);
}

// On /dev/shm rather than a real disk: the in-process tests decide durability in the
// fault-injecting file, and a SIGKILL loses nothing the kernel already has (tmpfs or not), so a
// real disk only adds fsync latency, which on a loaded 2-core machine cuts the work done between
// kills tenfold. Temp() is a directory inside it for the engine's temp space.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  bool ok() const { return !path_.empty(); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  std::string Temp() const { return path_ + "/tmp"; }

 private:
  std::string path_;
  TempDir fallback_;  // where there is no /dev/shm
};

// ---------------------------------------------------------------- assertions

// The lines of `v`, each ended by "\n".
std::string Join(const std::vector<std::string>& v);

template <class T>
T ValueOr(absl::StatusOr<T> v, const char* what) {
  INFO(what << ": " << v.status().ToString());
  REQUIRE(v.ok());
  return std::move(*v);
}

#define CRASH_REQUIRE_OK(expr)                       \
  do {                                               \
    const absl::Status crash_status_ = (expr);       \
    INFO(#expr << ": " << crash_status_.ToString()); \
    REQUIRE(crash_status_.ok());                     \
  } while (0)

// ---------------------------------------------------------------- power loss in process

enum class LossModel { kDropUnsynced, kReorder };

// Torn writes: ReorderFile tears some of the unsynced writes a power loss keeps (4096- or
// 512-byte units new, the rest old; reorder_file.h), and the SIGKILL tests draw their page size
// like the others, so pages larger than a tear unit meet torn writes. The engine survives them
// through its doublewrite area (torn-page repair at open). kTearPercent: the share (percent) of
// the kept unsynced writes that are torn.
inline constexpr unsigned kTearPercent = 50;

// The page sizes the crash tests draw from, 8192 (the default) among them.
inline constexpr uint32_t kCrashPageSizes[] = {4096, 8192, 16384};

// A page size and write path drawn for one round (from the test's seeded generator).
// EMBER_CRASH_PAGE_SIZE and EMBER_CRASH_IO_URING (0 or 1) force them, keeping the rest of the
// round's random sequence as it was (to tell which of the two a failure depends on).
void DrawPageSizeAndPath(std::mt19937_64& rng, Options* opts);

// A test that claims a write path must have used it: when io_uring was asked for and the kernel
// refused it (the file fell back to pwrite), the test fails instead of passing on the fallback.
// `counts` are the file's (io::File::write_path_counts); every page write of the engine is a
// WriteBatch request, so none may take the other path, and when the test knows pages were
// written (`wrote`), some must have taken the claimed one.
void RequireWritePath(bool use_io_uring, const io::WritePathCounts& counts, bool wrote);

// A database over a file that decides what a power loss keeps: FaultFile (nothing written since
// the last sync) or ReorderFile (any subset of it). Below it a NoSyncFile: what the real disk
// makes durable does not matter here, and its fsyncs would only cost time.
struct PowerLossDb {
  std::unique_ptr<db::DatabaseImpl> db;
  io::FaultFile* fault = nullptr;  // under kDropUnsynced
  ReorderFile* reorder = nullptr;  // under kReorder

  io::File* file() const { return fault ? static_cast<io::File*>(fault) : reorder; }

  // Call after db->TEST_SimulateCrash(). Returns the page versions ReorderFile reverted.
  uint64_t LosePower(std::mt19937_64& rng);
};

PowerLossDb OpenPowerLossDb(const std::string& path, const Options& opts, LossModel loss,
                            bool create);

// ---------------------------------------------------------------- checking a reopened database

// Copies the database to EMBER_CRASH_KEEP, when set, for a look after the test.
void KeepForPostMortem(const std::string& db_path);

// Validate must be clean. Unreachable pages (allocated, linked from nothing: what a crash may
// leave, e.g. the pages of a BLOB being written) are allowed; they are freed and the database
// validated again. Returns how many there were; `in_use` gets the pages Validate walked.
size_t RequireValidAfterCrash(Database* db, const std::string& db_path = "",
                              uint64_t* in_use = nullptr);

// The first few differences between two states of a model (id -> row; empty when equal).
// DescribeRow(row) is the test's own, found by argument-dependent lookup.
template <class Model>
std::string DescribeDiff(const Model& want, const Model& got, size_t max_lines = 12) {
  std::string out;
  size_t n = 0;
  auto line = [&](const std::string& s) {
    if (n++ < max_lines) absl::StrAppend(&out, "  ", s, "\n");
  };
  for (const auto& [id, r] : want) {
    auto it = got.find(id);
    if (it == got.end()) line(absl::StrCat("id ", id, ": missing, expected ", DescribeRow(r)));
    else if (!(it->second == r)) {
      line(
          absl::StrCat("id ", id, ": got ", DescribeRow(it->second), " expected ", DescribeRow(r)));
    }
  }
  for (const auto& [id, r] : got) {
    if (!want.contains(id)) line(absl::StrCat("id ", id, ": unexpected ", DescribeRow(r)));
  }
  if (n > max_lines) absl::StrAppend(&out, "  ... ", n - max_lines, " more\n");
  return out;
}

// Reads the database back with `read(t, &got, &problems)` (the test's reader, which returns an
// error only when the engine failed a call) and requires no problems and `got` equal to `want`,
// or to `alt` when given (the in-flight transaction's outcome is unknown). Returns the state
// read; `*matched_alt` tells whether it was `alt` rather than `want`. One read-only transaction,
// so that the table scan and the index checks see the same snapshot.
template <class Model, class ReadFn>
Model RequireModel(Database* db, ReadFn&& read, const Model& want, const Model* alt,
                   bool* matched_alt) {
  TransactionOptions ro;
  ro.read_only = true;
  std::unique_ptr<Transaction> t = ValueOr(db->Begin(ro), "Begin(read_only)");
  Model got;
  std::vector<std::string> problems;
  CRASH_REQUIRE_OK(read(*t, &got, &problems));
  CRASH_REQUIRE_OK(t->Commit());
  INFO("read-back problems:\n" << Join(problems));
  REQUIRE(problems.empty());
  const bool is_want = got == want;
  const bool is_alt = alt != nullptr && got == *alt;
  INFO("difference from the committed state:\n" << DescribeDiff(want, got));
  INFO("difference from the state with the in-flight transaction:\n"
       << (alt != nullptr ? DescribeDiff(*alt, got) : std::string("  (none in flight)\n")));
  REQUIRE((is_want || is_alt));
  if (matched_alt) *matched_alt = is_alt && !is_want;
  return got;
}

}  // namespace ember::testing
