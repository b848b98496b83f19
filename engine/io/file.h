// The file abstraction every database page goes through: positional reads and writes, fsync,
// preallocation, and a batched write of many pages at once (io_uring where the kernel allows it).
// `File` is an interface so tests can put a fault-injecting file under the engine
// (tests/support/fault_file.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/io/write_hook.h"

namespace ember::io {

// One write of a batch: `len` bytes from `data` at byte `offset`.
struct WriteRequest {
  uint64_t offset;
  const void* data;
  size_t len;
};

// Thread safety: every method may be called from many threads at once (pread/pwrite semantics);
// callers make sure they do not write the same bytes concurrently.
class File {
 public:
  virtual ~File() = default;
  // Reads exactly `len` bytes at `offset`. Reading past the end is an OutOfRange error naming
  // the file and the offset (a truncated database), not a short read.
  virtual absl::Status Read(uint64_t offset, void* buf, size_t len) = 0;
  // Reads `bufs.size()` consecutive blocks of `block` bytes starting at `offset`, block i into
  // bufs[i] (one preadv where the file supports it). Same errors as Read.
  virtual absl::Status ReadBlocks(uint64_t offset, size_t block, std::span<uint8_t* const> bufs) {
    for (size_t i = 0; i < bufs.size(); ++i) {
      if (absl::Status s = Read(offset + i * block, bufs[i], block); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  virtual absl::Status Write(uint64_t offset, const void* data, size_t len) = 0;
  // Writes all requests; order among them is not defined. Returns the first error.
  virtual absl::Status WriteBatch(std::span<const WriteRequest> reqs) = 0;
  // fdatasync.
  virtual absl::Status Sync() = 0;
  // Makes sure [0, size) is allocated (fallocate, falling back to extending writes).
  virtual absl::Status Allocate(uint64_t size) = 0;
  virtual absl::Status Truncate(uint64_t size) = 0;
  virtual absl::StatusOr<uint64_t> Size() = 0;
  virtual const std::string& path() const = 0;

  // For tests (write_hook.h): installs `hook` (null removes it), which must outlive the file or
  // its removal. Returns false when this file cannot run one (a wrapper must forward both calls
  // to the file below it, a PosixFile runs it).
  virtual bool SetWriteHook(WriteHook* /*hook*/) { return false; }
  // Which path the writes really took, so a test that claims io_uring can check it.
  virtual WritePathCounts write_path_counts() const { return {}; }
};

enum class OpenMode { kOpenExisting, kCreateNew, kOpenOrCreate };

struct FileOptions {
  OpenMode mode = OpenMode::kOpenExisting;
  bool use_io_uring = true;      // WriteBatch through io_uring; pwrite loop when false/unavailable
  unsigned io_uring_depth = 64;  // submission queue entries
};

// Opens a real file. Errors: NotFound (no such file), AlreadyExists (kCreateNew on an existing
// file), PermissionDenied, or Internal with strerror, always naming the path.
absl::StatusOr<std::unique_ptr<File>> OpenPosixFile(const std::string& path,
                                                    const FileOptions& opts);

// Converts an errno into a Status naming the operation and path ("pwrite db.edb at 8192: No space
// left on device"); ENOSPC becomes ResourceExhausted, ENOENT NotFound, EACCES PermissionDenied,
// EISDIR InvalidArgument, EIO -> Internal.
absl::Status ErrnoStatus(int err, std::string_view op, std::string_view path,
                         uint64_t offset = UINT64_MAX);

// Removes a file; NotFound is not an error.
absl::Status RemoveFile(const std::string& path);
bool FileExists(const std::string& path);

}  // namespace ember::io
