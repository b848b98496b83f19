// Fault injection below the choice of write path. PosixFile asks a WriteHook about every write
// request before the request reaches the kernel, whether it goes through the pwrite loop or an
// io_uring writev, so a test's injected failures, short writes and recorded pre-images (the
// power-loss models of tests/support/fault_file.h and reorder_file.h) apply to the path users
// run (io_uring by default) as much as to the fallback. Production files have no hook.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ember::io {

enum class WritePath { kPwrite, kIoUring };

// What happens to one write request.
struct WriteVerdict {
  int error = 0;  // nonzero: the request fails with this errno and nothing of it is written
  // Smaller than the request: the kernel's first write call for it transfers only this many bytes
  // (at least 1), as a real short write would; the file's own loop must write the rest.
  size_t short_len = SIZE_MAX;
};

// Requests the file wrote through each path (requests of a WriteBatch, and Write calls).
struct WritePathCounts {
  uint64_t pwrite = 0;
  uint64_t io_uring = 0;
};

// Called from whatever thread writes; the file makes no call into the hook concurrently for
// overlapping ranges (callers never write the same bytes concurrently), but may for others.
class WriteHook {
 public:
  virtual ~WriteHook() = default;
  // One request (a Write call, or one request of a WriteBatch), before any byte of it is written:
  // `data` holds the `len` bytes about to go to `offset`, and the file still holds the old ones.
  virtual WriteVerdict BeforeWrite(uint64_t offset, const void* data, size_t len,
                                   WritePath path) = 0;
  // The request BeforeWrite let through at `offset` has been written (or failed in the kernel):
  // a Sync() from now on covers it. A Sync() that starts earlier may or may not.
  virtual void AfterWrite(uint64_t offset) = 0;
};

}  // namespace ember::io
