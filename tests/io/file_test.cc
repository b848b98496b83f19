// PosixFile: open modes and their errors, positional I/O, WriteBatch through io_uring and through
// the pwrite loop (same bytes either way), concurrent batches, Allocate/Truncate/Size.
#include "engine/io/file.h"

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/io/uring_writer.h"
#include "tests/support/temp_dir.h"

using namespace ember::io;
using ember::testing::TempDir;

namespace {

constexpr size_t kPage = 8192;

std::unique_ptr<File> Open(const std::string& path, OpenMode mode, bool uring = true,
                           unsigned depth = 64) {
  FileOptions opts;
  opts.mode = mode;
  opts.use_io_uring = uring;
  opts.io_uring_depth = depth;
  auto f = OpenPosixFile(path, opts);
  REQUIRE(f.ok());
  return std::move(*f);
}

std::string ReadAll(File& f) {
  auto size = f.Size();
  REQUIRE(size.ok());
  std::string s(*size, '\0');
  REQUIRE(f.Read(0, s.data(), s.size()).ok());
  return s;
}

// Pages with a recognisable, page-specific pattern.
std::string PageContent(uint64_t page, uint64_t salt) {
  std::string s(kPage, '\0');
  std::mt19937_64 rng(page * 1000003 + salt);
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

}  // namespace

TEST_CASE("file: open modes and their errors", "[io][file]") {
  TempDir dir;
  REQUIRE(dir.ok());
  const std::string path = dir.File("db.edb");
  FileOptions opts;

  opts.mode = OpenMode::kOpenExisting;
  auto missing = OpenPosixFile(path, opts);
  REQUIRE(absl::IsNotFound(missing.status()));
  CHECK(missing.status().message().find(path) != absl::string_view::npos);
  CHECK_FALSE(FileExists(path));

  opts.mode = OpenMode::kCreateNew;
  REQUIRE(OpenPosixFile(path, opts).ok());
  CHECK(FileExists(path));
  auto again = OpenPosixFile(path, opts);
  CHECK(absl::IsAlreadyExists(again.status()));
  CHECK(again.status().message().find(path) != absl::string_view::npos);

  opts.mode = OpenMode::kOpenExisting;
  CHECK(OpenPosixFile(path, opts).ok());
  opts.mode = OpenMode::kOpenOrCreate;
  CHECK(OpenPosixFile(path, opts).ok());
  CHECK(OpenPosixFile(dir.File("other.edb"), opts).ok());
  CHECK(FileExists(dir.File("other.edb")));

  REQUIRE(RemoveFile(path).ok());
  CHECK_FALSE(FileExists(path));
  CHECK(RemoveFile(path).ok());  // already gone is fine

  if (::geteuid() != 0) {  // root ignores permission bits
    const std::string locked = dir.File("locked.edb");
    opts.mode = OpenMode::kCreateNew;
    REQUIRE(OpenPosixFile(locked, opts).ok());
    REQUIRE(::chmod(locked.c_str(), 0) == 0);
    opts.mode = OpenMode::kOpenExisting;
    CHECK(absl::IsPermissionDenied(OpenPosixFile(locked, opts).status()));
  }
}

TEST_CASE("file: errno mapping names op, path and offset", "[io][file]") {
  absl::Status s = ErrnoStatus(ENOSPC, "pwrite", "/path/db.edb", 8192);
  CHECK(absl::IsResourceExhausted(s));
  CHECK(s.message() == "pwrite /path/db.edb at offset 8192: No space left on device");
  s = ErrnoStatus(EIO, "fdatasync", "/path/db.edb");
  CHECK(absl::IsInternal(s));
  CHECK(s.message() == "fdatasync /path/db.edb: Input/output error");
  CHECK(absl::IsNotFound(ErrnoStatus(ENOENT, "open", "x")));
  CHECK(absl::IsAlreadyExists(ErrnoStatus(EEXIST, "open", "x")));
  CHECK(absl::IsPermissionDenied(ErrnoStatus(EACCES, "open", "x")));
  CHECK(absl::IsPermissionDenied(ErrnoStatus(EPERM, "open", "x")));
  CHECK(absl::IsInternal(ErrnoStatus(EBADF, "open", "x")));
}

TEST_CASE("file: write, read back, size, read past end", "[io][file]") {
  TempDir dir;
  REQUIRE(dir.ok());
  auto f = Open(dir.File("db.edb"), OpenMode::kCreateNew);
  CHECK(*f->Size() == 0);

  const std::string a = PageContent(0, 1), b = PageContent(1, 1);
  REQUIRE(f->Write(0, a.data(), a.size()).ok());
  REQUIRE(f->Write(2 * kPage, b.data(), b.size()).ok());  // leaves a hole
  CHECK(*f->Size() == 3 * kPage);
  std::string got(kPage, '\0');
  REQUIRE(f->Read(2 * kPage, got.data(), kPage).ok());
  CHECK(got == b);
  REQUIRE(f->Read(kPage, got.data(), kPage).ok());
  CHECK(got == std::string(kPage, '\0'));
  REQUIRE(f->Sync().ok());
  CHECK(f->Write(0, nullptr, 0).ok());

  absl::Status past = f->Read(3 * kPage, got.data(), kPage);
  CHECK(absl::IsOutOfRange(past));
  CHECK(past.message().find(f->path()) != absl::string_view::npos);
  CHECK(past.message().find(std::to_string(3 * kPage)) != absl::string_view::npos);
  // Straddling the end is an error too, not a short read.
  CHECK(absl::IsOutOfRange(f->Read(3 * kPage - 10, got.data(), 20)));

  // Reopening sees the same bytes.
  f.reset();
  f = Open(dir.File("db.edb"), OpenMode::kOpenExisting);
  REQUIRE(f->Read(0, got.data(), kPage).ok());
  CHECK(got == a);
}

TEST_CASE("file: write errors carry errno status", "[io][file]") {
  // /dev/full fails every write with ENOSPC: a disk that is full, for both write paths.
  if (!FileExists("/dev/full")) return;
  const std::string page(kPage, 'x');
  for (bool uring : {true, false}) {
    auto f = Open("/dev/full", OpenMode::kOpenExisting, uring);
    absl::Status s = f->Write(8192, page.data(), page.size());
    CHECK(absl::IsResourceExhausted(s));
    CHECK(s.message() == "pwrite /dev/full at offset 8192: No space left on device");
    std::vector<WriteRequest> reqs = {{0, page.data(), kPage}, {kPage, page.data(), kPage}};
    CHECK(absl::IsResourceExhausted(f->WriteBatch(reqs)));
  }
}

TEST_CASE("file: WriteBatch gives the same file with and without io_uring", "[io][file]") {
  TempDir dir;
  REQUIRE(dir.ok());
  if (UringWriter::Create(8) == nullptr) WARN("io_uring unavailable here: both runs use pwrite");

  // ~1000 pages scattered over a 4000-page range, in random order, one batch.
  std::mt19937_64 rng(2024);
  std::vector<uint64_t> pages(4000);
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng);
  pages.resize(1000);
  std::vector<std::string> contents;
  std::vector<WriteRequest> reqs;
  for (uint64_t p : pages) contents.push_back(PageContent(p, 7));
  for (size_t i = 0; i < pages.size(); ++i) {
    reqs.push_back({pages[i] * kPage, contents[i].data(), kPage});
  }

