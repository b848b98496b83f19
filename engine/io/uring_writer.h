// The io_uring ring behind PosixFile::WriteBatch. Kept apart from posix_file.cc so the ring's
// submission/completion bookkeeping (chunking by queue depth, short-write resubmission) stays in
// one small place.
#pragma once
#include <liburing.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "engine/io/file.h"
#include "engine/util/mutex.h"

namespace ember::io {

class UringWriter {
 public:
  // Null when io_uring is unavailable (old kernel, seccomp, memlock limits): callers then use
  // pwrite instead. Once the kernel has refused io_uring outright, later calls do not retry.
  static std::unique_ptr<UringWriter> Create(unsigned depth);
  ~UringWriter();
  UringWriter(const UringWriter&) = delete;
  UringWriter& operator=(const UringWriter&) = delete;

  // Writes every request to `fd`, waiting for all of them; returns the first error. Safe to call
  // from several threads (batches take turns on the ring). `path` is only for error messages.
  // nullopt means the ring broke earlier and nothing was written: the caller must use pwrite.
  // `hook` (may be null) is asked about every request before anything is submitted
  // (write_hook.h); a request it fails is not submitted, a short one is cut in its first writev.
  std::optional<absl::Status> WriteBatch(int fd, const std::string& path,
                                         std::span<const WriteRequest> reqs, WriteHook* hook);
  // Requests submitted through the ring so far.
  uint64_t requests_written() const { return requests_written_.load(std::memory_order_relaxed); }

 private:
  explicit UringWriter(unsigned depth) : depth_(depth) {}

  const unsigned depth_;
  util::Mutex mu_;
  io_uring ring_ ABSL_GUARDED_BY(mu_){};
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> requests_written_{0};
};

}  // namespace ember::io
