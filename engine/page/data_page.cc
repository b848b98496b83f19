// Slotted data pages: record placement, compaction and the structural check (see data_page.h).
//
// Invariants kept by every mutation (and verified by DpCheck), so that the counters in the
// header never drift from the line array:
//   * data_start == the lowest offset of a live line, or page_size when there is none;
//   * free_bytes == page_size - (32 + 4 * line_count) - (sum of live lengths), i.e. the gap
//     between the line array and data_start plus every hole left among the records;
//   * the last line of the array is live (trailing empty lines are dropped);
//   * an empty line is {0, 0}; a live line has length >= 1 and lies in [array end, page_size);
//   * live records do not overlap.
// Empty records are not stored: an empty line is marked by offset 0 and a zero-length record
// would need an offset of its own, so DpInsert / DpInsertAt / DpReplace refuse empty input.
#include "engine/page/data_page.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/util/coding.h"

namespace ember::page {

namespace {

constexpr size_t kRelationOff = 16, kSequenceOff = 20, kLineCountOff = 24, kDataStartOff = 26,
                 kFreeBytesOff = 28, kFreeHintOff = 30;
static_assert(kRelationOff == kPageHeaderSize && kFreeHintOff + 2 == kDpLinesOffset);
// data_start == page_size and every offset/length must fit the u16 fields.
static_assert(kMaxPageSize <= 0xFFFF && MaxRecordOnPage(kMaxPageSize) <= 0xFFFF);
// Lines are never the limit: even 1-byte records run out of room before the u16 line numbers.
static_assert((kMaxPageSize - kDpLinesOffset) / (kDpLineSize + 1) < kMaxLinesPerPage);

struct Line {
  uint16_t off = 0, len = 0;
};

uint16_t LineCount(const uint8_t* page) { return util::Get16(page + kLineCountOff); }
uint16_t DataStart(const uint8_t* page) { return util::Get16(page + kDataStartOff); }
uint16_t FreeBytes(const uint8_t* page) { return util::Get16(page + kFreeBytesOff); }
void SetLineCount(uint8_t* page, uint32_t v) {
  util::Put16(page + kLineCountOff, static_cast<uint16_t>(v));
}
void SetDataStart(uint8_t* page, uint32_t v) {
  util::Put16(page + kDataStartOff, static_cast<uint16_t>(v));
}
void SetFreeBytes(uint8_t* page, uint32_t v) {
  util::Put16(page + kFreeBytesOff, static_cast<uint16_t>(v));
}
// Every line below free_hint is in use: DpInsert's search for the lowest empty line starts there
// (a page that only grows, as under a mass update pushing down back versions, has none, and the
// scan of its whole line array was a tenth of the update's instructions). A hint too low only
// costs a longer scan; DpCheck reports one that is too high.
uint16_t FreeHint(const uint8_t* page) { return util::Get16(page + kFreeHintOff); }
void SetFreeHint(uint8_t* page, uint32_t v) {
  util::Put16(page + kFreeHintOff, static_cast<uint16_t>(v));
}

constexpr size_t ArrayEnd(size_t line_count) { return kDpLinesOffset + kDpLineSize * line_count; }

Line GetLine(const uint8_t* page, uint32_t i) {
  const uint8_t* p = page + ArrayEnd(i);
  return Line{util::Get16(p), util::Get16(p + 2)};
}
void SetLine(uint8_t* page, uint32_t i, Line l) {
  uint8_t* p = page + ArrayEnd(i);
  util::Put16(p, l.off);
  util::Put16(p + 2, l.len);
}

// A live line entry that stays inside the page and clear of the line array.
bool LiveLineValid(Line l, uint32_t line_count, uint32_t page_size) {
  return l.off != 0 && l.len != 0 && l.off >= ArrayEnd(line_count) &&
         uint32_t{l.off} + l.len <= page_size;
}

// Cheap bounds check of the header counters: mutators refuse a page that fails it rather than
// compute offsets from nonsense. (DpCheck is the full check.)
bool HeaderSane(const uint8_t* page, uint32_t page_size) {
  const size_t end = ArrayEnd(LineCount(page));
  const uint32_t ds = DataStart(page);
  return end <= ds && ds <= page_size && FreeBytes(page) <= page_size - end;
}

// Moves every live record (except line `skip`, which the caller is about to re-place) to the
// end of the page, keeping line numbers, and sets data_start. free_bytes is unchanged because
// it already counts the holes. False, with the page untouched, if a line entry is corrupt.
bool Compact(uint8_t* page, uint32_t page_size, int skip) {
  const uint32_t lc = LineCount(page);
  size_t total = 0;
  for (uint32_t i = 0; i < lc; ++i) {
    const Line l = GetLine(page, i);
    if (l.off == 0 || static_cast<int>(i) == skip) continue;
    if (!LiveLineValid(l, lc, page_size)) return false;
    total += l.len;
  }
  // Overlapping (corrupt) entries could sum past the space available; packing them would then
  // write over the line array.
  if (total > page_size - ArrayEnd(lc)) return false;
  // Packed in line order into a scratch copy, then copied back in one piece: no sort by offset
  // (a mass update compacts a page of a few hundred lines several times over).
  thread_local std::vector<uint8_t> scratch;
  if (scratch.size() < page_size) scratch.resize(page_size);
  uint32_t cursor = page_size;
  for (uint32_t i = 0; i < lc; ++i) {
    const Line l = GetLine(page, i);
    if (l.off == 0 || static_cast<int>(i) == skip) continue;
    cursor -= l.len;
    std::memcpy(scratch.data() + cursor, page + l.off, l.len);
    SetLine(page, i, Line{static_cast<uint16_t>(cursor), l.len});
  }
  std::memcpy(page + cursor, scratch.data() + cursor, page_size - cursor);
  // Clear the reclaimed gap so deleted record bytes do not linger in the file.
  std::memset(page + ArrayEnd(lc), 0, cursor - ArrayEnd(lc));
  SetDataStart(page, cursor);
  return true;
}

// Writes `rec` just below data_start for line `line` (< line_count). The caller has made sure
// the gap holds it.
void PlaceInGap(uint8_t* page, uint32_t line, std::string_view rec) {
  const uint32_t off = DataStart(page) - static_cast<uint32_t>(rec.size());
  std::memmove(page + off, rec.data(), rec.size());
  SetLine(page, line, Line{static_cast<uint16_t>(off), static_cast<uint16_t>(rec.size())});
  SetDataStart(page, off);
}

bool InsertImpl(uint8_t* page, uint32_t page_size, uint32_t line, std::string_view rec) {
  if (rec.empty() || rec.size() > MaxRecordOnPage(page_size)) return false;
  if (!HeaderSane(page, page_size)) return false;
  const uint32_t lc = LineCount(page);
  uint32_t new_lc = lc;
  if (line < lc) {
    if (GetLine(page, line).off != 0) return false;
  } else {
    if (line >= kMaxLinesPerPage) return false;  // line_count is a u16
    new_lc = line + 1;
  }
  const size_t added_lines = new_lc - lc;
  const size_t fb = FreeBytes(page);
  if (rec.size() + kDpLineSize * added_lines > fb) return false;

  std::string copy;
  if (DataStart(page) < ArrayEnd(new_lc) + rec.size()) {
    // Compaction moves bytes around the page; `rec` may point into it.
    copy.assign(rec);
    rec = copy;
    if (!Compact(page, page_size, -1)) return false;
  }
  // The new entries may cover stale bytes of the old gap: start them empty.
  std::memset(page + ArrayEnd(lc), 0, kDpLineSize * added_lines);
  SetLineCount(page, new_lc);
  PlaceInGap(page, line, rec);
  SetFreeBytes(page, static_cast<uint32_t>(fb - rec.size() - kDpLineSize * added_lines));
  return true;
}

}  // namespace

void InitDataPage(uint8_t* page, uint32_t page_size, PageNo no, uint32_t relation_id,
                  uint32_t sequence) {
  InitPage(page, page_size, PageType::kData, no);
  util::Put32(page + kRelationOff, relation_id);
  util::Put32(page + kSequenceOff, sequence);
  SetLineCount(page, 0);
  SetFreeHint(page, 0);
  SetDataStart(page, page_size);
  SetFreeBytes(page, page_size - static_cast<uint32_t>(kDpLinesOffset));
}

uint32_t DpRelation(const uint8_t* page) { return util::Get32(page + kRelationOff); }
uint32_t DpSequence(const uint8_t* page) { return util::Get32(page + kSequenceOff); }
uint16_t DpLineCount(const uint8_t* page) { return LineCount(page); }

uint32_t DpFreeSpace(const uint8_t* page, uint32_t page_size) {
  if (!HeaderSane(page, page_size)) return 0;
  return FreeBytes(page);
}

std::optional<uint16_t> DpInsert(uint8_t* page, uint32_t page_size, std::string_view rec) {
  if (!HeaderSane(page, page_size)) return std::nullopt;
  const uint32_t lc = LineCount(page);
  // The first free line, eight entries per step: a page that only grows (a mass update adding
  // back versions) has none, and this scan runs for every version pushed down. A 64-bit load
  // holds two entries, each offset in the low half of a 32-bit lane; adding 0xFFFF to a lane's
  // offset carries into bit 16 exactly when the offset is not 0 (a free line).
  uint32_t line = std::min<uint32_t>(FreeHint(page), lc);
  const uint8_t* entries = page + kDpLinesOffset;
  static_assert(kDpLineSize == 4);
  constexpr uint64_t kOff = 0x0000FFFF0000FFFFull, kCarry = 0x0001000000010000ull;
  auto both_used = [&](uint32_t l) {
    return ((util::Get64(entries + kDpLineSize * l) & kOff) + kOff) & kCarry;
  };
  for (; line + 8 <= lc; line += 8) {
    if ((both_used(line) & both_used(line + 2) & both_used(line + 4) & both_used(line + 6)) !=
        kCarry) {
      break;
    }
  }
  while (line < lc && GetLine(page, line).off != 0) ++line;
  if (!InsertImpl(page, page_size, line, rec)) return std::nullopt;
  SetFreeHint(page, line + 1);  // the lines below were in use, and this one is now
  return static_cast<uint16_t>(line);
}

bool DpInsertAt(uint8_t* page, uint32_t page_size, uint16_t line, std::string_view rec) {
  if (!InsertImpl(page, page_size, line, rec)) return false;
  if (line == FreeHint(page)) SetFreeHint(page, line + 1u);
  return true;
}

std::optional<std::string_view> DpGet(const uint8_t* page, uint32_t page_size, uint16_t line) {
  const uint32_t lc = LineCount(page);
  if (line >= lc || ArrayEnd(lc) > page_size) return std::nullopt;
  const Line l = GetLine(page, line);
  if (!LiveLineValid(l, lc, page_size)) return std::nullopt;
  return std::string_view(reinterpret_cast<const char*>(page + l.off), l.len);
}

bool DpReplace(uint8_t* page, uint32_t page_size, uint16_t line, std::string_view rec) {
  if (rec.empty() || !HeaderSane(page, page_size)) return false;
  const uint32_t lc = LineCount(page);
  if (line >= lc) return false;
  const Line old = GetLine(page, line);
  if (!LiveLineValid(old, lc, page_size)) return false;
  const size_t fb = FreeBytes(page);

  if (rec.size() <= old.len) {
    // Shrinking in place keeps the offset (and so data_start); the tail becomes a hole.
    std::memmove(page + old.off, rec.data(), rec.size());
    SetLine(page, line, Line{old.off, static_cast<uint16_t>(rec.size())});
    SetFreeBytes(page, static_cast<uint32_t>(fb + old.len - rec.size()));
    return true;
  }
  const size_t extra = rec.size() - old.len;
  if (extra > fb) return false;
  std::string copy;
  if (DataStart(page) < ArrayEnd(lc) + rec.size()) {
    // Only compaction that also reclaims the old copy makes room. `rec` may be (or overlap)
    // the old bytes, which compaction will overwrite.
    copy.assign(rec);
    rec = copy;
    if (!Compact(page, page_size, line)) return false;
  }
  PlaceInGap(page, line, rec);
  SetFreeBytes(page, static_cast<uint32_t>(fb - extra));
  return true;
}

void DpDelete(uint8_t* page, uint32_t page_size, uint16_t line) {
  if (!HeaderSane(page, page_size)) return;
  uint32_t lc = LineCount(page);
  if (line >= lc) return;
  const Line old = GetLine(page, line);
  if (!LiveLineValid(old, lc, page_size)) return;
  uint32_t fb = FreeBytes(page) + old.len;
  SetLine(page, line, Line{});
  if (line < FreeHint(page)) SetFreeHint(page, line);
  while (lc > 0 && GetLine(page, lc - 1).off == 0) {
    --lc;
    SetLine(page, lc, Line{});
    fb += kDpLineSize;
  }
  SetLineCount(page, lc);
  SetFreeBytes(page, fb);
  if (old.off == DataStart(page)) {
    // The lowest record went: data_start rises to the next one (the freed bytes join the gap).
    uint32_t lowest = page_size;
    for (uint32_t i = 0; i < lc; ++i) {
      const Line l = GetLine(page, i);
      if (l.off != 0 && l.off < lowest) lowest = l.off;
    }
    SetDataStart(page, lowest);
  }
}

uint16_t DpLiveLines(const uint8_t* page, uint32_t page_size) {
  // Bound the scan by data_start, which on a page that passes DpCheck is at or after the end of
  // the line array, and by the page size: the engine also counts on pages only VerifyPage has
  // seen (Relation::HeadInlineLimit, when DpFreeSpace says 0 for a header it finds insane), and
  // a damaged data_start up to 64 KiB must not take the walk past a smaller page.
  const uint32_t ds = std::min<uint32_t>({DataStart(page), page_size, kMaxPageSize});
  const uint32_t max_lines = ds > kDpLinesOffset ? (ds - kDpLinesOffset) / kDpLineSize : 0;
  const uint32_t lc = std::min<uint32_t>(LineCount(page), max_lines);
  uint16_t n = 0;
  for (uint32_t i = 0; i < lc; ++i) n += GetLine(page, i).off != 0;
  return n;
}

std::string DpCheck(const uint8_t* page, uint32_t page_size) {
  if (GetType(page) != PageType::kData) {
    return absl::StrFormat("page type is %s, not data", PageTypeName(GetType(page)));
  }
  const uint32_t lc = LineCount(page);
  const size_t end = ArrayEnd(lc);
  if (end > page_size) {
    return absl::StrFormat("line_count %u: the line array would end at %u, past the page end %u",
                           lc, end, page_size);
  }
  const uint32_t ds = DataStart(page);
  if (ds < end || ds > page_size) {
    return absl::StrFormat("data_start %u outside [%u, %u] (line array end, page size)", ds, end,
                           page_size);
  }
  struct Entry {
    uint32_t off, len, line;
  };
  std::vector<Entry> live;
  live.reserve(lc);
  size_t total = 0;
  for (uint32_t i = 0; i < lc; ++i) {
    const Line l = GetLine(page, i);
    if (l.off == 0) {
      if (l.len != 0) return absl::StrFormat("line %u: empty (offset 0) but length %u", i, l.len);
      if (i < FreeHint(page)) {
        return absl::StrFormat("line %u: empty below free_hint %u", i, FreeHint(page));
      }
      continue;
    }
    if (l.len == 0) return absl::StrFormat("line %u: offset %u with length 0", i, l.off);
    if (l.off < end) {
      return absl::StrFormat("line %u: offset %u points into the line array (ends at %u)", i, l.off,
                             end);
    }
    if (uint32_t{l.off} + l.len > page_size) {
      return absl::StrFormat("line %u: bytes [%u, %u) run past the page end %u", i, l.off,
                             uint32_t{l.off} + l.len, page_size);
    }
    live.push_back({l.off, l.len, i});
    total += l.len;
  }
  if (lc > 0 && GetLine(page, lc - 1).off == 0) {
    return absl::StrFormat("line_count %u but the last line is empty (should have been dropped)",
                           lc);
  }
  std::sort(live.begin(), live.end(), [](const Entry& a, const Entry& b) { return a.off < b.off; });
  for (size_t k = 1; k < live.size(); ++k) {
    const Entry& a = live[k - 1];
    const Entry& b = live[k];
    if (a.off + a.len > b.off) {
      return absl::StrFormat("lines %u [%u, %u) and %u [%u, %u) overlap", a.line, a.off,
                             a.off + a.len, b.line, b.off, b.off + b.len);
    }
  }
  const uint32_t lowest = live.empty() ? page_size : live.front().off;
  if (ds != lowest) {
    return absl::StrFormat("data_start %u but the lowest record starts at %u", ds, lowest);
  }
  const size_t expect_free = page_size - end - total;
  if (FreeBytes(page) != expect_free) {
    return absl::StrFormat("free_bytes %u but the lines leave %u free", FreeBytes(page),
                           expect_free);
  }
  return "";
}

}  // namespace ember::page
