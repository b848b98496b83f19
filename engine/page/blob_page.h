// Blob pages: the data of a BLOB stored past level 0 (level 1: the BLOB's header record lists
// its data pages; level 2: it lists "list pages" that hold the data page numbers).
//
//   offset size field
//   0      16   page header (type kBlob; flags: kBlobListPage for a level-2 list page)
//   16     4    relation_id
//   20     4    used        data bytes on this page (data pages) or page numbers (list pages)
//   24     8    reserved
//   32     ...  data bytes, or u32 page numbers
#pragma once
#include <cstdint>

#include "engine/page/page.h"

namespace ember::page {

constexpr uint8_t kBlobListPage = 0x01;
constexpr size_t kBlobDataOffset = 32;
constexpr uint32_t BlobPageCapacity(uint32_t page_size) { return page_size - kBlobDataOffset; }
constexpr uint32_t BlobListCapacity(uint32_t page_size) { return BlobPageCapacity(page_size) / 4; }

void InitBlobPage(uint8_t* page, uint32_t page_size, PageNo no, uint32_t relation_id, bool list);
uint32_t BlobRelation(const uint8_t* page);
uint32_t BlobUsed(const uint8_t* page);
void BlobSetUsed(uint8_t* page, uint32_t used);
inline uint8_t* BlobData(uint8_t* page) { return page + kBlobDataOffset; }
inline const uint8_t* BlobData(const uint8_t* page) { return page + kBlobDataOffset; }

}  // namespace ember::page
