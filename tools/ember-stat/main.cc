// ember-stat: statistics of an EmberDB database file, as Firebird's gstat gives them: the
// header page (-h), per table its pages, fill, records and versions (-d), per index its depth,
// pages, fill, entries and distinct keys (-i), or all of it (-a, the default). It reads the
// file directly and read-only, without the owner's lock, so it works on a database another
// program has open; what it can see then is described in tools/common/page_reader.h.
#include <cinttypes>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_split.h"
#include "engine/page/header_page.h"
#include "tools/common/exit_codes.h"
#include "tools/common/flags.h"
#include "tools/common/page_reader.h"
#include "tools/common/progress.h"
#include "tools/ember-stat/analyzer.h"

ABSL_FLAG(bool, h, false, "header page only");
ABSL_FLAG(bool, d, false, "data pages of every table");
ABSL_FLAG(bool, i, false, "indexes");
ABSL_FLAG(bool, a, false, "data pages and indexes");
ABSL_FLAG(std::string, t, "", "only these tables (comma-separated)");
ABSL_FLAG(int, retries, 5, "re-reads of a page that fails its checksum");
ABSL_FLAG(bool, progress, true, "progress on stderr");

namespace ember::tools {
namespace {

constexpr std::string_view kUsage = R"(Usage: ember-stat [flags] DATABASE

Statistics of an EmberDB database file, like Firebird's gstat. Reads the file directly and
read-only, without taking the owner's lock: it works on a database another program has open,
and then sees what that program has written to the file (its committed transactions; not the
pages it holds changed in its cache). A page being written as it is read is read again; one
that still fails its check is reported as unreadable and the report goes on.

Flags (one dash or two; a value after '=' or as the next argument):
  -h            the header page only (page size, format, transaction counters, sweep
                interval, flags). Note: -h is the header, as in gstat; help is --help.
  -d            per table: pointer, data and secondary pages, fill distribution, records,
                versions, the longest version chain, garbage, BLOBs and their pages
  -i            per index: depth, leaf and internal pages, leaf fill, entries, distinct keys
  -a            -d and -i (the default when none of -h, -d, -i, -a is given)
  -t NAMES      only these tables (comma-separated) and their indexes
  -retries N    re-reads of a page that fails its checksum before it is unreadable (5)
  -noprogress   no progress display on stderr
  --help        this text

Exit codes:
  0  the report is complete
  1  the report is done but some pages could not be read or decoded (listed, with their
     page numbers, in the report and on stderr)
  2  usage error (unknown flag, bad value, no database)
  3  the database cannot be opened or read (missing, not an EmberDB file, unsupported
     format, damaged header page, I/O error)
)";

const ToolSpec kSpec{"ember-stat", kUsage, {"h", "d", "i", "a", "t", "retries", "progress"}};

void PrintFill(const Fill& f, const char* indent) {
  static const char* kNames[] = {" 0 - 19%", "20 - 39%", "40 - 59%", "60 - 79%", "80 - 99%"};
  std::printf("%sFill distribution:\n", indent);
  for (size_t b = 0; b < f.buckets.size(); ++b) {
    std::printf("%s    %s = %" PRIu64 "\n", indent, kNames[b], f.buckets[b]);
  }
}

void PrintProblems(const std::vector<std::string>& problems, const char* indent) {
  for (const std::string& p : problems) {
    std::printf("%sERROR: %s\n", indent, p.c_str());
    std::fprintf(stderr, "ember-stat: %s\n", p.c_str());
  }
}

void PrintHeader(const PageReader& r) {
  const page::HeaderFields& h = r.header();
  std::printf("Database \"%s\"\n", r.path().c_str());
  std::printf("Database header page information:\n");
  std::printf("    Page size               %u\n", h.page_size);
  std::printf("    Format version          %u\n", h.format_version);
  std::printf("    Page count              %u (file: %" PRIu64 " pages)\n", h.page_count,
              r.FilePages());
  std::printf("    Next transaction        %" PRIu64 "\n", h.next_txn);
  std::printf("    Oldest interesting      %" PRIu64 "\n", h.oit);
  std::printf("    Oldest active           %" PRIu64 "\n", h.oat);
  std::printf("    Oldest snapshot         %" PRIu64 "\n", h.ost);
  std::printf("    Sweep interval          %" PRIu64 "%s\n", h.sweep_interval,
              (h.flags & page::kHeaderFlagSweepInterval) ? "" : " (default: not stored)");
  std::printf("    First TIP page          %u\n", h.first_tip);
  std::printf("    Catalog pointer page    %u\n", h.catalog_pp);
  std::printf("    Doublewrite area        pages %u..%u\n", h.dw_first,
              h.dw_first + h.dw_slots - 1);
  std::printf("    Creation time (us)      %" PRIu64 "\n", h.create_time_us);
  std::printf("    Flags                   0x%x\n", h.flags);
  std::printf("    Shutdown                %s\n",
              (h.flags & page::kHeaderFlagCleanShutdown)
                  ? "clean"
                  : "not clean (open now, or the last session crashed)");
}

void PrintTable(const TableInfo& t, bool data) {
  std::printf("\n%s (%u)\n", t.name.c_str(), t.id);
  if (data) {
    std::printf("    Primary pointer page: %u, pointer pages: %" PRIu64 "\n", t.first_pp,
                t.pointer_pages);
    std::printf("    Data pages: %" PRIu64 ", average fill: %.0f%%, secondary pages: %" PRIu64
                ", swept pages: %" PRIu64 "\n",
                t.data_pages, t.fill.average(), t.secondary_pages, t.swept_pages);
    PrintFill(t.fill, "    ");
    std::printf("    Records: %" PRIu64 ", versions: %" PRIu64 ", back versions: %" PRIu64
                ", max versions: %" PRIu64 "\n",
                t.records, t.versions, t.back_versions, t.max_chain);
    std::printf("    Delete stubs: %" PRIu64 ", uncommitted versions: %" PRIu64
                ", dead versions: %" PRIu64 ", garbage (est.): %" PRIu64 "\n",
                t.delete_stubs, t.uncommitted, t.dead_versions, t.garbage);
    std::printf("    Fragments: %" PRIu64 ", BLOBs: %" PRIu64 ", BLOB pages: %" PRIu64 "\n",
                t.fragments, t.blobs, t.blob_pages);
    if (t.empty_blobs > 0) {
      // Earlier builds stored a BLOB of no bytes as a record; it reads as the empty BLOB.
      std::printf("    BLOBs of zero bytes: %" PRIu64
                  " (read, backed up and restored as the "
                  "empty BLOB)\n",
                  t.empty_blobs);
    }
    PrintProblems(t.problems, "    ");
  }
}

void PrintIndex(const IndexInfo& ix) {
  std::printf("\n    Index %s (%u)%s\n", ix.name.c_str(), ix.id, ix.unique ? " unique" : "");
  if (ix.inactive) {
    std::printf("        inactive (no tree)\n");
    return;
  }
  std::printf("        Root page: %u, depth: %u, leaf pages: %" PRIu64 ", internal pages: %" PRIu64
              "\n",
              ix.root, ix.depth, ix.leaf_pages, ix.internal_pages);
  std::printf("        Entries: %" PRIu64 ", distinct keys: %" PRIu64
              ", average leaf fill: %.0f%%\n",
              ix.entries, ix.distinct_keys, ix.leaf_fill.average());
  PrintFill(ix.leaf_fill, "        ");
  PrintProblems(ix.problems, "        ");
}

int Main(int argc, char** argv) {
  std::vector<std::string> args = ParseToolFlags(argc, argv, kSpec);
  if (args.size() != 1) {
    UsageError(kSpec, args.empty() ? "no database given" : "more than one database given");
  }
  if (absl::GetFlag(FLAGS_retries) < 0) UsageError(kSpec, "-retries must be at least 0");
  absl::StatusOr<std::unique_ptr<PageReader>> reader =
      PageReader::Open(args[0], absl::GetFlag(FLAGS_retries));
  if (!reader.ok()) {
    std::fprintf(stderr, "ember-stat: cannot read %s: %s\n", args[0].c_str(),
                 std::string(reader.status().message()).c_str());
    return kExitIo;
  }
  PageReader& r = **reader;
  PrintHeader(r);
  const bool header_only = absl::GetFlag(FLAGS_h) && !absl::GetFlag(FLAGS_d) &&
                           !absl::GetFlag(FLAGS_i) && !absl::GetFlag(FLAGS_a);
  if (header_only) {
    std::fflush(stdout);
    return kExitOk;
  }
  bool data = absl::GetFlag(FLAGS_d) || absl::GetFlag(FLAGS_a);
  bool indexes = absl::GetFlag(FLAGS_i) || absl::GetFlag(FLAGS_a);
  if (!data && !indexes) data = indexes = true;
  std::set<std::string> only;
  for (absl::string_view n : absl::StrSplit(absl::GetFlag(FLAGS_t), ',', absl::SkipEmpty())) {
    only.emplace(n);
  }

  ProgressOptions po;
  po.enabled = absl::GetFlag(FLAGS_progress);
  Progress progress("ember-stat: reading pages", r.FilePages(), "pages", po);
  uint64_t read = 0;
  Analyzer an(&r, [&](uint64_t n) { progress.Update(read += n); });
  an.LoadCatalog();
  for (TableInfo& t : an.tables()) {
    if (!only.empty() && !only.count(t.name)) continue;
    if (data) an.WalkTable(&t);
    if (indexes) {
      for (IndexInfo* ix : t.indexes) an.WalkIndex(ix);
    }
  }
  progress.Finish();

  std::printf("\nAnalyzing database pages ...\n");
  PrintProblems(an.problems(), "");
  for (const std::string& n : only) {
    bool found = false;
    for (const TableInfo& t : an.tables()) found |= t.name == n;
    if (!found) std::printf("\nTable %s: not in the catalog\n", n.c_str());
  }
  for (const TableInfo& t : an.tables()) {
    if (!only.empty() && !only.count(t.name)) continue;
    PrintTable(t, data);
    if (indexes) {
      for (const IndexInfo* ix : t.indexes) PrintIndex(*ix);
    }
  }
  const uint64_t problems = an.problem_count();
  std::printf("\n%" PRIu64 " pages read (%" PRIu64 " re-read after a failed check), %" PRIu64
              " problem(s)\n",
              r.pages_read(), r.rereads(), problems);
  std::fflush(stdout);
  return problems == 0 ? kExitOk : kExitProblems;
}

}  // namespace
}  // namespace ember::tools

int main(int argc, char** argv) { return ember::tools::Main(argc, argv); }
