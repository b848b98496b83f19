// Fault-injecting File for crash and I/O-error tests (model described in fault_file.h).
// Every mutating call holds mu_ across the base operation, so the undo list is in the same order
// as the writes hit the base file and newest-first replay is exact even for overlapping writes.
#include "engine/io/fault_file.h"

#include <algorithm>

namespace ember::io {

FaultFile::FaultFile(std::unique_ptr<File> base) : base_(std::move(base)) {
  // Whatever the file holds when wrapped counts as durable.
  absl::StatusOr<uint64_t> size = base_->Size();
  synced_size_ = size.ok() ? *size : 0;
}

void FaultFile::FailWriteAfter(uint64_t n, int err, bool sticky) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_write_at_ = n == 0 ? 0 : writes_.load() + n;
  fail_write_err_ = err;
  fail_write_sticky_ = sticky;
}

void FaultFile::FailSyncAfter(uint64_t n, int err, bool sticky) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_sync_at_ = n == 0 ? 0 : syncs_.load() + n;
  fail_sync_err_ = err;
  fail_sync_sticky_ = sticky;
}

// Counts the write and decides whether it fails. Caller holds mu_.
absl::Status FaultFile::MaybeFailWrite(uint64_t offset) {
  const uint64_t n = ++writes_;
  if (fail_write_at_ != 0 &&
      (n == fail_write_at_ || (fail_write_sticky_ && n > fail_write_at_))) {
    return ErrnoStatus(fail_write_err_, "pwrite", base_->path(), offset);
  }
  return absl::OkStatus();
}

absl::Status FaultFile::Read(uint64_t offset, void* buf, size_t len) {
  return base_->Read(offset, buf, len);
}

absl::Status FaultFile::Write(uint64_t offset, const void* data, size_t len) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = MaybeFailWrite(offset); !s.ok()) return s;
  absl::StatusOr<uint64_t> size = base_->Size();
  if (!size.ok()) return size.status();
  Undo undo{offset, {}};
  if (offset < *size) {
    undo.old_bytes.resize(std::min<uint64_t>(len, *size - offset));
    absl::Status s = base_->Read(offset, undo.old_bytes.data(), undo.old_bytes.size());
    if (!s.ok()) return s;
  }
  undo_.push_back(std::move(undo));
  return base_->Write(offset, data, len);
}

absl::Status FaultFile::WriteBatch(std::span<const WriteRequest> reqs) {
  // Every request is attempted, like the io_uring path, so the write count is deterministic.
  absl::Status first;
  for (const WriteRequest& r : reqs) {
    absl::Status s = Write(r.offset, r.data, r.len);
    if (first.ok()) first = s;
  }
  return first;
}

absl::Status FaultFile::Sync() {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t n = ++syncs_;
  if (fail_sync_at_ != 0 && (n == fail_sync_at_ || (fail_sync_sticky_ && n > fail_sync_at_))) {
    return ErrnoStatus(fail_sync_err_, "fdatasync", base_->path());
  }
  if (absl::Status s = base_->Sync(); !s.ok()) return s;
  absl::StatusOr<uint64_t> size = base_->Size();
  if (!size.ok()) return size.status();
  undo_.clear();
  synced_size_ = *size;
  return absl::OkStatus();
}

absl::Status FaultFile::DropUnsynced() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) {
    if (it->old_bytes.empty()) continue;
    absl::Status s = base_->Write(it->offset, it->old_bytes.data(), it->old_bytes.size());
    if (!s.ok()) return s;
  }
  undo_.clear();
  absl::StatusOr<uint64_t> size = base_->Size();
  if (!size.ok()) return size.status();
  if (*size > synced_size_) return base_->Truncate(synced_size_);
  return absl::OkStatus();
}

absl::Status FaultFile::Allocate(uint64_t size) {
  // Only grows the file with zeros; DropUnsynced's truncation to synced_size_ undoes that.
  std::lock_guard<std::mutex> lock(mu_);
  return base_->Allocate(size);
}

absl::Status FaultFile::Truncate(uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<uint64_t> cur = base_->Size();
  if (!cur.ok()) return cur.status();
  if (size < *cur) {
    // Remember the bytes cut off so DropUnsynced can bring them back.
    Undo undo{size, std::string(*cur - size, '\0')};
    absl::Status s = base_->Read(size, undo.old_bytes.data(), undo.old_bytes.size());
    if (!s.ok()) return s;
    undo_.push_back(std::move(undo));
  }
  return base_->Truncate(size);
}

absl::StatusOr<uint64_t> FaultFile::Size() { return base_->Size(); }

}  // namespace ember::io
