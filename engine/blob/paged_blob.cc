// PagedBlob: BLOB bytes in blob pages through the buffer cache (see paged_blob.h).
#include "engine/blob/paged_blob.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/page/blob_page.h"

namespace ember::blob {

using cache::LatchMode;

absl::Status PagedBlob::Append(uint64_t txn, const void* data, size_t n) {
  const uint32_t cap = page::BlobPageCapacity(cache_->page_size());
  const auto* src = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const uint32_t used = static_cast<uint32_t>(length_ % cap);
    if (used == 0 && length_ / cap == pages_.size()) {
      absl::StatusOr<cache::PageRef> p = space_->Allocate(txn);
      if (!p.ok()) return p.status();
      page::InitBlobPage(p->data(), cache_->page_size(), p->page_no(), relation_, false);
      const uint32_t k = static_cast<uint32_t>(std::min<size_t>(n, cap));
      std::memcpy(page::BlobData(p->data()), src, k);
      page::BlobSetUsed(p->data(), k);
      p->Mark(txn);
      pages_.push_back(p->page_no());
      src += k;
      n -= k;
      length_ += k;
      continue;
    }
    absl::StatusOr<cache::PageRef> p = cache_->Fetch(pages_.back(), LatchMode::kExclusive);
    if (!p.ok()) return p.status();
    const uint32_t k = static_cast<uint32_t>(std::min<size_t>(n, cap - used));
    std::memcpy(page::BlobData(p->data()) + used, src, k);
    page::BlobSetUsed(p->data(), used + k);
    p->Mark(txn);
    src += k;
    n -= k;
    length_ += k;
  }
  return absl::OkStatus();
}

absl::Status PagedBlob::Read(uint64_t offset, void* buf, size_t n) const {
  if (offset + n > length_) {
    return absl::OutOfRangeError(
        absl::StrCat("blob read at ", offset, "+", n, " past its length ", length_));
  }
  const uint32_t cap = page::BlobPageCapacity(cache_->page_size());
  auto* dst = static_cast<uint8_t*>(buf);
  // The pages this read covers are read ahead together (a BLOB's pages are mostly consecutive
  // in the file): one read per run instead of one per page.
  const size_t last = (offset + n - 1) / cap;
  size_t fetched_until = offset / cap;
  while (n > 0) {
    const size_t pi = offset / cap;
    if (pi >= fetched_until && last > pi) {
      const size_t k = std::min(last + 1 - pi, cache::BufferCache::kMaxPrefetch);
      cache_->Prefetch(std::span<const page::PageNo>(pages_.data() + pi, k));
      fetched_until = pi + k;
    }
    const uint32_t in = static_cast<uint32_t>(offset % cap);
    absl::StatusOr<cache::PageRef> p = cache_->Fetch(pages_[pi], LatchMode::kShared);
    if (!p.ok()) return p.status();
    if (page::GetType(p->data()) != page::PageType::kBlob || page::BlobUsed(p->data()) > cap) {
      return absl::DataLossError(absl::StrCat("page ", pages_[pi], " of ", cache_->file()->path(),
                                              ": expected a blob page"));
    }
    const uint32_t k = static_cast<uint32_t>(std::min<size_t>(n, cap - in));
    if (in + k > page::BlobUsed(p->data())) {
      return absl::DataLossError(
          absl::StrCat("blob page ", pages_[pi], " is shorter than its blob"));
    }
    std::memcpy(dst, page::BlobData(p->data()) + in, k);
    dst += k;
    n -= k;
    offset += k;
  }
  return absl::OkStatus();
}

absl::Status PagedBlob::Free(uint64_t txn) {
  for (page::PageNo p : pages_) {
    if (absl::Status s = space_->Free(p, txn); !s.ok()) return s;
  }
  pages_.clear();
  length_ = 0;
  return absl::OkStatus();
}

}  // namespace ember::blob
