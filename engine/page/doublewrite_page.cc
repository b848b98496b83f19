// Record pages of the doublewrite area (see doublewrite_page.h for the layout).
#include "engine/page/doublewrite_page.h"

#include "absl/strings/str_cat.h"
#include "engine/util/coding.h"

namespace ember::page {

namespace {
constexpr size_t kSeqOff = 16, kRetiredOff = 24, kCountOff = 32, kEntriesOff = 40, kEntrySize = 12;
static_assert(kSeqOff == kPageHeaderSize);
static_assert(DwMaxEntries(kMinPageSize) >= 256);
static_assert(DoublewriteEnd(kMinPageSize) <= 4096);  // well inside PIP 0's range
}  // namespace

void WriteDwRecord(uint8_t* page, uint32_t page_size, PageNo slot_page_no, const DwRecord& r) {
  InitPage(page, page_size, PageType::kDoublewrite, slot_page_no);
  util::Put64(page + kSeqOff, r.seq);
  util::Put64(page + kRetiredOff, r.retired_through);
  util::Put32(page + kCountOff, static_cast<uint32_t>(r.entries.size()));
  uint8_t* p = page + kEntriesOff;
  for (const DwEntry& e : r.entries) {
    util::Put32(p, e.page_no);
    util::Put32(p + 4, e.slot);
    util::Put32(p + 8, e.checksum);
    p += kEntrySize;
  }
  SealPage(page, page_size);
}

absl::StatusOr<DwRecord> ReadDwRecord(const uint8_t* page, uint32_t page_size) {
  if (GetType(page) != PageType::kDoublewrite) {
    return absl::DataLossError(
        absl::StrCat("page ", GetPageNo(page), " is not a doublewrite record"));
  }
  DwRecord r;
  r.seq = util::Get64(page + kSeqOff);
  r.retired_through = util::Get64(page + kRetiredOff);
  const uint32_t n = util::Get32(page + kCountOff);
  if (n > DwMaxEntries(page_size)) {
    return absl::DataLossError(absl::StrCat("doublewrite record on page ", GetPageNo(page),
                                            " lists ", n, " entries, more than a page holds"));
  }
  r.entries.resize(n);
  const uint8_t* p = page + kEntriesOff;
  for (DwEntry& e : r.entries) {
    e.page_no = util::Get32(p);
    e.slot = util::Get32(p + 4);
    e.checksum = util::Get32(p + 8);
    p += kEntrySize;
  }
  return r;
}

}  // namespace ember::page
