// Page inventory pages (PIP): the free-page bitmap. PIP k covers pages
// [k * PagesPerPip(ps), (k+1) * PagesPerPip(ps)) and lives at page 1 for k = 0 and at the first
// page of its range for k >= 1, so no links are needed. Bit = 1 means FREE.
//
//   offset size field
//   0      16   page header (type kPip)
//   16     4    first_page  first page number covered
//   20     4    min_free    lowest bit index that may be free (a search hint)
//   24     8    reserved
//   32     ...  bitmap, bit i of byte i/8 (LSB first) for page first_page + i
#pragma once
#include <cstdint>
#include <optional>

#include "engine/page/page.h"

namespace ember::page {

constexpr size_t kPipBitmapOffset = 32;
constexpr uint32_t PagesPerPip(uint32_t page_size) { return (page_size - kPipBitmapOffset) * 8; }
// The page holding PIP number k.
constexpr PageNo PipPageNo(uint32_t k, uint32_t page_size) {
  return k == 0 ? 1 : k * PagesPerPip(page_size);
}

// Initialises a PIP covering from `first_page` with every page free except the PIP itself (and,
// for PIP 0, pages 0 and 1).
void InitPip(uint8_t* page, uint32_t page_size, PageNo pip_no, PageNo first_page);
bool PipIsFree(const uint8_t* page, uint32_t page_size, PageNo p);
void PipSetFree(uint8_t* page, uint32_t page_size, PageNo p, bool free);
// Lowest free page covered by this PIP at or after the min_free hint; updates the hint.
std::optional<PageNo> PipFindFree(uint8_t* page, uint32_t page_size);
// Lowest run of `n` free pages (n a multiple of 8, at most 64) starting at a multiple of `n`
// (PIP ranges start at multiples of 64, so that is a multiple in the file too). Leaves the
// bits and the hint alone: the caller marks the pages used.
std::optional<PageNo> PipFindFreeRun(const uint8_t* page, uint32_t page_size, uint32_t n);

}  // namespace ember::page
