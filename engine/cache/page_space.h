// Page allocation over the PIPs (free-page bitmaps). Allocation marks the page used in its PIP
// on behalf of a transaction and records "PIP before new page" precedence on the new page, so
// any page that later links to the new one (and so must follow it to disk) also follows the PIP:
// after a crash a reachable page is never free in its PIP. Unreachable-but-allocated pages are
// what Validate() reports and frees. A page handed out is fresh to the cache
// (FetchNew(kUnlinked)): free in its PIP, nothing on disk links to it. A new PIP is written (and
// synced, with forced writes) before any page is allocated from it.
#pragma once
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/cache/buffer_cache.h"
#include "engine/util/mutex.h"

namespace ember::cache {

class PageSpace {
 public:
  // `page_count`: pages in use by the file format (header's page_count); PIPs beyond it do not
  // exist yet.
  PageSpace(BufferCache* cache, uint32_t page_count);

  // A free page, marked used, returned zeroed and latched exclusively. The caller initialises it
  // and marks it for `txn`.
  absl::StatusOr<PageRef> Allocate(uint64_t txn);
  // An extent: `n` contiguous free pages (n a multiple of 8, at most 64) starting at a page
  // number that is a multiple of n, all marked used; returns the first. The caller takes each
  // with Claim(). Data pages come in extents so that a table scan reads long runs of pages in
  // one read each, instead of data pages interleaved with the index pages allocated between.
  absl::StatusOr<PageNo> AllocateRun(uint64_t txn, uint32_t n);
  // A page of a run from AllocateRun, as Allocate returns a page: zeroed, latched exclusively,
  // fresh to the cache, following its PIP.
  absl::StatusOr<PageRef> Claim(PageNo p);
  // Marks `p` free. The caller makes sure nothing on disk links to it any more (e.g. the page
  // that linked to it is written first: pass its ref to record that precedence) or that the
  // page was never linked (rollback of a fresh allocation).
  absl::Status Free(PageNo p, uint64_t txn, PageRef* unlinked_from = nullptr);
  absl::StatusOr<bool> IsFree(PageNo p);

  // One past the highest page ever allocated.
  uint32_t page_count() const;

 private:
  absl::StatusOr<PageRef> FetchPip(uint32_t k, bool create) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  BufferCache* cache_;
  const uint32_t per_pip_;
  mutable util::Mutex mu_;
  uint32_t page_count_ ABSL_GUARDED_BY(mu_);
  uint32_t hint_pip_ ABSL_GUARDED_BY(mu_) = 0;  // lowest PIP that may have a free page
};

}  // namespace ember::cache