  struct Variant {
    const char* name;
    bool uring;
    unsigned depth;
  };
  std::vector<std::string> results;
  for (Variant v : {Variant{"uring.edb", true, 64}, Variant{"uring4.edb", true, 4},
                    Variant{"pwrite.edb", false, 64}}) {
    auto f = Open(dir.File(v.name), OpenMode::kCreateNew, v.uring, v.depth);
    REQUIRE(f->WriteBatch(reqs).ok());
    REQUIRE(f->WriteBatch({}).ok());
    std::string got(kPage, '\0');
    for (size_t i = 0; i < pages.size(); i += 37) {
      REQUIRE(f->Read(pages[i] * kPage, got.data(), kPage).ok());
      REQUIRE(got == contents[i]);
    }
    results.push_back(ReadAll(*f));
  }
  CHECK(results[0].size() == (*std::max_element(pages.begin(), pages.end()) + 1) * kPage);
  CHECK(results[0] == results[1]);
  CHECK(results[0] == results[2]);
}

TEST_CASE("file: concurrent WriteBatch to disjoint ranges", "[io][file]") {
  TempDir dir;
  REQUIRE(dir.ok());
  for (bool uring : {true, false}) {
    auto f = Open(dir.File(uring ? "uring.edb" : "pwrite.edb"), OpenMode::kCreateNew, uring, 16);
    constexpr int kThreads = 4, kPagesPerThread = 200, kBatch = 25;
    std::vector<std::thread> threads;
    std::vector<absl::Status> status(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::vector<std::string> contents;
        for (int i = 0; i < kPagesPerThread; ++i) contents.push_back(PageContent(t * 1000 + i, 3));
        for (int start = 0; start < kPagesPerThread && status[t].ok(); start += kBatch) {
          std::vector<WriteRequest> reqs;
          for (int i = start; i < start + kBatch; ++i) {
            // Interleave the threads' pages so neighbouring pages belong to different threads.
            reqs.push_back(
                {static_cast<uint64_t>(i * kThreads + t) * kPage, contents[i].data(), kPage});
          }
          status[t] = f->WriteBatch(reqs);
        }
      });
    }
    for (auto& th : threads) th.join();
    for (const absl::Status& s : status) REQUIRE(s.ok());
    std::string got(kPage, '\0');
    for (int t = 0; t < kThreads; ++t) {
      for (int i = 0; i < kPagesPerThread; ++i) {
        REQUIRE(f->Read(static_cast<uint64_t>(i * kThreads + t) * kPage, got.data(), kPage).ok());
        REQUIRE(got == PageContent(t * 1000 + i, 3));
      }
    }
  }
}

