// ember-bak: backup and restore of an EmberDB database from the shell, as Firebird's gbak does
// it. -b writes a backup file of one snapshot (Database::Backup), -c makes a new database from
// one (ember::Restore), both on -par N workers.
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ember/backup.h"
#include "ember/database.h"
#include "tools/common/exit_codes.h"
#include "tools/common/flags.h"
#include "tools/common/progress.h"

ABSL_FLAG(bool, b, false, "back up DATABASE into BACKUP");
ABSL_FLAG(bool, c, false, "restore BACKUP into a new DATABASE");
ABSL_FLAG(int, par, 1, "workers");
ABSL_FLAG(int, zstd, 1, "zstd level of the backup (1..19)");
ABSL_FLAG(uint32_t, page_size, 8192, "page size of the restored database");
ABSL_FLAG(bool, rep, false, "replace an existing database");
ABSL_FLAG(bool, i, false, "restore every index inactive");
ABSL_FLAG(bool, strict, false, "fail the restore when an active index cannot be built");
ABSL_FLAG(bool, progress, true, "progress on stderr");

namespace ember::tools {
namespace {

constexpr std::string_view kUsage = R"(Usage: ember-bak -b [-par N] [-zstd L] DATABASE BACKUP
       ember-bak -c [-par N] [-page_size N] [-rep] [-i | -strict] BACKUP DATABASE

Backup and restore of an EmberDB database, like Firebird's gbak.

