// Page allocation through the PIP bitmaps (see page_space.h).
#include "engine/cache/page_space.h"

#include "absl/strings/str_cat.h"
#include "engine/page/doublewrite_page.h"
#include "engine/page/pip.h"

namespace ember::cache {

PageSpace::PageSpace(BufferCache* cache, uint32_t page_count)
    : cache_(cache), per_pip_(page::PagesPerPip(cache->page_size())), page_count_(page_count) {}

uint32_t PageSpace::page_count() const {
  util::MutexLock g(mu_);
  return page_count_;
}

absl::StatusOr<PageRef> PageSpace::FetchPip(uint32_t k, bool create) {
  const PageNo no = page::PipPageNo(k, cache_->page_size());
  if (no < page_count_) return cache_->Fetch(no, LatchMode::kExclusive);
  if (!create) return absl::NotFoundError("no such PIP");
  {
    absl::StatusOr<PageRef> r = cache_->FetchNew(no);
    if (!r.ok()) return r.status();
    page::InitPip(r->data(), cache_->page_size(), no, k * per_pip_);
    r->Mark(cache::kSystemMark);
  }
  page_count_ = no + 1;
  // A PIP is found by its place in the file, not through a link, and the pages it hands out are
  // fresh (written without waiting for it to be durable): so it goes to disk before any of them
  // can, or a crash could leave the file reaching past a PIP that reads as zeros.
  const PageNo pip[] = {no};
  if (absl::Status s = cache_->FlushPagesEarly(pip); !s.ok()) return s;
  return cache_->Fetch(no, LatchMode::kExclusive);
}

absl::StatusOr<PageRef> PageSpace::Allocate(uint64_t txn) {
  PageNo p;
  {
    util::MutexLock g(mu_);
    for (uint32_t k = hint_pip_;; ++k) {
      absl::StatusOr<PageRef> pip = FetchPip(k, /*create=*/true);
      if (!pip.ok()) return pip.status();
      std::optional<PageNo> found = page::PipFindFree(pip->data(), cache_->page_size());
      if (!found) {
        hint_pip_ = k + 1;
        continue;
      }
      p = *found;
      page::PipSetFree(pip->data(), cache_->page_size(), p, false);
      pip->Mark(txn);
      if (p >= page_count_) page_count_ = p + 1;
      break;
    }
  }
  return Claim(p);
}

absl::StatusOr<PageNo> PageSpace::AllocateRun(uint64_t txn, uint32_t n) {
  if (n == 0 || n % 8 != 0 || n > 64) {
    return absl::InvalidArgumentError(absl::StrCat("page run of ", n, " pages"));
  }
  util::MutexLock g(mu_);
  for (uint32_t k = hint_pip_;; ++k) {  // below hint_pip_ no PIP has a single free page
    absl::StatusOr<PageRef> pip = FetchPip(k, /*create=*/true);
    if (!pip.ok()) return pip.status();
    const std::optional<PageNo> first = page::PipFindFreeRun(pip->data(), cache_->page_size(), n);
    if (!first) continue;
    for (PageNo p = *first; p < *first + n; ++p) {
      page::PipSetFree(pip->data(), cache_->page_size(), p, false);
    }
    pip->Mark(txn);
    if (*first + n > page_count_) page_count_ = *first + n;
    return *first;
  }
}

absl::StatusOr<PageRef> PageSpace::Claim(PageNo p) {
  // Free in the PIP, so nothing on disk links to it (careful write keeps a reachable page
  // allocated in its PIP): the cache may write it before the PIP's new version is durable.
  absl::StatusOr<PageRef> page = cache_->FetchNew(p, NewPage::kUnlinked);
  if (!page.ok()) return page.status();
  const PageNo pip_no = page::PipPageNo(p / per_pip_, cache_->page_size());
  if (absl::Status s = cache_->AddPrecedence(*page, pip_no); !s.ok()) return s;
  return page;
}

absl::Status PageSpace::Free(PageNo p, uint64_t txn, PageRef* unlinked_from) {
  util::MutexLock g(mu_);
  const uint32_t k = p / per_pip_;
  // The header, the PIPs and the doublewrite area are never allocated, so never freed.
  if (p < page::DoublewriteEnd(cache_->page_size()) || p >= page_count_ ||
      p == page::PipPageNo(k, cache_->page_size())) {
    return absl::InvalidArgumentError(absl::StrCat("free of page ", p, ": not an allocated page"));
  }
  absl::StatusOr<PageRef> pip = FetchPip(k, /*create=*/false);
  if (!pip.ok()) return pip.status();
  if (unlinked_from) {
    if (absl::Status s = cache_->AddPrecedence(*pip, unlinked_from->page_no()); !s.ok()) return s;
  }
  page::PipSetFree(pip->data(), cache_->page_size(), p, true);
  pip->Mark(txn);
  if (k < hint_pip_) hint_pip_ = k;
  return absl::OkStatus();
}

absl::StatusOr<bool> PageSpace::IsFree(PageNo p) {
  util::MutexLock g(mu_);
  if (p >= page_count_) return true;
  absl::StatusOr<PageRef> pip = FetchPip(p / per_pip_, /*create=*/false);
  if (!pip.ok()) return pip.status();
  return page::PipIsFree(pip->data(), cache_->page_size(), p);
}

}  // namespace ember::cache
