// The crash-test harness declared in crash_util.h.
#include "tests/support/crash_util.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <system_error>

namespace ember::testing {

uint64_t EnvU64(const char* name, uint64_t def) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return def;
  return std::strtoull(v, nullptr, 0);
}

uint64_t BaseSeed(uint64_t fixed) {
  const char* v = std::getenv("EMBER_CRASH_SEED");
  if (v == nullptr || *v == '\0') return fixed;
  if (std::strcmp(v, "random") == 0) {
    return (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  }
  return std::strtoull(v, nullptr, 0);
}

uint64_t Verbosity() { return EnvU64("EMBER_CRASH_VERBOSE", 0); }

uint64_t AnnounceSeed(const char* test, uint64_t fixed) {
  const uint64_t seed = BaseSeed(fixed);
  std::fprintf(stderr, "[crash] %s: seed %llu (EMBER_CRASH_SEED=%llu replays it)\n", test,
               static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  return seed;
}

ScratchDir::ScratchDir(const std::string& prefix) {
  const char* base = std::getenv("EMBER_CRASH_DIR");
  std::string tmpl = std::string(base && *base ? base : "/dev/shm") + "/" + prefix + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) != nullptr) {
    path_ = tmpl;
  } else if (fallback_.ok()) {
    path_ = fallback_.File("d");
    if (::mkdir(path_.c_str(), 0700) != 0) path_.clear();
  }
  if (!path_.empty() && ::mkdir(Temp().c_str(), 0700) != 0) {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    path_.clear();
  }
}

ScratchDir::~ScratchDir() {
  std::error_code ec;  // best effort: a leftover directory must not fail the test
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += s + "\n";
  return out;
}

void DrawPageSizeAndPath(std::mt19937_64& rng, Options* opts) {
  opts->page_size = kCrashPageSizes[rng() % std::size(kCrashPageSizes)];
  opts->use_io_uring = rng() % 2 == 0;
  opts->page_size = static_cast<uint32_t>(EnvU64("EMBER_CRASH_PAGE_SIZE", opts->page_size));
  opts->use_io_uring = EnvU64("EMBER_CRASH_IO_URING", opts->use_io_uring) != 0;
}

void RequireWritePath(bool use_io_uring, const io::WritePathCounts& counts, bool wrote) {
  INFO("write path claimed: " << (use_io_uring ? "io_uring" : "pwrite") << "; requests written "
                              << counts.io_uring << " through io_uring, " << counts.pwrite
                              << " through pwrite");
  REQUIRE((use_io_uring ? counts.pwrite : counts.io_uring) == 0);
  if (wrote) REQUIRE((use_io_uring ? counts.io_uring : counts.pwrite) > 0);
}

uint64_t PowerLossDb::LosePower(std::mt19937_64& rng) {
  if (reorder != nullptr) {
    reorder->set_tear_percent(kTearPercent);
    return ValueOr(reorder->PowerLoss(rng), "PowerLoss");
  }
  // A fault armed for the crash point is over: the restore must not meet it.
  fault->FailSyncAfter(0, 0);
  fault->FailWriteAfter(0, 0);
  CRASH_REQUIRE_OK(fault->DropUnsynced());
  return 0;
}

PowerLossDb OpenPowerLossDb(const std::string& path, const Options& opts, LossModel loss,
                            bool create) {
  io::FileOptions fo;
  fo.mode = create ? io::OpenMode::kCreateNew : io::OpenMode::kOpenExisting;
  fo.use_io_uring = opts.use_io_uring;
  std::unique_ptr<io::File> file =
      std::make_unique<NoSyncFile>(ValueOr(io::OpenPosixFile(path, fo), "open the file"));
  PowerLossDb out;
  if (loss == LossModel::kDropUnsynced) {
    auto f = std::make_unique<io::FaultFile>(std::move(file));
    out.fault = f.get();
    file = std::move(f);
  } else {
    auto f = std::make_unique<ReorderFile>(std::move(file));
    out.reorder = f.get();
    file = std::move(f);
  }
  out.db = ValueOr(db::DatabaseImpl::OpenFile(std::move(file), opts, create), "OpenFile");
  return out;
}

void KeepForPostMortem(const std::string& db_path) {
  const char* keep = std::getenv("EMBER_CRASH_KEEP");
  if (keep == nullptr || *keep == '\0' || db_path.empty()) return;
  std::error_code ec;
  const std::string to = std::string(keep) + "/failed-" + std::to_string(::getpid()) + ".edb";
  std::filesystem::copy_file(db_path, to, std::filesystem::copy_options::overwrite_existing, ec);
  std::fprintf(stderr, "[crash] kept the failing database as %s\n", to.c_str());
}

size_t RequireValidAfterCrash(Database* db, const std::string& db_path, uint64_t* in_use) {
  ValidationReport rep = ValueOr(db->Validate(ValidateOptions{}), "Validate");
  if (!rep.ok()) KeepForPostMortem(db_path);
  INFO("validation errors:\n" << Join(rep.errors));
  REQUIRE(rep.ok());
  if (in_use) *in_use = rep.pages_checked;
  if (rep.unreachable_pages.empty() && rep.orphan_blobs.empty()) return 0;
  // Orphan BLOBs (stored, but their record never reached disk) go with the unreachable pages.
  ValidationReport freed =
      ValueOr(db->Validate(ValidateOptions{true}), "Validate(free_unreachable)");
  INFO("errors while freeing:\n" << Join(freed.errors));
  REQUIRE(freed.ok());
  CHECK(freed.freed_pages == freed.unreachable_pages.size());
  CHECK(freed.orphan_blobs.size() == rep.orphan_blobs.size());
  ValidationReport again = ValueOr(db->Validate(ValidateOptions{}), "Validate after freeing");
  INFO("errors after freeing:\n" << Join(again.errors));
  REQUIRE(again.ok());
  CHECK(again.unreachable_pages.empty());
  CHECK(again.orphan_blobs.empty());
  if (in_use) *in_use = again.pages_checked;
  return rep.unreachable_pages.size();
}

}  // namespace ember::testing