  -b             back up DATABASE into the file BACKUP (replaced if it exists): the tables'
                 and indexes' definitions and every row one snapshot sees, BLOBs included, in
                 a portable, compressed, checksummed format (docs/backup-format.md). The tool
                 opens the database itself, so it must not be open in another program: a
                 program that has it open backs it up online with Database::Backup, while its
                 writers go on
  -c             restore BACKUP into a new database DATABASE: loads the rows, then builds the
                 indexes with the parallel bulk build. The database is built as
                 DATABASE.restoring and renamed only once complete and on disk. An index
                 inactive in the backup is restored inactive, not built; an active one that
                 cannot be built (duplicate keys of a unique index, a key longer than the
                 new page size allows) is restored inactive with a warning (exit code 1)
  -par N         workers, both directions (1..64, default 1)
  -zstd L        with -b: zstd level 1..19 (default 1; higher is smaller and slower)
  -page_size N   with -c: the new database's page size (4096..32768, default 8192)
  -rep           with -c: replace DATABASE if it exists (else refused)
  -i             with -c: restore every index inactive (gbak -i): the rows come back even
                 when an index cannot be built; activate them later (SetIndexActive)
  -strict        with -c: an active index that cannot be built fails the restore instead
  -noprogress    no progress display on stderr
  --help         this text

Exit codes:
  0  done
  1  -c: the backup file is damaged or truncated (the message names the frame and offset);
     nothing was restored. Or an index cannot be built from the rows: restored with the
     index left inactive (each such index named on stderr), or with -strict nothing restored
  2  usage error (unknown flag, bad value, not exactly one of -b / -c, wrong arguments)
  3  the database or the backup file cannot be opened, read or written, or DATABASE exists
     for -c without -rep
  4  refused: -b on a database another program has open
)";

const ToolSpec kSpec{
    "ember-bak", kUsage, {"b", "c", "par", "zstd", "page_size", "rep", "i", "strict", "progress"}};

int Fail(const std::string& what, const absl::Status& s) {
  if (absl::IsUnavailable(s) && absl::StrContains(s.message(), "in use")) {
    std::fprintf(stderr,
                 "ember-bak: %s: refused, the database is in use: %s\n"
                 "ember-bak: back it up from the program that has it open "
                 "(Database::Backup)\n",
                 what.c_str(), std::string(s.message()).c_str());
    return kExitInUse;
  }
  std::fprintf(stderr, "ember-bak: %s: %s\n", what.c_str(), std::string(s.message()).c_str());
  if (absl::IsDataLoss(s)) return kExitProblems;
  return kExitIo;
}

// Feeds the engine's progress calls (done of total, the total known only then) to `p`.
ProgressFn Report(Progress* p) {
  return [p](uint64_t done, uint64_t total) {
    p->set_total(total);
    p->Update(done);
  };
}

int Backup(const std::string& db_path, const std::string& bak, int par, ProgressOptions po) {
  Options o;
  o.parallel_workers = par;
  o.max_parallel_workers = par;
  o.sweep_interval = 0;  // no automatic sweep started by this open
  absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(db_path, o);
  if (!db.ok()) return Fail(db_path, db.status());
  BackupOptions bo;
  bo.workers = par;
  bo.zstd_level = absl::GetFlag(FLAGS_zstd);
  Progress progress("ember-bak: backup", 0, "pages", po);
  bo.progress = Report(&progress);
  absl::StatusOr<BackupResult> r = (*db)->Backup(bak, bo);
  progress.Finish();
  if (!r.ok()) return Fail(bak, r.status());
  if (absl::Status s = (*db)->Close(); !s.ok()) return Fail(db_path, s);
  std::printf("Backup of %s into %s: %.2f s on %d worker(s)\n", db_path.c_str(), bak.c_str(),
              r->seconds, r->workers);
  std::printf("    Tables: %" PRIu64 ", indexes: %" PRIu64 ", rows: %" PRIu64 ", BLOBs: %" PRIu64
              " (%" PRIu64 " bytes)\n",
              r->tables, r->indexes, r->rows, r->blobs, r->blob_bytes);
  std::printf("    Data pages read: %" PRIu64 ", backup file: %" PRIu64 " bytes (%" PRIu64
              " before compression), snapshot of transaction %" PRIu64 "\n",
              r->pages, r->bytes, r->raw_bytes, r->snapshot);
  return kExitOk;
}

int RestoreCmd(const std::string& bak, const std::string& db_path, int par, ProgressOptions po) {
  Options o;
  o.page_size = absl::GetFlag(FLAGS_page_size);
  o.parallel_workers = par;
  o.max_parallel_workers = par;
  RestoreOptions ro;
  ro.workers = par;
  ro.replace = absl::GetFlag(FLAGS_rep);
  ro.deactivate_indexes = absl::GetFlag(FLAGS_i);
  ro.strict = absl::GetFlag(FLAGS_strict);
  // Told apart from Restore's other AlreadyExists (a unique index over duplicates, -strict).
  if (!ro.replace && std::filesystem::exists(db_path)) {
    std::fprintf(stderr, "ember-bak: %s exists: give -rep to replace it\n", db_path.c_str());
    return kExitIo;
  }
  Progress progress("ember-bak: restore", 0, "bytes", po);
  ro.progress = Report(&progress);
  absl::StatusOr<RestoreResult> r = Restore(bak, db_path, o, ro);
  progress.Finish();
  if (!r.ok()) {
    const int code = Fail(absl::StrCat("restore of ", bak), r.status());
    // -strict: an index the rows cannot build (its message says which and why).
    if (ro.strict && (absl::IsAlreadyExists(r.status()) || absl::IsInvalidArgument(r.status()))) {
      return kExitProblems;
    }
    return code;
  }
  std::printf("Restore of %s into %s: %.2f s on %d worker(s) (load %.2f s, indexes %.2f s)\n",
              bak.c_str(), db_path.c_str(), r->seconds, r->workers, r->load_seconds,
              r->index_seconds);
  std::printf("    Tables: %" PRIu64 ", indexes: %" PRIu64 ", rows: %" PRIu64 ", BLOBs: %" PRIu64
              " (%" PRIu64 " bytes), page size %u\n",
              r->tables, r->indexes, r->rows, r->blobs, r->blob_bytes, o.page_size);
  if (r->indexes_built != r->indexes) {
    std::printf("    Indexes built: %" PRIu64 " of %" PRIu64 " (the others restored inactive)\n",
                r->indexes_built, r->indexes);
  }
  for (const std::string& w : r->warnings) {
    std::fprintf(stderr, "ember-bak: warning: %s\n", w.c_str());
  }
  if (!r->warnings.empty()) {
    std::fprintf(stderr,
                 "ember-bak: every row is restored; fix the data, then activate the indexes "
                 "named above\n");
    return kExitProblems;
  }
  return kExitOk;
}

int Main(int argc, char** argv) {
  std::vector<std::string> args = ParseToolFlags(argc, argv, kSpec);
  const bool b = absl::GetFlag(FLAGS_b), c = absl::GetFlag(FLAGS_c);
  if (b == c) UsageError(kSpec, "give exactly one of -b (backup) and -c (restore)");
  const int par = absl::GetFlag(FLAGS_par);
  if (par < 1 || par > 64) UsageError(kSpec, "-par takes 1..64 workers");
  if (b && (FlagGiven("page_size") || FlagGiven("rep") || FlagGiven("i") || FlagGiven("strict"))) {
    UsageError(kSpec, "-page_size, -rep, -i and -strict go with -c");
  }
  if (absl::GetFlag(FLAGS_i) && absl::GetFlag(FLAGS_strict)) {
    UsageError(kSpec, "-i and -strict exclude each other");
  }
  if (c && FlagGiven("zstd")) UsageError(kSpec, "-zstd goes with -b");
  const int zstd = absl::GetFlag(FLAGS_zstd);
  if (zstd < 1 || zstd > 19) UsageError(kSpec, "-zstd takes a level 1..19");
  const uint32_t ps = absl::GetFlag(FLAGS_page_size);
  if (ps < 4096 || ps > 32768 || (ps & (ps - 1)) != 0) {
    UsageError(kSpec, "-page_size takes a power of two 4096..32768");
  }
  if (args.size() != 2) {
    UsageError(kSpec, b ? "-b takes DATABASE BACKUP" : "-c takes BACKUP DATABASE");
  }
  ProgressOptions po;
  po.enabled = absl::GetFlag(FLAGS_progress);
  return b ? Backup(args[0], args[1], par, po) : RestoreCmd(args[0], args[1], par, po);
}

}  // namespace
}  // namespace ember::tools

int main(int argc, char** argv) { return ember::tools::Main(argc, argv); }
