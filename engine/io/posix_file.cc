// The real File: pread/pwrite on a file descriptor, with WriteBatch through io_uring when the
// kernel allows it (uring_writer.h) and a pwrite loop otherwise.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "engine/io/file.h"
#include "engine/io/uring_writer.h"
#include "engine/util/mutex.h"

namespace ember::io {
namespace {

// Linux never transfers more than this per call; asking for less keeps the loops' arithmetic
// obvious.
constexpr size_t kMaxIo = 0x7ffff000;

class PosixFile : public File {
 public:
  PosixFile(int fd, std::string path, const FileOptions& opts)
      : fd_(fd), path_(std::move(path)), opts_(opts) {}
  ~PosixFile() override { ::close(fd_); }

  absl::Status Read(uint64_t offset, void* buf, size_t len) override;
  absl::Status ReadBlocks(uint64_t offset, size_t block, std::span<uint8_t* const> bufs) override;
  absl::Status Write(uint64_t offset, const void* data, size_t len) override;
  absl::Status WriteBatch(std::span<const WriteRequest> reqs) override;
  absl::Status Sync() override;
  absl::Status Allocate(uint64_t size) override;
  absl::Status Truncate(uint64_t size) override;
  absl::StatusOr<uint64_t> Size() override;
  const std::string& path() const override { return path_; }
  bool SetWriteHook(WriteHook* hook) override {
    hook_.store(hook);
    return true;
  }
  WritePathCounts write_path_counts() const override;

 private:
  // The pwrite loop of one request: the first call transfers at most `first_len` bytes (a short
  // write injected by a hook), the loop writes the rest.
  absl::Status WriteAll(uint64_t offset, const void* data, size_t len, size_t first_len);
  // The ring is created on the first WriteBatch, so files that never batch cost no ring.
  UringWriter* Ring();

