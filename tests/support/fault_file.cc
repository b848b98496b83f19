// Fault-injecting File for crash and I/O-error tests (model described in fault_file.h).
// Writes are counted, failed and recorded in BeforeWrite, which the base file calls just before
// each request reaches the kernel; the undo list is in the order the requests were let through,
// so newest-first replay is exact even for overlapping writes (which are never concurrent).
#include "tests/support/fault_file.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ember::io {

FaultFile::FaultFile(std::unique_ptr<File> base) : base_(std::move(base)) {
  // Whatever the file holds when wrapped counts as durable.
  absl::StatusOr<uint64_t> size = base_->Size();
  synced_size_ = size.ok() ? *size : 0;
  hooked_ = base_->SetWriteHook(this);
}

FaultFile::~FaultFile() {
  if (hooked_) base_->SetWriteHook(nullptr);
}

void FaultFile::FailWriteAfter(uint64_t n, int err, bool sticky) {
  util::MutexLock lock(mu_);
  write_fault_ = {n == 0 ? 0 : writes_.load() + n, err, sticky};
}

void FaultFile::FailSyncAfter(uint64_t n, int err, bool sticky) {
  util::MutexLock lock(mu_);
  sync_fault_ = {n == 0 ? 0 : syncs_.load() + n, err, sticky};
}

void FaultFile::FailReadAfter(uint64_t n, int err, bool sticky) {
  util::MutexLock lock(mu_);
  read_fault_ = {n == 0 ? 0 : reads_.load() + n, err, sticky};
}

void FaultFile::ShortWriteAfter(uint64_t n, size_t len) {
  util::MutexLock lock(mu_);
  short_write_at_ = n == 0 ? 0 : writes_.load() + n;
  short_write_len_ = len;
}

absl::Status FaultFile::NotHooked() const {
  return absl::FailedPreconditionError(
      absl::StrCat("FaultFile over ", base_->path(), ": the wrapped file takes no write hook"));
}

// Counts the request and decides its fate; a request let through gets its undo recorded.
WriteVerdict FaultFile::BeforeWrite(uint64_t offset, const void* /*data*/, size_t len,
                                    WritePath /*path*/) {
  util::MutexLock lock(mu_);
  const uint64_t n = ++writes_;
  if (write_fault_.Fires(n)) return WriteVerdict{write_fault_.err};
  WriteVerdict v;
  if (n == short_write_at_) v.short_len = short_write_len_;
  absl::StatusOr<uint64_t> size = base_->Size();
  if (!size.ok()) return WriteVerdict{EIO};
  Undo undo{offset, {}, true};
  if (offset < *size) {
    undo.old_bytes.resize(std::min<uint64_t>(len, *size - offset));
    if (!base_->Read(offset, undo.old_bytes.data(), undo.old_bytes.size()).ok()) {
      return WriteVerdict{EIO};
    }
  }
  undo_.push_back(std::move(undo));
  return v;
}

void FaultFile::AfterWrite(uint64_t offset) {
  util::MutexLock lock(mu_);
  for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) {
    if (it->offset == offset && it->in_flight) {
      it->in_flight = false;
      return;
    }
  }
}

absl::Status FaultFile::MaybeFailRead(uint64_t offset) {
  util::MutexLock lock(mu_);
  if (read_fault_.Fires(++reads_))
    return ErrnoStatus(read_fault_.err, "pread", base_->path(), offset);
  return absl::OkStatus();
}

absl::Status FaultFile::Read(uint64_t offset, void* buf, size_t len) {
  if (absl::Status s = MaybeFailRead(offset); !s.ok()) return s;
  return base_->Read(offset, buf, len);
}

absl::Status FaultFile::ReadBlocks(uint64_t offset, size_t block, std::span<uint8_t* const> bufs) {
  if (absl::Status s = MaybeFailRead(offset); !s.ok()) return s;
  return base_->ReadBlocks(offset, block, bufs);
}

absl::Status FaultFile::Write(uint64_t offset, const void* data, size_t len) {
  if (!hooked_) return NotHooked();
  return base_->Write(offset, data, len);
}

absl::Status FaultFile::WriteBatch(std::span<const WriteRequest> reqs) {
  if (!hooked_) return NotHooked();
  return base_->WriteBatch(reqs);
}

absl::Status FaultFile::Sync() {
  util::MutexLock lock(mu_);
  if (sync_fault_.Fires(++syncs_)) return ErrnoStatus(sync_fault_.err, "fdatasync", base_->path());
  if (absl::Status s = base_->Sync(); !s.ok()) return s;
  absl::StatusOr<uint64_t> size = base_->Size();
  if (!size.ok()) return size.status();
  // A write still in flight may have missed this sync: it stays undoable.
  std::erase_if(undo_, [](const Undo& u) { return !u.in_flight; });
  synced_size_ = *size;
  return absl::OkStatus();
}

absl::Status FaultFile::DropUnsynced() {
  util::MutexLock lock(mu_);
  // The restore itself is no write of the engine's: not through this file's hook.
  base_->SetWriteHook(nullptr);
  absl::Status s;
  for (auto it = undo_.rbegin(); it != undo_.rend() && s.ok(); ++it) {
    if (!it->old_bytes.empty())
      s = base_->Write(it->offset, it->old_bytes.data(), it->old_bytes.size());
  }
  if (hooked_) base_->SetWriteHook(this);
  if (!s.ok()) return s;
  undo_.clear();
  absl::StatusOr<uint64_t> size = base_->Size();
  if (!size.ok()) return size.status();
  if (*size > synced_size_) return base_->Truncate(synced_size_);
  return absl::OkStatus();
}

absl::Status FaultFile::Allocate(uint64_t size) {
  // Only grows the file with zeros; DropUnsynced's truncation to synced_size_ undoes that.
  util::MutexLock lock(mu_);
  return base_->Allocate(size);
}

absl::Status FaultFile::Truncate(uint64_t size) {
  util::MutexLock lock(mu_);
  absl::StatusOr<uint64_t> cur = base_->Size();
  if (!cur.ok()) return cur.status();
  if (size < *cur) {
    // Remember the bytes cut off so DropUnsynced can bring them back.
    Undo undo{size, std::string(*cur - size, '\0'), false};
    absl::Status s = base_->Read(size, undo.old_bytes.data(), undo.old_bytes.size());
    if (!s.ok()) return s;
    undo_.push_back(std::move(undo));
  }
  return base_->Truncate(size);
}

absl::StatusOr<uint64_t> FaultFile::Size() { return base_->Size(); }

}  // namespace ember::io
