// The common page header, page checksums and the read-side page check (see page.h).
#include "engine/page/page.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "engine/util/coding.h"
#include "engine/util/crc32c.h"

namespace ember::page {

// The header layout is part of the file format: a change here is a format version bump.
static_assert(hdr::kType == 0 && hdr::kFlags == 1 && hdr::kChecksum == 4 && hdr::kPageNo == 8 &&
              hdr::kGeneration == 12);
static_assert(hdr::kGeneration + 4 == kPageHeaderSize);
static_assert(ValidPageSize(kMinPageSize) && ValidPageSize(kMaxPageSize) &&
              ValidPageSize(kDefaultPageSize));
static_assert(!ValidPageSize(0) && !ValidPageSize(6144) && !ValidPageSize(65536));
// Several per-page u16 fields (data page offsets, data_start == page_size) rely on this.
static_assert(kMaxPageSize <= 0xFFFF);

namespace {

constexpr PageType kLastPageType = PageType::kDoublewrite;

bool AllZero(const uint8_t* p, size_t n) {
  // Page sizes are multiples of 8; compare a word at a time.
  for (size_t i = 0; i + 8 <= n; i += 8) {
    if (util::Get64(p + i) != 0) return false;
  }
  for (size_t i = n & ~size_t{7}; i < n; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

const char* FileName(const char* f) { return f != nullptr ? f : "(unnamed file)"; }

}  // namespace

const char* PageTypeName(PageType t) {
  switch (t) {
    case PageType::kFree: return "free";
    case PageType::kHeader: return "header";
    case PageType::kPip: return "pip";
    case PageType::kTip: return "tip";
    case PageType::kPointer: return "pointer";
    case PageType::kData: return "data";
    case PageType::kIndexRoot: return "index_root";
    case PageType::kBtree: return "btree";
    case PageType::kBlob: return "blob";
    case PageType::kDoublewrite: return "doublewrite";
  }
  return "unknown";
}

PageType GetType(const uint8_t* page) { return static_cast<PageType>(page[hdr::kType]); }
uint8_t GetFlags(const uint8_t* page) { return page[hdr::kFlags]; }
void SetFlags(uint8_t* page, uint8_t flags) { page[hdr::kFlags] = flags; }
PageNo GetPageNo(const uint8_t* page) { return util::Get32(page + hdr::kPageNo); }
uint32_t GetGeneration(const uint8_t* page) { return util::Get32(page + hdr::kGeneration); }

void InitPage(uint8_t* page, uint32_t page_size, PageType type, PageNo no) {
  std::memset(page, 0, page_size);
  page[hdr::kType] = static_cast<uint8_t>(type);
  util::Put32(page + hdr::kPageNo, no);
  util::Put32(page + hdr::kGeneration, 0);
}

uint32_t ComputeChecksum(const uint8_t* page, uint32_t page_size, uint32_t seed) {
  // The checksum field counts as zero without touching the caller's bytes, so a const page
  // (e.g. a shared buffer-cache frame) can be checked in place.
  static constexpr uint8_t kZero[4] = {0, 0, 0, 0};
  uint32_t crc = util::Crc32cExtend(seed, page, hdr::kChecksum);
  crc = util::Crc32cExtend(crc, kZero, sizeof kZero);
  return util::Crc32cExtend(crc, page + hdr::kChecksum + 4, page_size - (hdr::kChecksum + 4));
}

void SealPage(uint8_t* page, uint32_t page_size) {
  SealPageAs(page, page_size, GetGeneration(page) + 1);
}

void SealPageAs(uint8_t* page, uint32_t page_size, uint32_t generation) {
  util::Put32(page + hdr::kGeneration, generation);
  util::Put32(page + hdr::kChecksum, ComputeChecksum(page, page_size));
}

absl::Status VerifyPage(const uint8_t* page, uint32_t page_size, PageNo expected_no,
                        const char* file_for_errors) {
  if (!ValidPageSize(page_size)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "page %u of %s: invalid page size %u", expected_no, FileName(file_for_errors), page_size));
  }
  const uint32_t stored = util::Get32(page + hdr::kChecksum);
  // A page allocated but never written reads back as zeros (sparse file, or extended and not
  // yet flushed); that is a legitimate state, not corruption.
  if (stored == 0 && page[hdr::kType] == 0 && AllZero(page, page_size)) return absl::OkStatus();

  const uint32_t computed = ComputeChecksum(page, page_size);
  if (stored != computed) {
    return absl::DataLossError(
        absl::StrFormat("page %u of %s: checksum mismatch (stored 0x%08x, computed 0x%08x)",
                        expected_no, FileName(file_for_errors), stored, computed));
  }
  const PageNo actual = GetPageNo(page);
  if (actual != expected_no) {
    return absl::DataLossError(absl::StrFormat("page %u of %s: holds page %u (misdirected write)",
                                               expected_no, FileName(file_for_errors), actual));
  }
  if (page[hdr::kType] > static_cast<uint8_t>(kLastPageType)) {
    return absl::DataLossError(absl::StrFormat("page %u of %s: unknown page type %u", expected_no,
                                               FileName(file_for_errors), page[hdr::kType]));
  }
  return absl::OkStatus();
}

}  // namespace ember::page
