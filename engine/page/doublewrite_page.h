// The doublewrite area: a fixed run of pages right after PIP 0 where the buffer cache puts a
// copy of every page it is about to overwrite, so that a write torn by a crash (half old, half
// new: the OS writes 4 KiB at a time, disks 512 B or 4 KiB) can be repaired at the next open.
// This file holds only the layout of the area and of its record pages; the protocol is in
// engine/cache/doublewrite.h, the bytes are described in docs/format.md.
//
// The area is `DoublewriteSlots(page_size)` pages starting at page kDoublewriteFirst. Slots 0 and
// 1 hold retire markers (written alternately, so that a torn marker leaves the other one); the
// other slots are a ring of records: a record is one record page followed by the copies it lists.
//
// Record page (type kDoublewrite), also used for markers (count 0):
//   offset size field
//   0      16   page header (type kDoublewrite, page_no = the slot's own page number)
//   16     8    seq              record sequence number, unique and increasing
//   24     8    retired_through  every record with seq <= this is void: its pages are on disk
//   32     4    count            entries that follow
//   36     4    reserved (0)
//   40     12*n entries: page_no u32, slot u32 (kTombstoneSlot: no copy), checksum u32 of the copy
#pragma once
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/page/page.h"

namespace ember::page {

constexpr PageNo kDoublewriteFirst = 2;
constexpr uint32_t kMarkerSlots = 2;
// A slot value meaning "this page was written without a copy" (first write after allocation):
// older copies of the page in the area must not be applied over it.
constexpr uint32_t kTombstoneSlot = UINT32_MAX;

// Slots of the area for a page size: 8 MiB worth, at least 256 (so 2048 at 4 KiB, 1024 at
// 8 KiB, 512 at 16 KiB, 256 at 32 KiB). A flush copies at most a third of the ring per record
// (Doublewrite::max_items), so that in a long run of records each one's sync also makes the
// record two places back reusable, and a big flush costs one sync per third of the ring. Part of
// the format: fixed at create.
constexpr uint32_t DoublewriteSlots(uint32_t page_size) {
  const uint32_t n = (8u << 20) / page_size;
  return n < 256 ? 256 : n;
}
// First page after the area: where the rest of the database starts at create.
constexpr PageNo DoublewriteEnd(uint32_t page_size) {
  return kDoublewriteFirst + DoublewriteSlots(page_size);
}

struct DwEntry {
  PageNo page_no = 0;
  uint32_t slot = kTombstoneSlot;  // ring slot of the copy (index in the area)
  uint32_t checksum = 0;           // the copy's stored page checksum
};

struct DwRecord {
  uint64_t seq = 0;
  uint64_t retired_through = 0;
  std::vector<DwEntry> entries;
};

// Entries one record page can list.
constexpr uint32_t DwMaxEntries(uint32_t page_size) { return (page_size - 40) / 12; }

// Formats `page` (page_size bytes) as the record page of slot page `slot_page_no`. REQUIRES
// r.entries.size() <= DwMaxEntries(page_size). Seals it (checksum).
void WriteDwRecord(uint8_t* page, uint32_t page_size, PageNo slot_page_no, const DwRecord& r);
// Decodes a record page already verified (VerifyPage); DataLoss when the type is not
// kDoublewrite or the count does not fit the page.
absl::StatusOr<DwRecord> ReadDwRecord(const uint8_t* page, uint32_t page_size);

}  // namespace ember::page
