// A File for power-loss tests that is harsher than io::FaultFile: FaultFile::DropUnsynced forgets
// every write since the last Sync() at once, so it cannot see a missing order between two writes
// of the same unsynced window. A disk may persist unsynced writes in any order, so after a power
// failure each block written since the last fdatasync may hold its old contents or any of the
// versions written to it. ReorderFile::PowerLoss(rng) produces exactly such a state: for every
// written range it picks, at random, the synced contents or one of the unsynced versions.
// CutPowerAtWrite(n) lets the crash fall in the middle of an engine call (a commit's flush):
// from the nth write on, writes and syncs fail as on a dead disk.
//
// Writes are tracked per (offset, length); the engine writes whole pages, so ranges never
// overlap partially (a partial overlap falls back to keeping every write, which only weakens the
// test). Header-only: tests/CMakeLists.txt compiles only *_test.cc files.
#pragma once
#include <cerrno>
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/io/file.h"

namespace ember::crashtest {

// A pass-through File whose Sync() does nothing: for the in-process power-loss tests, where what
// counts as durable is decided by the fault-injecting file above it (FaultFile, ReorderFile)
// counting the engine's Sync() calls, not by the real disk. Saves a real fdatasync per call.
class NoSyncFile : public io::File {
 public:
  explicit NoSyncFile(std::unique_ptr<io::File> base) : base_(std::move(base)) {}
  absl::Status Read(uint64_t offset, void* buf, size_t len) override {
    return base_->Read(offset, buf, len);
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

 private:
  std::unique_ptr<io::File> base_;
};

class ReorderFile : public io::File {
 public:
  explicit ReorderFile(std::unique_ptr<io::File> base) : base_(std::move(base)) {
    absl::StatusOr<uint64_t> size = base_->Size();
    synced_size_ = size.ok() ? *size : 0;
  }

  absl::Status Read(uint64_t offset, void* buf, size_t len) override {
    return base_->Read(offset, buf, len);
  }
  absl::Status Write(uint64_t offset, const void* data, size_t len) override {
    std::lock_guard<std::mutex> g(mu_);
    if (cut_at_ != 0 && ++writes_since_cut_set_ >= cut_at_) powered_off_ = true;
    if (powered_off_) return io::ErrnoStatus(EIO, "pwrite", base_->path(), offset);
    Range& r = ranges_[offset];
    if (r.versions.empty()) {
      // First write since the last sync: remember what the disk durably holds (zeros past the
      // synced end of the file).
      r.len = len;
      r.synced.assign(len, '\0');
      if (offset < synced_size_) {
        const size_t have = std::min<uint64_t>(len, synced_size_ - offset);
        if (absl::Status s = base_->Read(offset, r.synced.data(), have); !s.ok()) return s;
      }
    } else if (r.len != len) {
      partial_overlap_ = true;
    }
    r.versions.emplace_back(static_cast<const char*>(data), len);
    return base_->Write(offset, data, len);
  }
  absl::Status WriteBatch(std::span<const io::WriteRequest> reqs) override {
    absl::Status first;
    for (const io::WriteRequest& r : reqs) {
      absl::Status s = Write(r.offset, r.data, r.len);
      if (first.ok()) first = s;
    }
    return first;
  }
  absl::Status Sync() override {
    std::lock_guard<std::mutex> g(mu_);
    if (powered_off_) return io::ErrnoStatus(EIO, "fdatasync", base_->path());
    if (absl::Status s = base_->Sync(); !s.ok()) return s;
    absl::StatusOr<uint64_t> size = base_->Size();
    if (!size.ok()) return size.status();
    ranges_.clear();
    partial_overlap_ = false;
    synced_size_ = *size;
    ++syncs_;
    return absl::OkStatus();
  }
  absl::Status Allocate(uint64_t size) override { return base_->Allocate(size); }
  absl::Status Truncate(uint64_t size) override {
    // The engine does not truncate a live database; a truncation counts as durable at once.
    std::lock_guard<std::mutex> g(mu_);
    absl::Status s = base_->Truncate(size);
    if (s.ok()) synced_size_ = std::min(synced_size_, size);
    return s;
  }
  absl::StatusOr<uint64_t> Size() override { return base_->Size(); }
  const std::string& path() const override { return base_->path(); }

  // The power goes off at the `n`th write from now (1 = the next one): it and every later write
  // and sync fail with EIO, as the engine would see a dead disk; PowerLoss() then decides what
  // the disk kept. 0 disables.
  void CutPowerAtWrite(uint64_t n) {
    std::lock_guard<std::mutex> g(mu_);
    cut_at_ = n;
    writes_since_cut_set_ = 0;
  }
  bool powered_off() {
    std::lock_guard<std::mutex> g(mu_);
    return powered_off_;
  }

  // Simulates the power failure: every range written since the last Sync() ends up holding its
  // synced contents or one of its unsynced versions, chosen independently. Returns how many
  // ranges lost their newest version. The engine must have dropped its handle's state first
  // (DatabaseImpl::SimulateCrash).
  absl::StatusOr<size_t> PowerLoss(std::mt19937_64& rng) {
    std::lock_guard<std::mutex> g(mu_);
    size_t reverted = 0;
    uint64_t end = synced_size_;
    if (!partial_overlap_) {
      for (auto& [offset, r] : ranges_) {
        const size_t pick = rng() % (r.versions.size() + 1);  // 0: the synced contents
        const std::string& bytes = pick == 0 ? r.synced : r.versions[pick - 1];
        if (pick != r.versions.size()) ++reverted;
        if (pick != 0) end = std::max<uint64_t>(end, offset + r.len);
        if (absl::Status s = base_->Write(offset, bytes.data(), bytes.size()); !s.ok()) return s;
      }
    }
    ranges_.clear();
    cut_at_ = 0;
    powered_off_ = false;
    absl::StatusOr<uint64_t> size = base_->Size();
    if (!size.ok()) return size.status();
    if (*size > end) {
      if (absl::Status s = base_->Truncate(end); !s.ok()) return s;
    }
    if (absl::Status s = base_->Sync(); !s.ok()) return s;
    return reverted;
  }

  uint64_t syncs() const { return syncs_; }

 private:
  struct Range {
    size_t len = 0;
    std::string synced;                 // durable contents before the first unsynced write
    std::vector<std::string> versions;  // unsynced writes, oldest first
  };
  std::unique_ptr<io::File> base_;
  std::mutex mu_;
  std::map<uint64_t, Range> ranges_;  // guarded by mu_: by offset
  uint64_t synced_size_ = 0;          // guarded by mu_
  bool partial_overlap_ = false;      // guarded by mu_
  uint64_t cut_at_ = 0;               // guarded by mu_
  uint64_t writes_since_cut_set_ = 0;  // guarded by mu_
  bool powered_off_ = false;          // guarded by mu_
  uint64_t syncs_ = 0;
};

}  // namespace ember::crashtest
