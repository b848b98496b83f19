// Blob page accessors (see blob_page.h).
#include "engine/page/blob_page.h"

#include "engine/util/coding.h"

namespace ember::page {

void InitBlobPage(uint8_t* page, uint32_t page_size, PageNo no, uint32_t relation_id, bool list) {
  InitPage(page, page_size, PageType::kBlob, no);
  SetFlags(page, list ? kBlobListPage : 0);
  util::Put32(page + 16, relation_id);
  util::Put32(page + 20, 0);
}
uint32_t BlobRelation(const uint8_t* page) { return util::Get32(page + 16); }
uint32_t BlobUsed(const uint8_t* page) { return util::Get32(page + 20); }
void BlobSetUsed(uint8_t* page, uint32_t used) { util::Put32(page + 20, used); }

}  // namespace ember::page
