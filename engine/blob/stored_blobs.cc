// Page lists and freeing of stored BLOBs (see stored_blobs.h).
#include "engine/blob/stored_blobs.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/page/blob_page.h"
#include "engine/util/coding.h"

namespace ember::blob {

absl::Status DataPagesOf(cache::BufferCache* cache, const BlobHeader& h,
                         std::vector<page::PageNo>* data, std::vector<page::PageNo>* list_pages) {
  data->clear();
  list_pages->clear();
  if (h.level == 1) {
    *data = h.pages;
  } else if (h.level == 2) {
    *list_pages = h.pages;
    for (page::PageNo lp : h.pages) {
      absl::StatusOr<cache::PageRef> r = cache->Fetch(lp, cache::LatchMode::kShared);
      if (!r.ok()) return r.status();
      if (page::GetType(r->data()) != page::PageType::kBlob ||
          !(page::GetFlags(r->data()) & page::kBlobListPage) ||
          page::BlobUsed(r->data()) > page::BlobListCapacity(cache->page_size())) {
        return absl::DataLossError(absl::StrCat("page ", lp, ": expected a BLOB list page"));
      }
      for (uint32_t i = 0; i < page::BlobUsed(r->data()); ++i) {
        data->push_back(util::Get32(page::BlobData(r->data()) + size_t{4} * i));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status FreeStoredBlobs(cache::BufferCache* cache, cache::PageSpace* space,
                             record::Relation* rel, std::span<const uint64_t> ids,
                             uint64_t mark_txn, uint64_t* pages_freed) {
  std::vector<page::PageNo> pages, header_pages, data, lists;
  for (uint64_t id : ids) {
    if (id == 0 || IsTemp(id) || IdRelation(id) != rel->id()) continue;
    absl::StatusOr<std::string> body = rel->ReadBlobRecord(IdPage(id), IdLine(id));
    if (!body.ok()) return body.status();
    absl::StatusOr<BlobHeader> h = DecodeBlobHeader(*body);
    if (!h.ok()) return h.status();
    if (absl::Status s = DataPagesOf(cache, *h, &data, &lists); !s.ok()) return s;
    pages.insert(pages.end(), data.begin(), data.end());
    pages.insert(pages.end(), lists.begin(), lists.end());
    if (absl::Status s = rel->DeleteBlobRecord(IdPage(id), IdLine(id), mark_txn); !s.ok()) {
      return s;
    }
    header_pages.push_back(IdPage(id));
  }
  if (pages.empty()) return absl::OkStatus();
  std::sort(header_pages.begin(), header_pages.end());
  header_pages.erase(std::unique(header_pages.begin(), header_pages.end()), header_pages.end());
  if (absl::Status s = cache->FlushPagesEarly(header_pages); !s.ok()) return s;
  for (page::PageNo p : pages) {
    if (absl::Status s = space->Free(p, mark_txn); !s.ok()) return s;
    if (pages_freed) ++*pages_freed;
  }
  return absl::OkStatus();
}

}  // namespace ember::blob
