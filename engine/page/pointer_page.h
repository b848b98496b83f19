// Pointer pages: the list of a relation's data pages. A relation is a chain of pointer pages;
// slot s of pointer page number q names data page sequence q * SlotsPerPointerPage + s.
// Each slot has a flag byte, kept in agreement with the data page's own flags.
//
//   offset size field
//   0      16   page header (type kPointer)
//   16     4    relation_id
//   20     4    sequence    this pointer page's index in the relation's chain
//   24     4    next_pp     next pointer page (0 = none)
//   28     2    count       slots in use (slots at or above count are empty)
//   30     2    reserved
//   32     4*N  data page numbers (0 = empty slot), N = SlotsPerPointerPage
//   32+4N  N    slot flags (PpFlag bits)
#pragma once
#include <cstdint>

#include "engine/page/page.h"

namespace ember::page {

enum PpFlag : uint8_t {
  kPpFull = 0x01,  // the data page has no room for another primary record
  // Every line on the data page is a primary version every snapshot sees, or a fragment of
  // one (set by sweep, cleared before any change; relation_swept.cc).
  kPpSwept = 0x02,
  kPpHasGarbage = 0x04,  // the data page holds versions that may be garbage
  kPpSecondary = 0x08,   // the data page holds only back versions / fragments
};

constexpr size_t kPpSlotsOffset = 32;
constexpr uint32_t SlotsPerPointerPage(uint32_t page_size) {
  return static_cast<uint32_t>((page_size - kPpSlotsOffset) / 5);
}

void InitPointerPage(uint8_t* page, uint32_t page_size, PageNo no, uint32_t relation_id,
                     uint32_t sequence);
uint32_t PpRelation(const uint8_t* page);
uint32_t PpSequence(const uint8_t* page);
PageNo PpNext(const uint8_t* page);
void PpSetNext(uint8_t* page, PageNo next);
uint16_t PpCount(const uint8_t* page);
PageNo PpGetSlot(const uint8_t* page, uint32_t page_size, uint32_t slot);
// Sets slot `slot` (raising count when needed); page 0 clears it.
void PpSetSlot(uint8_t* page, uint32_t page_size, uint32_t slot, PageNo data_page);
uint8_t PpGetFlags(const uint8_t* page, uint32_t page_size, uint32_t slot);
void PpSetFlags(uint8_t* page, uint32_t page_size, uint32_t slot, uint8_t flags);

}  // namespace ember::page
