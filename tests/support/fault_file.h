// A fault-injecting File for tests: wraps another File and can fail the Nth write, sync or read
// with EIO or ENOSPC, cut the Nth write short, and can simulate power loss by forgetting every
// write since the last Sync().
//
// The write faults act below the choice of write path: FaultFile installs itself as the write
// hook (write_hook.h) of the file it wraps, so a WriteBatch still goes through io_uring when the
// base file uses it, and each request is counted, failed or cut short just before it reaches the
// kernel, on either path. The base must take the hook (a PosixFile, or a wrapper that forwards
// SetWriteHook); over one that does not, every write fails with FailedPrecondition.
//
// Power-loss model: writes go to the wrapped file as usual, and the fault file remembers the
// previous on-disk contents of every range written since the last successful Sync(). DropUnsynced()
// restores those contents (newest undo first), so the wrapped file then holds exactly what the last
// Sync() made durable. A write still in flight when a Sync() starts stays undoable. Tests call it
// after "crashing" (abandoning the engine without Close).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "engine/io/file.h"
#include "engine/util/mutex.h"

namespace ember::io {

class FaultFile : public File, private WriteHook {
 public:
  explicit FaultFile(std::unique_ptr<File> base);
  ~FaultFile() override;

  // Fail the `n`th write (counting every Write and every request of a WriteBatch from now,
  // 1 = the next one) with `err` (EIO or ENOSPC); 0 disables. Later writes succeed again unless
  // `sticky` is set, in which case every write from the nth on fails (a full disk).
  void FailWriteAfter(uint64_t n, int err, bool sticky = false);
  // Fail the `n`th Sync() from now with `err`; 0 disables. With `sticky`, every Sync() from the
  // nth on fails (a device that stopped accepting flushes).
  void FailSyncAfter(uint64_t n, int err, bool sticky = false);
  // Fail the `n`th Read or ReadBlocks call from now with `err`; 0 disables; `sticky` as above.
  void FailReadAfter(uint64_t n, int err, bool sticky = false);
  // The `n`th write from now (counted as FailWriteAfter counts) transfers only `len` bytes in
  // its first kernel call, as a short write does; the file must write the rest itself. 0 disables.
  void ShortWriteAfter(uint64_t n, size_t len);
  // Undo every write made since the last successful Sync() (see the model above).
  absl::Status DropUnsynced();

  uint64_t writes() const { return writes_.load(); }
  uint64_t syncs() const { return syncs_.load(); }
  uint64_t reads() const { return reads_.load(); }

  absl::Status Read(uint64_t offset, void* buf, size_t len) override;
  absl::Status ReadBlocks(uint64_t offset, size_t block, std::span<uint8_t* const> bufs) override;
  absl::Status Write(uint64_t offset, const void* data, size_t len) override;
  absl::Status WriteBatch(std::span<const WriteRequest> reqs) override;
  absl::Status Sync() override;
  absl::Status Allocate(uint64_t size) override;
  absl::Status Truncate(uint64_t size) override;
  absl::StatusOr<uint64_t> Size() override;
  const std::string& path() const override { return base_->path(); }
  // The hook slot of the base is FaultFile's own.
  bool SetWriteHook(WriteHook*) override { return false; }
  WritePathCounts write_path_counts() const override { return base_->write_path_counts(); }

 private:
  // When a counted operation fails: the `at`th from the counter's value when armed, and with
  // `sticky` every later one too.
  struct Trigger {
    uint64_t at = 0;  // 0: never
    int err = 0;
    bool sticky = false;
    bool Fires(uint64_t n) const { return at != 0 && (n == at || (sticky && n > at)); }
  };
  struct Undo {
    uint64_t offset;
    std::string old_bytes;  // what was there before (may be shorter than the write: file end)
    bool in_flight;         // written after BeforeWrite, AfterWrite not heard yet
  };
  WriteVerdict BeforeWrite(uint64_t offset, const void* data, size_t len, WritePath path) override;
  void AfterWrite(uint64_t offset) override;
  absl::Status MaybeFailRead(uint64_t offset);
  absl::Status NotHooked() const;

  std::unique_ptr<File> base_;
  bool hooked_ = false;  // the base took this file as its write hook
  util::Mutex mu_;
  std::vector<Undo> undo_ ABSL_GUARDED_BY(mu_);
  uint64_t synced_size_ ABSL_GUARDED_BY(mu_) = 0;  // file size at the last sync
  Trigger write_fault_ ABSL_GUARDED_BY(mu_);
  Trigger sync_fault_ ABSL_GUARDED_BY(mu_);
  Trigger read_fault_ ABSL_GUARDED_BY(mu_);
  uint64_t short_write_at_ ABSL_GUARDED_BY(mu_) = 0;
  size_t short_write_len_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> writes_{0};
  std::atomic<uint64_t> syncs_{0};
  std::atomic<uint64_t> reads_{0};
};

}  // namespace ember::io
