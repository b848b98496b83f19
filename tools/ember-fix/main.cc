// ember-fix: maintenance of an EmberDB database, as Firebird's gfix does it: a sweep (-sweep,
// on -par N workers), a validation (-validate, with -mend freeing what a crash leaked), and the
// sweep interval kept in the header (-sweep_interval N). Unlike ember-stat it opens the
// database through the API, so it takes the owner's lock: a database another program has open
// is refused (exit 4), and everything it does is the engine's own, safe code.
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "ember/database.h"
#include "tools/common/exit_codes.h"
#include "tools/common/flags.h"
#include "tools/common/progress.h"

ABSL_FLAG(bool, sweep, false, "sweep the database");
ABSL_FLAG(int, par, 1, "sweep workers");
ABSL_FLAG(bool, validate, false, "validate the database");
ABSL_FLAG(bool, full, false, "list every finding of -validate");
ABSL_FLAG(bool, mend, false, "free unreachable pages and orphan BLOBs (-validate)");
ABSL_FLAG(uint64_t, sweep_interval, 0, "store the automatic sweep interval");
ABSL_FLAG(bool, progress, true, "progress on stderr");

namespace ember::tools {
namespace {

constexpr std::string_view kUsage = R"(Usage: ember-fix ACTION... [flags] DATABASE

Maintenance of an EmberDB database, like Firebird's gfix. Opens the database through the
engine (taking its owner lock, so a database another program has open is refused) without
the reclamation after a crash, so -validate shows what a crash leaked and -mend frees it.
Actions may be combined; they run in the order -sweep_interval, -sweep, -validate.

Actions (one dash or two; a value after '=' or as the next argument):
  -sweep              remove every record version no snapshot can see and move the oldest
                      interesting transaction (Database::Sweep); prints what it did
  -par N              with -sweep: N workers (1..64, default 1)
  -validate           walk every page (Database::Validate): checksums, record chains, BLOBs,
                      indexes, page allocation. Prints the counts, the errors (up to 10) and
                      how many pages are unreachable and BLOBs orphaned
  -full               with -validate: list every finding (every error, every unreachable
                      page, every orphan BLOB, every page repaired at open)
  -mend               with -validate: free the unreachable pages and orphan BLOBs (what a
                      crash leaks); nothing is freed when the walk found errors
  -sweep_interval N   store N in the header as the automatic sweep interval (0: no
                      automatic sweep); every later open uses it unless its options override
  -noprogress         no progress display on stderr
  --help              this text

Exit codes:
  0  done; -validate found no errors (unreachable pages and orphan BLOBs are not errors)
  1  -validate found errors (listed); the database has problems
  2  usage error (unknown flag, bad value, no action, no database)
  3  the database cannot be opened (missing, not an EmberDB file, unsupported format) or an
     action failed (I/O error, damage that stops a sweep)
  4  refused: the database is in use (another program has it open)
)";

const ToolSpec kSpec{"ember-fix",
                     kUsage,
                     {"sweep", "par", "validate", "full", "mend", "sweep_interval", "progress"}};

int Fail(const std::string& path, const std::string& what, const absl::Status& s) {
  if (absl::IsUnavailable(s)) {
    std::fprintf(stderr, "ember-fix: %s: refused, the database is in use: %s\n", path.c_str(),
                 std::string(s.message()).c_str());
  } else {
    std::fprintf(stderr, "ember-fix: %s: %s: %s\n", path.c_str(), what.c_str(),
                 std::string(s.message()).c_str());
  }
  return ExitCodeFor(s);
}

void PrintSweep(const SweepResult& r) {
  std::printf("Sweep: %d worker(s), %.2f s\n", r.workers, r.seconds);
  std::printf("    Data pages visited: %" PRIu64 ", skipped as swept: %" PRIu64
              ", flagged swept: %" PRIu64 "\n",
              r.pages_visited, r.pages_skipped, r.pages_flagged);
  std::printf("    Versions removed: %" PRIu64 ", records removed: %" PRIu64
              ", index entries removed: %" PRIu64 ", BLOBs removed: %" PRIu64 "\n",
              r.versions_removed, r.records_removed, r.index_entries_removed, r.blobs_removed);
  std::printf("    Records kept for older snapshots: %" PRIu64 "\n", r.records_kept);
  std::printf("    Oldest interesting transaction: %" PRIu64 " -> %" PRIu64 "\n", r.oit_before,
              r.oit_after);
}

void PrintValidation(const ValidationReport& r, bool full, bool mend) {
  std::printf("Validation: %" PRIu64 " pages checked, %" PRIu64 " record versions, %" PRIu64
              " index entries\n",
              r.pages_checked, r.records, r.index_entries);
  std::printf("    Errors: %zu\n", r.errors.size());
  constexpr size_t kShown = 10;
  for (size_t i = 0; i < r.errors.size() && (full || i < kShown); ++i) {
    std::printf("        %s\n", r.errors[i].c_str());
  }
  if (!full && r.errors.size() > kShown) {
    std::printf("        ... %zu more (-full lists them all)\n", r.errors.size() - kShown);
  }
  std::printf("    Unreachable pages: %zu\n", r.unreachable_pages.size());
  if (full) {
    for (uint32_t p : r.unreachable_pages) std::printf("        page %u\n", p);
  }
  std::printf("    Orphan BLOBs: %zu\n", r.orphan_blobs.size());
  if (full) {
    for (uint64_t b : r.orphan_blobs) std::printf("        BLOB %" PRIu64 "\n", b);
  }
  std::printf("    Pages repaired from the doublewrite area at open: %zu\n",
              r.repaired_pages.size());
  if (full) {
    for (uint32_t p : r.repaired_pages) std::printf("        page %u\n", p);
  }
  if (mend) {
    if (r.ok()) {
      std::printf("    Freed: %" PRIu64 " unreachable pages, %" PRIu64 " pages of orphan BLOBs\n",
                  r.freed_pages, r.freed_blob_pages);
    } else {
      std::printf(
          "    Freed nothing: the walk found errors (a damaged page can hide references"
          " to pages that then only look unreachable)\n");
    }
  }
}

int Main(int argc, char** argv) {
  std::vector<std::string> args = ParseToolFlags(argc, argv, kSpec);
  const bool sweep = absl::GetFlag(FLAGS_sweep);
  const bool validate = absl::GetFlag(FLAGS_validate);
  const bool set_interval = FlagGiven("sweep_interval");
  if (!sweep && !validate && !set_interval) {
    UsageError(kSpec, "no action: give -sweep, -validate or -sweep_interval N");
  }
  if ((absl::GetFlag(FLAGS_full) || absl::GetFlag(FLAGS_mend)) && !validate) {
    UsageError(kSpec, "-full and -mend go with -validate");
  }
  if (FlagGiven("par") && !sweep) UsageError(kSpec, "-par goes with -sweep");
  const int par = absl::GetFlag(FLAGS_par);
  if (par < 1 || par > 64) UsageError(kSpec, "-par takes 1..64 workers");
  if (args.size() != 1) {
    UsageError(kSpec, args.empty() ? "no database given" : "more than one database given");
  }
  const std::string& path = args[0];

  Options o;
  o.reclaim_after_crash = false;  // -validate shows the leaks, -mend frees them
  o.sweep_interval = 0;           // no automatic sweep while we work (this open only)
  o.parallel_workers = par;
  o.max_parallel_workers = par;
  ProgressOptions po;
  po.enabled = absl::GetFlag(FLAGS_progress);

  absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(path, o);
  if (!db.ok()) return Fail(path, "cannot open", db.status());

  int code = kExitOk;
  if (set_interval) {
    const uint64_t n = absl::GetFlag(FLAGS_sweep_interval);
    if (absl::Status s = (*db)->SetSweepInterval(n); !s.ok()) {
      return Fail(path, "storing the sweep interval", s);
    }
    std::printf("Sweep interval set to %" PRIu64 "%s\n", n, n == 0 ? " (no automatic sweep)" : "");
  }
  if (sweep) {
    SweepOptions so;
    so.workers = par;
    Progress progress("ember-fix: sweep", 0, "", po);
    absl::StatusOr<SweepResult> r = progress.Run([&] { return (*db)->Sweep(so); });
    if (!r.ok()) return Fail(path, "sweep", r.status());
    PrintSweep(*r);
  }
  if (validate) {
    ValidateOptions vo;
    vo.free_unreachable = absl::GetFlag(FLAGS_mend);
    Progress progress("ember-fix: validate", 0, "", po);
    absl::StatusOr<ValidationReport> r = progress.Run([&] { return (*db)->Validate(vo); });
    if (!r.ok()) return Fail(path, "validate", r.status());
    PrintValidation(*r, absl::GetFlag(FLAGS_full), vo.free_unreachable);
    if (!r->ok()) code = kExitProblems;
  }
  std::fflush(stdout);
  if (absl::Status s = (*db)->Close(); !s.ok()) return Fail(path, "close", s);
  return code;
}

}  // namespace
}  // namespace ember::tools

int main(int argc, char** argv) { return ember::tools::Main(argc, argv); }
