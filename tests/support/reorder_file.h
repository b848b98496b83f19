// A File for power-loss tests that is harsher than io::FaultFile: FaultFile::DropUnsynced forgets
// every write since the last Sync() at once, so it cannot see a missing order between two writes
// of the same unsynced window. A disk may persist unsynced writes in any order, so after a power
// failure each block written since the last fdatasync may hold its old contents or any of the
// versions written to it. ReorderFile::PowerLoss(rng) produces exactly such a state: for every
// written range it picks, at random, the synced contents or one of the unsynced versions.
// With tearing on (set_tear_percent), a picked version may also have reached the disk only in
// part, as a write larger than the device's atomic unit does when the power fails in the middle
// of it: some of its 4096-byte or 512-byte units new, the rest as they were before it (TearWrite).
// CutPowerAtWrite(n) lets the crash fall in the middle of an engine call (a commit's flush):
// from the nth write on, writes and syncs fail as on a dead disk.
//
// Like io::FaultFile, ReorderFile sees the writes as the write hook of the file below it
// (engine/io/write_hook.h), so they may go through io_uring or pwrite.
//
// Writes are tracked per (offset, length); the engine writes whole pages, so ranges never
// overlap partially (a partial overlap falls back to keeping every write, which only weakens the
// test).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/io/file.h"

namespace ember::testing {

// A pass-through File whose Sync() does nothing: for the in-process power-loss tests, where what
// counts as durable is decided by the fault-injecting file above it (FaultFile, ReorderFile)
// counting the engine's Sync() calls, not by the real disk. Saves a real fdatasync per call.
class NoSyncFile : public io::File {
 public:
  explicit NoSyncFile(std::unique_ptr<io::File> base) : base_(std::move(base)) {}
  absl::Status Read(uint64_t offset, void* buf, size_t len) override {
    return base_->Read(offset, buf, len);
  }
  absl::Status ReadBlocks(uint64_t offset, size_t block, std::span<uint8_t* const> bufs) override {
    return base_->ReadBlocks(offset, block, bufs);
  }
  absl::Status Write(uint64_t offset, const void* data, size_t len) override {
    return base_->Write(offset, data, len);
  }
  absl::Status WriteBatch(std::span<const io::WriteRequest> reqs) override {
    return base_->WriteBatch(reqs);
  }
  absl::Status Sync() override { return absl::OkStatus(); }
  absl::Status Allocate(uint64_t size) override { return base_->Allocate(size); }
  absl::Status Truncate(uint64_t size) override { return base_->Truncate(size); }
  absl::StatusOr<uint64_t> Size() override { return base_->Size(); }
  const std::string& path() const override { return base_->path(); }
  bool SetWriteHook(io::WriteHook* hook) override { return base_->SetWriteHook(hook); }
  io::WritePathCounts write_path_counts() const override { return base_->write_path_counts(); }

 private:
  std::unique_ptr<io::File> base_;
};

// The units a torn write is made of: a 4 KiB file-system block, or a 512-byte sector.
inline constexpr size_t kTearUnits[] = {4096, 512};

// `after` written over `before` (same length) and torn: each `unit`-byte unit of the result is
// wholly one or the other, at least one of each (a prefix of new units, a suffix, or a random
// mix). Returns `after` when it is not longer than one unit (it cannot tear).
std::string TearWrite(const std::string& before, const std::string& after, size_t unit,
                      std::mt19937_64& rng);

class ReorderFile : public io::File, private io::WriteHook {
 public:
  explicit ReorderFile(std::unique_ptr<io::File> base);
  ~ReorderFile() override;

  absl::Status Read(uint64_t offset, void* buf, size_t len) override {
    return base_->Read(offset, buf, len);
  }
  absl::Status ReadBlocks(uint64_t offset, size_t block, std::span<uint8_t* const> bufs) override {
    return base_->ReadBlocks(offset, block, bufs);
  }
  absl::Status Write(uint64_t offset, const void* data, size_t len) override {
    if (!hooked_) return NotHooked();
    return base_->Write(offset, data, len);
  }
  absl::Status WriteBatch(std::span<const io::WriteRequest> reqs) override {
    if (!hooked_) return NotHooked();
    return base_->WriteBatch(reqs);
  }
  absl::Status Sync() override;
  absl::Status Allocate(uint64_t size) override { return base_->Allocate(size); }
  // The engine does not truncate a live database; a truncation counts as durable at once.
  absl::Status Truncate(uint64_t size) override;
  absl::StatusOr<uint64_t> Size() override { return base_->Size(); }
  const std::string& path() const override { return base_->path(); }
  bool SetWriteHook(io::WriteHook*) override { return false; }  // the base's slot is ours
  io::WritePathCounts write_path_counts() const override { return base_->write_path_counts(); }

  // The power goes off at the `n`th write from now (1 = the next one): it and every later write
  // and sync fail with EIO, as the engine would see a dead disk; PowerLoss() then decides what
  // the disk kept. 0 disables.
  void CutPowerAtWrite(uint64_t n);
  bool powered_off();
  // How often (0..100) PowerLoss tears a version it keeps (see TearWrite).
  void set_tear_percent(unsigned percent);

  // Simulates the power failure: every range written since the last Sync() ends up holding its
  // synced contents or one of its unsynced versions, chosen independently, and with tearing on
  // maybe that version torn over the one before it. Returns how many ranges lost their newest
  // version (wholly or in part). The engine must have dropped its handle's state first
  // (DatabaseImpl::TEST_SimulateCrash).
  absl::StatusOr<size_t> PowerLoss(std::mt19937_64& rng);

  uint64_t syncs() const { return syncs_; }
  uint64_t torn() const { return torn_; }  // versions PowerLoss tore

 private:
  struct Version {
    std::string bytes;
    bool in_flight;  // BeforeWrite let it through, AfterWrite not heard yet
  };
  struct Range {
    size_t len = 0;
    std::string synced;             // durable contents before the first unsynced write
    std::vector<Version> versions;  // unsynced writes, oldest first
  };

  io::WriteVerdict BeforeWrite(uint64_t offset, const void* data, size_t len,
                               io::WritePath) override;
  void AfterWrite(uint64_t offset) override;
  absl::Status NotHooked() const;

  std::unique_ptr<io::File> base_;
  bool hooked_ = false;
  std::mutex mu_;
  std::map<uint64_t, Range> ranges_;   // guarded by mu_: by offset
  uint64_t synced_size_ = 0;           // guarded by mu_
  bool partial_overlap_ = false;       // guarded by mu_
  uint64_t cut_at_ = 0;                // guarded by mu_
  uint64_t writes_since_cut_set_ = 0;  // guarded by mu_
  bool powered_off_ = false;           // guarded by mu_
  unsigned tear_percent_ = 0;          // guarded by mu_
  uint64_t syncs_ = 0;
  uint64_t torn_ = 0;
};

}  // namespace ember::testing
