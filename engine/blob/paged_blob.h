// The bytes of a BLOB in database pages: an ordered list of blob pages and a length. Used for
// permanent BLOBs past level 0 and, with blob_temp_space = 0 (or 1 for API-written BLOBs), for
// temporary BLOBs too, exactly as Firebird keeps them: every byte goes through the buffer
// cache (fetches, marks) and reaches the database file (writes).
#pragma once
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "engine/cache/buffer_cache.h"
#include "engine/cache/page_space.h"

namespace ember::blob {

class PagedBlob {
 public:
  PagedBlob(cache::BufferCache* cache, cache::PageSpace* space, uint32_t relation_id)
      : cache_(cache), space_(space), relation_(relation_id) {}

  // Appends bytes, filling the last page and allocating new ones for `txn`.
  absl::Status Append(uint64_t txn, const void* data, size_t n);
  absl::Status Read(uint64_t offset, void* buf, size_t n) const;
  // Returns every page to the free list (the caller makes sure nothing on disk links to them).
  absl::Status Free(uint64_t txn);

  uint64_t length() const { return length_; }
  const std::vector<page::PageNo>& pages() const { return pages_; }
  void Adopt(std::vector<page::PageNo> pages, uint64_t length) {
    pages_ = std::move(pages);
    length_ = length;
  }

 private:
  cache::BufferCache* cache_;
  cache::PageSpace* space_;
  uint32_t relation_;
  std::vector<page::PageNo> pages_;
  uint64_t length_ = 0;
};

}  // namespace ember::blob