  const int fd_;
  const std::string path_;
  const FileOptions opts_;
  std::atomic<WriteHook*> hook_{nullptr};
  std::atomic<uint64_t> pwrite_requests_{0};
  mutable util::Mutex ring_mu_;
  bool ring_tried_ ABSL_GUARDED_BY(ring_mu_) = false;
  std::unique_ptr<UringWriter> ring_ ABSL_GUARDED_BY(ring_mu_);  // the writer locks itself
};

absl::Status PosixFile::Read(uint64_t offset, void* buf, size_t len) {
  auto* p = static_cast<char*>(buf);
  size_t done = 0;
  while (done < len) {
    const ssize_t n =
        ::pread(fd_, p + done, std::min(len - done, kMaxIo), static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "pread", path_, offset + done);
    }
    if (n == 0) {
      return absl::OutOfRangeError(absl::StrCat("read past end of file ", path_, " at offset ",
                                                offset, " (", len, " bytes wanted, ", done,
                                                " available)"));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status PosixFile::ReadBlocks(uint64_t offset, size_t block, std::span<uint8_t* const> bufs) {
  std::vector<iovec> iov(bufs.size());
  for (size_t i = 0; i < bufs.size(); ++i) iov[i] = iovec{bufs[i], block};
  size_t first = 0;  // first block not yet read whole
  while (first < iov.size()) {
    const int cnt = static_cast<int>(std::min<size_t>(iov.size() - first, IOV_MAX));
    const ssize_t n =
        ::preadv(fd_, iov.data() + first, cnt, static_cast<off_t>(offset + first * block));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "preadv", path_, offset + first * block);
    }
    const size_t whole = static_cast<size_t>(n) / block;
    first += whole;
    if (static_cast<size_t>(n) % block != 0 || n == 0) {
      // A short read: the rest block by block, which also reports an end of file.
      for (; first < iov.size(); ++first) {
        if (absl::Status s = Read(offset + first * block, bufs[first], block); !s.ok()) return s;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status PosixFile::Write(uint64_t offset, const void* data, size_t len) {
  size_t first_len = len;
  if (WriteHook* hook = hook_.load(); hook != nullptr && len > 0) {
    const WriteVerdict v = hook->BeforeWrite(offset, data, len, WritePath::kPwrite);
    if (v.error != 0) return ErrnoStatus(v.error, "pwrite", path_, offset);
    first_len = std::clamp<size_t>(v.short_len, 1, len);
  }
  pwrite_requests_.fetch_add(1, std::memory_order_relaxed);
  absl::Status s = WriteAll(offset, data, len, first_len);
  if (WriteHook* hook = hook_.load(); hook != nullptr && len > 0) hook->AfterWrite(offset);
  return s;
}

absl::Status PosixFile::WriteAll(uint64_t offset, const void* data, size_t len, size_t first_len) {
  const auto* p = static_cast<const char*>(data);
  size_t done = 0;
  while (done < len) {
    const size_t want = std::min(done == 0 ? first_len : len - done, kMaxIo);
    const ssize_t n = ::pwrite(fd_, p + done, want, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "pwrite", path_, offset + done);
    }
    // Zero bytes written for a non-empty request would loop forever.
    if (n == 0) return ErrnoStatus(EIO, "pwrite", path_, offset + done);
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

UringWriter* PosixFile::Ring() {
  if (!opts_.use_io_uring) return nullptr;
  util::MutexLock lock(ring_mu_);
  if (!ring_tried_) {
    ring_tried_ = true;
    ring_ = UringWriter::Create(opts_.io_uring_depth);
  }
  return ring_.get();
}

absl::Status PosixFile::WriteBatch(std::span<const WriteRequest> reqs) {
  if (UringWriter* ring = Ring()) {
    if (std::optional<absl::Status> s = ring->WriteBatch(fd_, path_, reqs, hook_.load())) {
      return *s;
    }
  }
  // Every request is attempted, as on the io_uring path, so both paths leave the same bytes
  // behind a failed request.
  absl::Status first;
  for (const WriteRequest& r : reqs) {
    absl::Status s = Write(r.offset, r.data, r.len);
    if (first.ok()) first = std::move(s);
  }
  return first;
}

WritePathCounts PosixFile::write_path_counts() const {
  WritePathCounts c;
  c.pwrite = pwrite_requests_.load(std::memory_order_relaxed);
  util::MutexLock lock(ring_mu_);
  if (ring_ != nullptr) c.io_uring = ring_->requests_written();
  return c;
}

absl::Status PosixFile::Sync() {
  while (::fdatasync(fd_) != 0) {
    if (errno != EINTR) return ErrnoStatus(errno, "fdatasync", path_);
  }
  return absl::OkStatus();
}

absl::Status PosixFile::Allocate(uint64_t size) {
  if (size == 0) return absl::OkStatus();
  int rc;
  while ((rc = ::fallocate(fd_, 0, 0, static_cast<off_t>(size))) != 0 && errno == EINTR) {
  }
  if (rc == 0) return absl::OkStatus();
  if (errno != EOPNOTSUPP && errno != ENOSYS) return ErrnoStatus(errno, "fallocate", path_);

  // The file system cannot preallocate (tmpfs of old kernels, some FUSE): extend with zeros so
  // later page writes at least find the space reserved.
  absl::StatusOr<uint64_t> cur = Size();
  if (!cur.ok()) return cur.status();
  const std::vector<char> zeros(std::min<uint64_t>(size - std::min(*cur, size), 1 << 20), 0);
  for (uint64_t off = *cur; off < size; off += zeros.size()) {
    // Not through the hook: preallocation is not one of the engine's page writes.
    const size_t n = std::min<uint64_t>(zeros.size(), size - off);
    absl::Status s = WriteAll(off, zeros.data(), n, n);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status PosixFile::Truncate(uint64_t size) {
  while (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    if (errno != EINTR) return ErrnoStatus(errno, "ftruncate", path_, size);
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> PosixFile::Size() {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return ErrnoStatus(errno, "fstat", path_);
  return static_cast<uint64_t>(st.st_size);
}

}  // namespace

absl::StatusOr<std::unique_ptr<File>> OpenPosixFile(const std::string& path,
                                                    const FileOptions& opts) {
  int flags = O_RDWR | O_CLOEXEC;
  switch (opts.mode) {
    case OpenMode::kOpenExisting: break;
    case OpenMode::kCreateNew: flags |= O_CREAT | O_EXCL; break;
    case OpenMode::kOpenOrCreate: flags |= O_CREAT; break;
  }
  int fd;
  while ((fd = ::open(path.c_str(), flags, 0644)) < 0) {
    if (errno != EINTR) return ErrnoStatus(errno, "open", path);
  }
  return std::unique_ptr<File>(new PosixFile(fd, path, opts));
}

absl::Status ErrnoStatus(int err, std::string_view op_sv, std::string_view path_sv,
                         uint64_t offset) {
  // Debian's Abseil has its own string_view, which StrCat needs.
  const absl::string_view op(op_sv.data(), op_sv.size());
  const absl::string_view path(path_sv.data(), path_sv.size());
  char buf[256];
  // GNU strerror_r: thread-safe, returns the message (not necessarily in buf).
  const char* msg = ::strerror_r(err, buf, sizeof(buf));
  std::string text = offset == UINT64_MAX
                         ? absl::StrCat(op, " ", path, ": ", msg)
                         : absl::StrCat(op, " ", path, " at offset ", offset, ": ", msg);
  switch (err) {
    case ENOSPC:
    case EDQUOT: return absl::ResourceExhaustedError(text);
    case ENOENT: return absl::NotFoundError(text);
    case EEXIST: return absl::AlreadyExistsError(text);
    case EISDIR: return absl::InvalidArgumentError(text);  // a directory where a file belongs
    case EACCES:
    case EPERM: return absl::PermissionDeniedError(text);
    default: return absl::InternalError(text);
  }
}

absl::Status RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus(errno, "unlink", path);
  return absl::OkStatus();
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace ember::io