TEST_CASE("file: Allocate and Truncate", "[io][file]") {
  TempDir dir;
  REQUIRE(dir.ok());
  auto f = Open(dir.File("db.edb"), OpenMode::kCreateNew);
  const std::string a = PageContent(0, 9);
  REQUIRE(f->Write(0, a.data(), a.size()).ok());

  REQUIRE(f->Allocate(16 * kPage).ok());
  CHECK(*f->Size() == 16 * kPage);
  std::string got(kPage, '\0');
  REQUIRE(f->Read(0, got.data(), kPage).ok());
  CHECK(got == a);  // allocation keeps existing data
  REQUIRE(f->Read(15 * kPage, got.data(), kPage).ok());
  CHECK(got == std::string(kPage, '\0'));
  REQUIRE(f->Allocate(4 * kPage).ok());
  CHECK(*f->Size() == 16 * kPage);  // never shrinks
  REQUIRE(f->Allocate(0).ok());

  REQUIRE(f->Truncate(kPage / 2).ok());
  CHECK(*f->Size() == kPage / 2);
  CHECK(absl::IsOutOfRange(f->Read(0, got.data(), kPage)));
  REQUIRE(f->Read(0, got.data(), kPage / 2).ok());
  CHECK(got.compare(0, kPage / 2, a, 0, kPage / 2) == 0);
  REQUIRE(f->Truncate(2 * kPage).ok());  // grows with zeros
  CHECK(*f->Size() == 2 * kPage);
  REQUIRE(f->Read(kPage, got.data(), kPage).ok());
  CHECK(got == std::string(kPage, '\0'));
}
