// Page inventory pages: the free-page bitmap and the free-page search (see pip.h).
#include "engine/page/pip.h"

#include <bit>
#include <cstring>

#include "engine/page/doublewrite_page.h"
#include "engine/util/coding.h"

namespace ember::page {

namespace {

constexpr size_t kFirstPageOff = 16, kMinFreeOff = 20;
static_assert(kFirstPageOff == kPageHeaderSize && kMinFreeOff + 4 + 8 == kPipBitmapOffset);
// The word-at-a-time search needs a whole number of 64-bit words in every bitmap.
static_assert((kMinPageSize - kPipBitmapOffset) % 8 == 0);
// Runs are aligned in the file only if every PIP's range starts at a multiple of the run length.
static_assert(PagesPerPip(4096) % 64 == 0 && PagesPerPip(8192) % 64 == 0 &&
              PagesPerPip(16384) % 64 == 0 && PagesPerPip(32768) % 64 == 0);
static_assert(PagesPerPip(4096) == 32512 && PipPageNo(0, 4096) == 1 && PipPageNo(2, 4096) == 65024);

PageNo FirstPage(const uint8_t* page) { return util::Get32(page + kFirstPageOff); }
uint32_t MinFree(const uint8_t* page) { return util::Get32(page + kMinFreeOff); }
void SetMinFree(uint8_t* page, uint32_t v) { util::Put32(page + kMinFreeOff, v); }

// Bit index of page `p` in this PIP, or nullopt when the PIP does not cover it.
std::optional<uint32_t> BitIndex(const uint8_t* page, uint32_t page_size, PageNo p) {
  const PageNo first = FirstPage(page);
  if (p < first || p - first >= PagesPerPip(page_size)) return std::nullopt;
  return p - first;
}

void SetBit(uint8_t* page, uint32_t idx, bool v) {
  uint8_t& b = page[kPipBitmapOffset + idx / 8];
  const uint8_t m = static_cast<uint8_t>(1u << (idx % 8));
  b = v ? static_cast<uint8_t>(b | m) : static_cast<uint8_t>(b & ~m);
}

}  // namespace

void InitPip(uint8_t* page, uint32_t page_size, PageNo pip_no, PageNo first_page) {
  InitPage(page, page_size, PageType::kPip, pip_no);
  util::Put32(page + kFirstPageOff, first_page);
  std::memset(page + kPipBitmapOffset, 0xFF, page_size - kPipBitmapOffset);
  if (auto i = BitIndex(page, page_size, pip_no)) SetBit(page, *i, false);
  if (first_page == 0) {
    // Page 0 (the header) is never allocatable; page 1 is PIP 0 itself; the doublewrite area
    // follows.
    SetBit(page, 0, false);
    SetBit(page, 1, false);
    for (PageNo p = kDoublewriteFirst; p < DoublewriteEnd(page_size); ++p) SetBit(page, p, false);
  }
  SetMinFree(page, 0);
  // Settle the hint now so the stored page already says where the first free page is.
  PipFindFree(page, page_size);
}

bool PipIsFree(const uint8_t* page, uint32_t page_size, PageNo p) {
  auto i = BitIndex(page, page_size, p);
  if (!i) return false;
  return (page[kPipBitmapOffset + *i / 8] >> (*i % 8)) & 1;
}

void PipSetFree(uint8_t* page, uint32_t page_size, PageNo p, bool free) {
  auto i = BitIndex(page, page_size, p);
  if (!i) return;
  SetBit(page, *i, free);
  if (free && *i < MinFree(page)) SetMinFree(page, *i);
}

std::optional<PageNo> PipFindFree(uint8_t* page, uint32_t page_size) {
  const uint32_t nbits = PagesPerPip(page_size);
  const uint32_t start = MinFree(page);
  if (start >= nbits) {
    SetMinFree(page, nbits);
    return std::nullopt;
  }
  const uint8_t* bitmap = page + kPipBitmapOffset;
  const uint32_t nwords = nbits / 64;
  uint32_t w = start / 64;
  // Little-endian words keep bit i of the bitmap at bit i % 64 of word i / 64 (LSB-first bytes).
  uint64_t word = util::Get64(bitmap + size_t{w} * 8) & (~uint64_t{0} << (start % 64));
  while (true) {
    if (word != 0) {
      const uint32_t idx = w * 64 + static_cast<uint32_t>(std::countr_zero(word));
      SetMinFree(page, idx);
      return FirstPage(page) + idx;
    }
    if (++w >= nwords) break;
    word = util::Get64(bitmap + size_t{w} * 8);
  }
  SetMinFree(page, nbits);
  return std::nullopt;
}

std::optional<PageNo> PipFindFreeRun(const uint8_t* page, uint32_t page_size, uint32_t n) {
  if (n == 0 || n % 8 != 0 || n > 64) return std::nullopt;
  const uint32_t nbits = PagesPerPip(page_size);
  const uint8_t* bitmap = page + kPipBitmapOffset;
  const uint32_t bytes = n / 8;
  // No page below the hint is free, so no run starts below its group. The hint is read from
  // the page: one past the bitmap (a damaged page) must end the search, not wrap idx + n.
  const uint32_t hint = MinFree(page);
  if (hint >= nbits) return std::nullopt;
  for (uint32_t idx = hint / n * n; idx + n <= nbits; idx += n) {
    const uint8_t* g = bitmap + idx / 8;
    uint32_t b = 0;
    while (b < bytes && g[b] == 0xFF) ++b;
    if (b == bytes) return FirstPage(page) + idx;
  }
  return std::nullopt;
}

}  // namespace ember::page
