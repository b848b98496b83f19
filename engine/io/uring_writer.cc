// Batched writes through io_uring (see uring_writer.h).
#include "engine/io/uring_writer.h"

#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <vector>

namespace ember::io {
namespace {

// Set when io_uring_queue_init fails because the kernel or a seccomp filter refuses io_uring;
// retrying on every file open would only repeat the failing syscall.
std::atomic<bool> g_uring_refused{false};

// A writev SQE's length is a signed int in the kernel's accounting; runs stay well below it.
constexpr size_t kMaxRunBytes = size_t{1} << 30;
// Iovecs per writev (at most the kernel's UIO_MAXIOV of 1024). Fewer: a buffered write the
// kernel hands to an io-wq worker is copied by that one worker, so a large contiguous flush
// (a BLOB, an eviction round) split into several requests is copied by several workers at once.
// And not much more than 128 KB: Linux (6.x, ext4 with large folios) caches a big buffered write
// in folios as big as the write, and a later single-page write into one of them makes the next
// fsync walk and write back the whole folio: with 1 MB runs, small update transactions after a
// bulk load wrote the same pages far more slowly, and the load itself gained little.
constexpr size_t kMaxRunIovs = 16;

// Requests for adjacent file ranges, written by one writev. After a short write, `first` and
// the iovec it points at are advanced past what was written.
struct Run {
  uint64_t offset;
  size_t first;  // index of its first iovec not (fully) written
  size_t end;    // one past its last iovec
  size_t left;   // bytes not written yet
  size_t cut =
      0;  // nonzero: the first writev submits only this many bytes (an injected short write)
  std::vector<iovec> cut_iovs;  // the iovecs of that first writev
};

// A request to write, and how many bytes its first write may transfer (SIZE_MAX: all).
struct Pending {
  const WriteRequest* req;
  size_t short_len;
};

// The iovecs of the run's next writev: all it has left, or the first `run.cut` bytes of them.
std::span<const iovec> NextIovecs(Run& run, std::vector<iovec>& iovs) {
  std::span<const iovec> all(&iovs[run.first], run.end - run.first);
  if (run.cut == 0) return all;
  run.cut_iovs.clear();
  for (size_t left = run.cut; const iovec& v : all) {
    if (left == 0) break;
    const size_t n = std::min(left, v.iov_len);
    run.cut_iovs.push_back({v.iov_base, n});
    left -= n;
  }
  run.cut = 0;
  return run.cut_iovs;
}
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
                                                    std::span<const WriteRequest> reqs,
                                                    WriteHook* hook) {
  absl::Status first_error;
  std::vector<Pending> sorted;
  sorted.reserve(reqs.size());
  for (const WriteRequest& r : reqs) {
    if (r.len == 0) continue;
    size_t short_len = SIZE_MAX;
    if (hook != nullptr) {
      // Asked before the ring is checked: if the ring turns out broken, the hook hears the
      // requests are over and the pwrite fallback asks again (a test's hook; none breaks a ring).
      const WriteVerdict v = hook->BeforeWrite(r.offset, r.data, r.len, WritePath::kIoUring);
      if (v.error != 0) {
        if (first_error.ok()) first_error = ErrnoStatus(v.error, "pwrite", path, r.offset);
        continue;
      }
      if (v.short_len < r.len) short_len = std::max<size_t>(v.short_len, 1);
    }
    sorted.push_back({&r, short_len});
  }
  // Coalesced by file offset: a flush of pages allocated together (a bulk load, a BLOB) becomes
  // a few large writev requests instead of one request per page, and each request a buffered
  // write may hand to a kernel worker costs a round trip.
  std::stable_sort(sorted.begin(), sorted.end(), [](const Pending& a, const Pending& b) {
    return a.req->offset < b.req->offset;
  });
  auto tell_hook_written = [&] {
    if (hook == nullptr) return;
    for (const Pending& p : sorted) hook->AfterWrite(p.req->offset);
  };
  std::vector<iovec> iovs;
  iovs.reserve(sorted.size());
  std::vector<Run> runs;
  for (const Pending& p : sorted) {
    const WriteRequest* r = p.req;
    const bool cut = p.short_len != SIZE_MAX;
    Run* last = runs.empty() ? nullptr : &runs.back();
    // A request cut short starts a run, so its cut is where the run's first writev ends.
    const bool joins = last && !cut && last->offset + last->left == r->offset &&
                       last->end - last->first < kMaxRunIovs && last->left + r->len <= kMaxRunBytes;
    if (!joins) runs.push_back({r->offset, iovs.size(), iovs.size(), 0, cut ? p.short_len : 0, {}});
    iovs.push_back({const_cast<void*>(r->data), r->len});
    runs.back().end = iovs.size();
    runs.back().left += r->len;
  }
  // Indices into `runs` still to be (re)submitted; short writes are pushed back here.
  std::vector<size_t> todo(runs.size());
  for (size_t i = 0; i < todo.size(); ++i) todo[i] = runs.size() - 1 - i;  // pop_back = in order
  util::MutexLock lock(mu_);
  if (broken_) {
    tell_hook_written();
    return std::nullopt;
  }
  requests_written_.fetch_add(sorted.size(), std::memory_order_relaxed);
  unsigned inflight = 0;  // prepared SQEs whose CQE we have not reaped yet
  while (!todo.empty() || inflight > 0) {
    while (!todo.empty() && inflight < depth_) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr) break;
      const size_t i = todo.back();
      todo.pop_back();
      Run& run = runs[i];
      const std::span<const iovec> v = NextIovecs(run, iovs);
      io_uring_prep_writev(sqe, fd, v.data(), static_cast<unsigned>(v.size()), run.offset);
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
      tell_hook_written();
      return ErrnoStatus(-rc, "io_uring_submit", path);
    }
    io_uring_cqe* cqe;
    while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
      const size_t i = static_cast<size_t>(io_uring_cqe_get_data64(cqe));
      const int res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      --inflight;
      Run& run = runs[i];
      if (res == -EINTR || res == -EAGAIN) {
        todo.push_back(i);
      } else if (res <= 0) {
        // A zero-byte write for a non-empty request would otherwise resubmit forever.
        if (first_error.ok()) {
          first_error = ErrnoStatus(res < 0 ? -res : EIO, "pwrite", path, run.offset);
        }
      } else {
        size_t n = static_cast<size_t>(res);
        run.offset += n;
        run.left -= std::min(n, run.left);
        while (n > 0 && run.first < run.end) {  // skip what was written
          iovec& v = iovs[run.first];
          const size_t k = std::min(n, v.iov_len);
          v.iov_base = static_cast<char*>(v.iov_base) + k;
          v.iov_len -= k;
          n -= k;
          if (v.iov_len == 0) ++run.first;
        }
        if (run.left > 0) todo.push_back(i);
      }
    }
  }
  tell_hook_written();
  return first_error;
}

}  // namespace ember::io
