// A fault-injecting File for tests: wraps another File and can fail the Nth write or sync with
// EIO or ENOSPC, and can simulate power loss by forgetting every write since the last Sync().
//
// Power-loss model: writes go to the wrapped file as usual, and the fault file remembers the
// previous on-disk contents of every range written since the last successful Sync(). DropUnsynced()
// restores those contents (newest undo first), so the wrapped file then holds exactly what the last
// Sync() made durable. Tests call it after "crashing" (abandoning the engine without Close).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/io/file.h"

namespace ember::io {

class FaultFile : public File {
 public:
  explicit FaultFile(std::unique_ptr<File> base);

  // Fail the `n`th write (counting every Write and every request of a WriteBatch from now,
  // 1 = the next one) with `err` (EIO or ENOSPC); 0 disables. Later writes succeed again unless
  // `sticky` is set, in which case every write from the nth on fails (a full disk).
  void FailWriteAfter(uint64_t n, int err, bool sticky = false);
  // Fail the `n`th Sync() from now with `err`; 0 disables. With `sticky`, every Sync() from the
  // nth on fails (a device that stopped accepting flushes).
  void FailSyncAfter(uint64_t n, int err, bool sticky = false);
  // Undo every write made since the last successful Sync() (see the model above).
  absl::Status DropUnsynced();

  uint64_t writes() const { return writes_.load(); }
  uint64_t syncs() const { return syncs_.load(); }

  absl::Status Read(uint64_t offset, void* buf, size_t len) override;
  absl::Status ReadBlocks(uint64_t offset, size_t block, std::span<uint8_t* const> bufs) override {
    return base_->ReadBlocks(offset, block, bufs);
  }
  absl::Status Write(uint64_t offset, const void* data, size_t len) override;
  absl::Status WriteBatch(std::span<const WriteRequest> reqs) override;
  absl::Status Sync() override;
  absl::Status Allocate(uint64_t size) override;
  absl::Status Truncate(uint64_t size) override;
  absl::StatusOr<uint64_t> Size() override;
  const std::string& path() const override { return base_->path(); }

 private:
  struct Undo {
    uint64_t offset;
    std::string old_bytes;  // what was there before (may be shorter than the write: file end)
  };
  absl::Status MaybeFailWrite(uint64_t offset);

  std::unique_ptr<File> base_;
  std::mutex mu_;
  std::vector<Undo> undo_;          // guarded by mu_
  uint64_t synced_size_ = 0;        // guarded by mu_: file size at the last sync
  uint64_t fail_write_at_ = 0;      // guarded by mu_
  int fail_write_err_ = 0;          // guarded by mu_
  bool fail_write_sticky_ = false;  // guarded by mu_
  uint64_t fail_sync_at_ = 0;       // guarded by mu_
  int fail_sync_err_ = 0;           // guarded by mu_
  bool fail_sync_sticky_ = false;   // guarded by mu_
  std::atomic<uint64_t> writes_{0};
  std::atomic<uint64_t> syncs_{0};
};

}  // namespace ember::io
