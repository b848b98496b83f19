// Slotted data pages: records (record versions and fragments) of one relation. A line array
// grows up from offset 32; record bytes are packed down from the end of the page. A record's
// number is (data page sequence << 16) | line, so it never changes while the record lives.
//
//   offset size field
//   0      16   page header (type kData; flags = PpFlag bits mirrored from the pointer page)
//   16     4    relation_id
//   20     4    sequence    data page sequence in the relation
//   24     2    line_count  lines in the array (some may be empty)
//   26     2    data_start  lowest offset used by record bytes (page_size when none)
//   28     2    free_bytes  bytes reclaimable by compaction plus the gap
//   30     2    free_hint   every line below it is in use (where the search for an empty one
//                           starts)
//   32     4*L  lines: {u16 offset, u16 length}; offset 0 = empty line
//
// Record bytes are opaque here (the record layer defines them, docs/format.md shows both).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/page/page.h"

namespace ember::page {

constexpr size_t kDpLinesOffset = 32;
constexpr size_t kDpLineSize = 4;
constexpr uint16_t kMaxLinesPerPage = 0xFFFF;

inline uint64_t MakeRecordNo(uint32_t dp_sequence, uint16_t line) {
  return (uint64_t{dp_sequence} << 16) | line;
}
inline uint32_t RecordDpSequence(uint64_t rec_no) { return static_cast<uint32_t>(rec_no >> 16); }
inline uint16_t RecordLine(uint64_t rec_no) { return static_cast<uint16_t>(rec_no & 0xFFFF); }

// Largest record that fits on an empty page (one line).
constexpr uint32_t MaxRecordOnPage(uint32_t page_size) {
  return page_size - static_cast<uint32_t>(kDpLinesOffset + kDpLineSize);
}

void InitDataPage(uint8_t* page, uint32_t page_size, PageNo no, uint32_t relation_id,
                  uint32_t sequence);
uint32_t DpRelation(const uint8_t* page);
uint32_t DpSequence(const uint8_t* page);
uint16_t DpLineCount(const uint8_t* page);

// Bytes available for one more record including its line entry, counting space compaction
// would reclaim.
uint32_t DpFreeSpace(const uint8_t* page, uint32_t page_size);
// Stores `rec` in the lowest empty line (or a new one), compacting if needed. nullopt if it does
// not fit.
std::optional<uint16_t> DpInsert(uint8_t* page, uint32_t page_size, std::string_view rec);
// Stores `rec` at a specific empty line (used to keep a record number when moving versions);
// false if the line is in use or the bytes do not fit.
bool DpInsertAt(uint8_t* page, uint32_t page_size, uint16_t line, std::string_view rec);
// The bytes of a line; nullopt for an empty or out-of-range line or a corrupt line entry.
std::optional<std::string_view> DpGet(const uint8_t* page, uint32_t page_size, uint16_t line);
// Replaces a line's bytes in place or elsewhere on the page; false if it does not fit (the old
// bytes are then unchanged).
bool DpReplace(uint8_t* page, uint32_t page_size, uint16_t line, std::string_view rec);
// Empties a line (trailing empty lines are dropped from the array).
void DpDelete(uint8_t* page, uint32_t page_size, uint16_t line);
// Number of non-empty lines. Reads no further than `page_size` (or data_start) whatever the
// header says; the default (the largest page size) is only safe on a page DpCheck accepts.
uint16_t DpLiveLines(const uint8_t* page, uint32_t page_size = kMaxPageSize);
// Structural check for Validate(): line entries inside the page, not overlapping, counters
// consistent. Returns a description of the first problem, or empty.
std::string DpCheck(const uint8_t* page, uint32_t page_size);

}  // namespace ember::page
