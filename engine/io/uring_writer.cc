// Batched writes through io_uring (see uring_writer.h).
#include "engine/io/uring_writer.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <vector>

namespace ember::io {
namespace {

// Set when io_uring_queue_init fails because the kernel or a seccomp filter refuses io_uring;
// retrying on every file open would only repeat the failing syscall.
std::atomic<bool> g_uring_refused{false};

// io_uring_prep_write takes an unsigned length; bigger requests are finished by resubmission.
constexpr size_t kMaxChunk = size_t{1} << 30;

struct Work {
  const WriteRequest* req;
  size_t done;
};

}  // namespace

std::unique_ptr<UringWriter> UringWriter::Create(unsigned depth) {
  if (g_uring_refused.load(std::memory_order_relaxed)) return nullptr;
  depth = std::clamp(depth, 1u, 4096u);
  std::unique_ptr<UringWriter> w(new UringWriter(depth));
  const int rc = io_uring_queue_init(depth, &w->ring_, 0);
  if (rc < 0) {
    // ENOMEM (memlock) may be transient; these mean "never here".
    if (rc == -ENOSYS || rc == -EPERM || rc == -EACCES) g_uring_refused.store(true);
    return nullptr;
  }
  return w;
}

UringWriter::~UringWriter() { io_uring_queue_exit(&ring_); }

std::optional<absl::Status> UringWriter::WriteBatch(int fd, const std::string& path,
                                                    std::span<const WriteRequest> reqs) {
  std::vector<Work> work;
  work.reserve(reqs.size());
  for (const WriteRequest& r : reqs) {
    if (r.len > 0) work.push_back({&r, 0});
  }
  // Indices into `work` still to be (re)submitted; short writes are pushed back here.
  std::vector<size_t> todo(work.size());
  for (size_t i = 0; i < todo.size(); ++i) todo[i] = work.size() - 1 - i;  // pop_back = in order

  std::lock_guard<std::mutex> lock(mu_);
  if (broken_) return std::nullopt;
  absl::Status first_error;
  unsigned inflight = 0;  // prepared SQEs whose CQE we have not reaped yet
  while (!todo.empty() || inflight > 0) {
    while (!todo.empty() && inflight < depth_) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr) break;
      const size_t i = todo.back();
      todo.pop_back();
      const Work& w = work[i];
      const size_t len = std::min(w.req->len - w.done, kMaxChunk);
      io_uring_prep_write(sqe, fd, static_cast<const char*>(w.req->data) + w.done,
                          static_cast<unsigned>(len), w.req->offset + w.done);
      io_uring_sqe_set_data64(sqe, i);
      ++inflight;
    }
    const int rc = io_uring_submit_and_wait(&ring_, 1);
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
      // The ring is in an unknown state. Requests the kernel already took still point into the
      // caller's buffers, so wait for those before returning; never use this ring again.
      broken_ = true;
      unsigned submitted = inflight - io_uring_sq_ready(&ring_);
      while (submitted > 0) {
        io_uring_cqe* cqe;
        const int wrc = io_uring_wait_cqe(&ring_, &cqe);
        if (wrc == -EINTR) continue;
        if (wrc < 0) break;
        io_uring_cqe_seen(&ring_, cqe);
        --submitted;
      }
      return ErrnoStatus(-rc, "io_uring_submit", path);
    }
    io_uring_cqe* cqe;
    while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
      const size_t i = static_cast<size_t>(io_uring_cqe_get_data64(cqe));
      const int res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      --inflight;
      Work& w = work[i];
      if (res == -EINTR || res == -EAGAIN) {
        todo.push_back(i);
      } else if (res <= 0) {
        // A zero-byte write for a non-empty request would otherwise resubmit forever.
        if (first_error.ok()) {
          first_error = ErrnoStatus(res < 0 ? -res : EIO, "pwrite", path, w.req->offset + w.done);
        }
      } else {
        w.done += static_cast<size_t>(res);
        if (w.done < w.req->len) todo.push_back(i);
      }
    }
  }
  return first_error;
}

}  // namespace ember::io
