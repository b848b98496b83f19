// A File that hands every call to the file below it: the base of the test files that change
// one or two calls: a Sync() that does nothing (tests/support/reorder_file.h's NoSyncFile), one
// that waits until the test lets it go (tests/db/transaction_test.cc), reads that are traced
// (tests/db/corruption_test.cc).
#pragma once
#include <memory>
#include <span>
#include <string>

#include "engine/io/file.h"

namespace ember::testing {

class PassThroughFile : public io::File {
 public:
  explicit PassThroughFile(std::unique_ptr<io::File> base) : base_(std::move(base)) {}
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
  absl::Status Sync() override { return base_->Sync(); }
  absl::Status Allocate(uint64_t size) override { return base_->Allocate(size); }
  absl::Status Truncate(uint64_t size) override { return base_->Truncate(size); }
  absl::StatusOr<uint64_t> Size() override { return base_->Size(); }
  const std::string& path() const override { return base_->path(); }
  bool SetWriteHook(io::WriteHook* hook) override { return base_->SetWriteHook(hook); }
  io::WritePathCounts write_path_counts() const override { return base_->write_path_counts(); }

 private:
  std::unique_ptr<io::File> base_;
};

}  // namespace ember::testing
