// Record pages of the doublewrite area (see doublewrite_page.h for the layout).
#include "engine/page/doublewrite_page.h"

#include "absl/strings/str_cat.h"
#include "engine/util/coding.h"
#include "engine/util/crc32c.h"

namespace ember::page {

namespace {
constexpr size_t kSeqOff = 16, kRetiredOff = 24, kCountOff = 32, kNVoidOff = 36, kNCommitOff = 38,
                 kEntriesOff = kDwHeaderSize, kEntrySize = 12;
static_assert(kSeqOff == kPageHeaderSize);
static_assert(DwMaxEntries(kMinPageSize, kDwMaxCommits) >= 128);
static_assert(DoublewriteEnd(kMinPageSize) <= 4096);  // well inside PIP 0's range
}  // namespace

uint32_t CopyChecksum(const uint8_t* page, uint32_t page_size, uint64_t seq, uint32_t index) {
  uint8_t seed[12];
  util::Put64(seed, seq);
  util::Put32(seed + 8, index);
  return ComputeChecksum(page, page_size, util::Crc32c(seed, sizeof seed));
}

void WriteDwRecord(uint8_t* page, uint32_t page_size, PageNo slot_page_no, const DwRecord& r) {
  InitPage(page, page_size, PageType::kDoublewrite, slot_page_no);
  util::Put64(page + kSeqOff, r.seq);
  util::Put64(page + kRetiredOff, r.retired_through);
  util::Put32(page + kCountOff, static_cast<uint32_t>(r.entries.size()));
  util::Put16(page + kNVoidOff, static_cast<uint16_t>(r.voids.size()));
  util::Put16(page + kNCommitOff, static_cast<uint16_t>(r.commits.size()));
  uint8_t* p = page + kEntriesOff;
  for (const DwEntry& e : r.entries) {
    util::Put32(p, e.page_no);
    util::Put32(p + 4, e.slot);
    util::Put32(p + 8, e.checksum);
    p += kEntrySize;
  }
  for (uint64_t v : r.voids) {
    util::Put64(p, v);
    p += 8;
  }
  for (uint64_t t : r.commits) {
    util::Put64(p, t);
    p += 8;
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
  const uint32_t nvoid = util::Get16(page + kNVoidOff);
  const uint32_t ncommit = util::Get16(page + kNCommitOff);
  if (nvoid > kDwMaxVoids || ncommit > kDwMaxCommits || n > DwMaxEntries(page_size, ncommit)) {
    return absl::DataLossError(absl::StrCat("doublewrite record on page ", GetPageNo(page),
                                            " lists ", n, " entries, ", nvoid, " voids and ",
                                            ncommit, " commits, more than a page holds"));
  }
  r.entries.resize(n);
  const uint8_t* p = page + kEntriesOff;
  for (DwEntry& e : r.entries) {
    e.page_no = util::Get32(p);
    e.slot = util::Get32(p + 4);
    e.checksum = util::Get32(p + 8);
    p += kEntrySize;
  }
  r.voids.resize(nvoid);
  for (uint64_t& v : r.voids) {
    v = util::Get64(p);
    p += 8;
  }
  r.commits.resize(ncommit);
  for (uint64_t& t : r.commits) {
    t = util::Get64(p);
    p += 8;
  }
  return r;
}

}  // namespace ember::page
