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
// A record is what one flush of the buffer cache writes: the images of its pages and the
// transactions it commits. Recovery applies records whole and in chain order (doublewrite.h).
//
// Record page (type kDoublewrite), also used for markers (no entries, no commits):
//   offset size field
//   0      16   page header (type kDoublewrite, page_no = the slot's own page number)
//   16     8    seq              records: sequence number, consecutive from one record to the
//                                next; markers: their own serial (the newer marker has the higher)
//   24     8    retired_through  every record with seq <= this is void: its pages are on disk
//   32     4    count            entries that follow
//   36     2    nvoid            failed records this page declares void (never applied)
//   38     2    ncommit          transactions this record commits
//   40     8    reserved (0)
//   48     12*count  entries: page_no u32, slot u32 (ring index of the copy), checksum u32
//   ...    8*nvoid   seqs of the void records
//   ...    8*ncommit ids of the committed transactions
// A copy in the ring is the page's image with its checksum field replaced by CopyChecksum(seq,
// index), index being the entry's position in the record: a slot left over from an older record
// fails that check, so it cannot pass as part of this one. `checksum` in the entry is the
// image's own (home) checksum, put back on recovery. The images fill the slots after the record
// page in entry order; an entry with slot kHomeSlot (a page written for the first time since its
// allocation) has no image: it was written home before the record's sync, and `checksum` proves
// it there.
#pragma once
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/page/page.h"

namespace ember::page {

constexpr PageNo kDoublewriteFirst = 2;
constexpr uint32_t kMarkerSlots = 2;
// Records a page declares void at most (failed records not yet retired), and transactions one
// record commits at most: the room a record page keeps for those lists.
constexpr uint32_t kDwMaxVoids = 8;
constexpr uint32_t kDwMaxCommits = 256;
// The slot of an entry whose page has no image in the ring: a page written for the first time
// since its allocation, written home before the record's sync and proven by its checksum.
constexpr uint32_t kHomeSlot = UINT32_MAX;

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
  uint32_t slot = 0;      // slot of the copy (index in the area), or kHomeSlot
  uint32_t checksum = 0;  // the image's own page checksum (what it has at home)
};

struct DwRecord {
  uint64_t seq = 0;
  uint64_t retired_through = 0;
  std::vector<DwEntry> entries;
  std::vector<uint64_t> voids;
  std::vector<uint64_t> commits;
};

constexpr size_t kDwHeaderSize = 48;
// Entries a record page can list next to full lists of voids and `commits` transactions.
constexpr uint32_t DwMaxEntries(uint32_t page_size, uint32_t commits = 0) {
  return static_cast<uint32_t>((page_size - kDwHeaderSize - 8 * kDwMaxVoids - 8 * commits) / 12);
}

// The checksum a copy carries in the ring: CRC32C of the image (checksum field as 0) seeded with
// the record's seq and the copy's index in the record.
uint32_t CopyChecksum(const uint8_t* page, uint32_t page_size, uint64_t seq, uint32_t index);

// Formats `page` (page_size bytes) as the record page of slot page `slot_page_no`. REQUIRES
// r.voids.size() <= kDwMaxVoids, r.commits.size() <= kDwMaxCommits and
// r.entries.size() <= DwMaxEntries(page_size, r.commits.size()). Seals it (checksum).
void WriteDwRecord(uint8_t* page, uint32_t page_size, PageNo slot_page_no, const DwRecord& r);
// Decodes a record page already verified (VerifyPage); DataLoss when the type is not
// kDoublewrite or the lists do not fit the page.
absl::StatusOr<DwRecord> ReadDwRecord(const uint8_t* page, uint32_t page_size);

}  // namespace ember::page
