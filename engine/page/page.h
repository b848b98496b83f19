// The common page header and page checksums. Every page of a database file starts with this
// 16-byte header; the layouts of the page types are in the other files of this folder and in
// docs/format.md. Pages are plain byte arrays of `page_size` bytes; nothing here does I/O.
//
//   offset size field
//   0      1    type        (PageType)
//   1      1    flags       (meaning depends on the type)
//   2      2    reserved    (0)
//   4      4    checksum    CRC32C of the whole page computed with this field as 0
//   8      4    page_no     the page's own number: catches misdirected reads and writes
//   12     4    generation  incremented on every write of the page
#pragma once
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace ember::page {

using PageNo = uint32_t;
constexpr PageNo kNoPage = 0;  // page 0 is the header page, never a link target

enum class PageType : uint8_t {
  kFree = 0,  // never written (all zero)
  kHeader = 1,
  kPip = 2,
  kTip = 3,
  kPointer = 4,
  kData = 5,
  kIndexRoot = 6,
  kBtree = 7,
  kBlob = 8,
  kDoublewrite = 9,  // a record page of the doublewrite area (doublewrite_page.h)
};
const char* PageTypeName(PageType t);

constexpr uint32_t kMinPageSize = 4096;
constexpr uint32_t kMaxPageSize = 32768;
constexpr uint32_t kDefaultPageSize = 8192;
constexpr bool ValidPageSize(uint32_t s) {
  return s >= kMinPageSize && s <= kMaxPageSize && (s & (s - 1)) == 0;
}

constexpr size_t kPageHeaderSize = 16;
namespace hdr {
constexpr size_t kType = 0, kFlags = 1, kChecksum = 4, kPageNo = 8, kGeneration = 12;
}

PageType GetType(const uint8_t* page);
uint8_t GetFlags(const uint8_t* page);
void SetFlags(uint8_t* page, uint8_t flags);
PageNo GetPageNo(const uint8_t* page);
uint32_t GetGeneration(const uint8_t* page);

// Zeroes the page and writes a fresh header of `type` for page `no`.
void InitPage(uint8_t* page, uint32_t page_size, PageType type, PageNo no);

// Before a write: bumps the generation and stores the checksum.
void SealPage(uint8_t* page, uint32_t page_size);
// The same with a given generation (the buffer cache's: one per version of the page it writes).
void SealPageAs(uint8_t* page, uint32_t page_size, uint32_t generation);
// After a read: DataLoss naming the page and the file when the checksum or the page number does
// not match. An all-zero page (allocated, never written) passes and reads as PageType::kFree.
absl::Status VerifyPage(const uint8_t* page, uint32_t page_size, PageNo expected_no,
                        const char* file_for_errors);
// `seed`: a CRC32C to extend (0: the page's own checksum).
uint32_t ComputeChecksum(const uint8_t* page, uint32_t page_size, uint32_t seed = 0);

}  // namespace ember::page
