// Read-only page access for the inspecting tools (page_reader.h).
#include "tools/common/page_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "engine/cache/doublewrite.h"
#include "engine/io/file.h"

namespace ember::tools {

namespace {
// Reads up to `n` bytes at `off` into `buf`, fewer only at the end of the file; *got: how many.
absl::Status ReadUpTo(int fd, const std::string& path, uint64_t off, uint8_t* buf, size_t n,
                      size_t* got) {
  *got = 0;
  while (*got < n) {
    const ssize_t k = ::pread(fd, buf + *got, n - *got, static_cast<off_t>(off + *got));
    if (k < 0) {
      if (errno == EINTR) continue;
      return io::ErrnoStatus(errno, "pread", path, off + *got);
    }
    if (k == 0) break;
    *got += static_cast<size_t>(k);
  }
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<std::unique_ptr<PageReader>> PageReader::Open(const std::string& path, int retries) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io::ErrnoStatus(errno, "open", path);
  std::unique_ptr<PageReader> r(new PageReader(fd, path, retries));
  struct stat st;
  if (::fstat(fd, &st) != 0) return io::ErrnoStatus(errno, "fstat", path);
  if (S_ISDIR(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(path, " is a directory"));
  std::vector<uint8_t> first(page::kMinPageSize);
  const ssize_t n = ::pread(fd, first.data(), first.size(), 0);
  if (n < 0) return io::ErrnoStatus(errno, "pread", path, 0);
  uint32_t ps = 0;
  if (absl::Status s = page::PeekPageSize(first.data(), static_cast<size_t>(n), &ps, path.c_str());
      !s.ok()) {
    return s;
  }
  r->header_.page_size = ps;
  cache::DwSource src;
  src.size = static_cast<uint64_t>(st.st_size);
  src.path = path;
  src.read = [fd, &path](uint64_t off, uint8_t* buf, size_t n) {
    size_t got = 0;
    absl::Status s = ReadUpTo(fd, path, off, buf, n, &got);
    std::fill(buf + got, buf + n, uint8_t{0});  // the file shrank meanwhile: zeros, as unwritten
    return s;
  };
  absl::StatusOr<absl::flat_hash_map<page::PageNo, std::vector<uint8_t>>> area =
      cache::ReadDoublewriteImages(src, ps);
  if (!area.ok()) return area.status();
  r->overlay_ = std::move(*area);
  std::vector<uint8_t> h(ps);
  if (absl::Status s = r->ReadPage(0, h.data()); !s.ok()) return s;
  if (absl::Status s = page::ReadHeader(h.data(), &r->header_, path.c_str()); !s.ok()) return s;
  return r;
}

PageReader::~PageReader() { ::close(fd_); }

uint64_t PageReader::FilePages() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_size) / page_size();
}

absl::Status PageReader::ReadPage(page::PageNo no, uint8_t* buf) {
  const uint32_t ps = page_size();
  if (auto it = overlay_.find(no); it != overlay_.end()) {
    std::memcpy(buf, it->second.data(), ps);
    return absl::OkStatus();
  }
  const uint64_t off = uint64_t{no} * ps;
  absl::Status last;
  for (int attempt = 0; attempt <= retries_; ++attempt) {
    if (attempt > 0) {
      ++rereads_;
      // Give a write in flight time to finish; growing waits, a few ms in all.
      std::this_thread::sleep_for(std::chrono::milliseconds(attempt));
    }
    size_t got = 0;
    if (absl::Status s = ReadUpTo(fd_, path_, off, buf, ps, &got); !s.ok()) return s;
    ++pages_read_;
    if (got < ps) {
      last = absl::OutOfRangeError(
          absl::StrCat("page ", no, " of ", path_, ": past the end of the file"));
      continue;  // the file may be growing under an extension
    }
    last = page::VerifyPage(buf, ps, no, path_.c_str());
    if (last.ok()) return last;
  }
  return last;
}

}  // namespace ember::tools
