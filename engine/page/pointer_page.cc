// Pointer pages: a relation's list of data pages with one flag byte per slot
// (see pointer_page.h).
#include "engine/page/pointer_page.h"

#include "engine/util/coding.h"

namespace ember::page {

namespace {

constexpr size_t kRelationOff = 16, kSequenceOff = 20, kNextOff = 24, kCountOff = 28;
static_assert(kRelationOff == kPageHeaderSize && kCountOff + 2 + 2 == kPpSlotsOffset);
// Both arrays must fit, for every page size; 4 bytes of page number plus 1 flag byte per slot.
static_assert(kPpSlotsOffset + 5 * size_t{SlotsPerPointerPage(kMinPageSize)} <= kMinPageSize);
static_assert(kPpSlotsOffset + 5 * size_t{SlotsPerPointerPage(kMaxPageSize)} <= kMaxPageSize);
// count is a u16.
static_assert(SlotsPerPointerPage(kMaxPageSize) <= 0xFFFF);

size_t SlotOff(uint32_t slot) { return kPpSlotsOffset + size_t{4} * slot; }
size_t FlagOff(uint32_t page_size, uint32_t slot) {
  return kPpSlotsOffset + size_t{4} * SlotsPerPointerPage(page_size) + slot;
}
void SetCount(uint8_t* page, uint16_t n) { util::Put16(page + kCountOff, n); }

}  // namespace

void InitPointerPage(uint8_t* page, uint32_t page_size, PageNo no, uint32_t relation_id,
                     uint32_t sequence) {
  InitPage(page, page_size, PageType::kPointer, no);
  util::Put32(page + kRelationOff, relation_id);
  util::Put32(page + kSequenceOff, sequence);
  util::Put32(page + kNextOff, kNoPage);
  SetCount(page, 0);
}

uint32_t PpRelation(const uint8_t* page) { return util::Get32(page + kRelationOff); }
uint32_t PpSequence(const uint8_t* page) { return util::Get32(page + kSequenceOff); }
PageNo PpNext(const uint8_t* page) { return util::Get32(page + kNextOff); }
void PpSetNext(uint8_t* page, PageNo next) { util::Put32(page + kNextOff, next); }
uint16_t PpCount(const uint8_t* page) { return util::Get16(page + kCountOff); }

PageNo PpGetSlot(const uint8_t* page, uint32_t page_size, uint32_t slot) {
  if (slot >= SlotsPerPointerPage(page_size)) return kNoPage;
  return util::Get32(page + SlotOff(slot));
}

void PpSetSlot(uint8_t* page, uint32_t page_size, uint32_t slot, PageNo data_page) {
  const uint32_t n = SlotsPerPointerPage(page_size);
  if (slot >= n) return;
  util::Put32(page + SlotOff(slot), data_page);
  uint32_t count = PpCount(page);
  if (count > n) count = n;  // never trust a stored count to bound a loop over the page
  if (data_page != kNoPage) {
    if (slot >= count) SetCount(page, static_cast<uint16_t>(slot + 1));
    return;
  }
  // A cleared slot's flags describe no page; and count shrinks past trailing empty slots so
  // scans of the relation stop at the last real data page.
  page[FlagOff(page_size, slot)] = 0;
  while (count > 0 && util::Get32(page + SlotOff(count - 1)) == kNoPage) --count;
  SetCount(page, static_cast<uint16_t>(count));
}

uint8_t PpGetFlags(const uint8_t* page, uint32_t page_size, uint32_t slot) {
  if (slot >= SlotsPerPointerPage(page_size)) return 0;
  return page[FlagOff(page_size, slot)];
}

void PpSetFlags(uint8_t* page, uint32_t page_size, uint32_t slot, uint8_t flags) {
  if (slot >= SlotsPerPointerPage(page_size)) return;
  page[FlagOff(page_size, slot)] = flags;
}

}  // namespace ember::page
