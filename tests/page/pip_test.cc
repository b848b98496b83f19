// Tests for page inventory pages, the free-page bitmap (engine/page/pip.h).
#include "engine/page/pip.h"

#include <catch2/catch.hpp>
#include <random>
#include <set>
#include <vector>

#include "engine/page/doublewrite_page.h"
#include "engine/util/coding.h"

namespace ember::page {
namespace {

TEST_CASE("pip: geometry", "[page]") {
  CHECK(PagesPerPip(4096) == (4096 - 32) * 8);
  CHECK(PagesPerPip(32768) == (32768 - 32) * 8);
  CHECK(PipPageNo(0, 8192) == 1);
  CHECK(PipPageNo(1, 8192) == PagesPerPip(8192));
  CHECK(PipPageNo(3, 8192) == 3 * PagesPerPip(8192));
}

TEST_CASE("pip: PIP 0 reserves the header page, itself and the doublewrite area", "[page]") {
  for (uint32_t ps : {4096u, 8192u, 16384u, 32768u}) {
    INFO("page size " << ps);
    std::vector<uint8_t> page(ps);
    InitPip(page.data(), ps, PipPageNo(0, ps), 0);
    CHECK(GetType(page.data()) == PageType::kPip);
    CHECK(GetPageNo(page.data()) == 1);
    CHECK_FALSE(PipIsFree(page.data(), ps, 0));
    CHECK_FALSE(PipIsFree(page.data(), ps, 1));
    for (PageNo p = kDoublewriteFirst; p < DoublewriteEnd(ps); ++p) {
      REQUIRE_FALSE(PipIsFree(page.data(), ps, p));
    }
    CHECK(PipIsFree(page.data(), ps, DoublewriteEnd(ps)));
    CHECK(PipIsFree(page.data(), ps, PagesPerPip(ps) - 1));
    CHECK_FALSE(PipIsFree(page.data(), ps, PagesPerPip(ps)));  // not covered
    CHECK(PipFindFree(page.data(), ps) == DoublewriteEnd(ps));
    SealPage(page.data(), ps);
    CHECK(VerifyPage(page.data(), ps, 1, "db").ok());
  }
}

TEST_CASE("pip: PIP k >= 1 lives on the first page of its range", "[page]") {
  const uint32_t ps = 4096;
  const PageNo first = PipPageNo(2, ps);
  std::vector<uint8_t> page(ps);
  InitPip(page.data(), ps, first, first);
  CHECK(util::Get32(page.data() + 16) == first);
  CHECK_FALSE(PipIsFree(page.data(), ps, first));
  CHECK(PipIsFree(page.data(), ps, first + 1));
  CHECK_FALSE(PipIsFree(page.data(), ps, first - 1));
  CHECK_FALSE(PipIsFree(page.data(), ps, 0));
  CHECK(PipFindFree(page.data(), ps) == first + 1);
  PipSetFree(page.data(), ps, first - 1, true);  // outside: ignored
  CHECK_FALSE(PipIsFree(page.data(), ps, first - 1));
}

TEST_CASE("pip: bitmap bit order is LSB first and 1 means free", "[page]") {
  const uint32_t ps = 4096;
  std::vector<uint8_t> page(ps);
  InitPip(page.data(), ps, 1, 0);
  // Pages 0 and 1, then the doublewrite area (2048 pages at 4 KiB) in use: bytes 32..287 for
  // pages 0..2047, and pages 2048 and 2049 in byte 288.
  static_assert(DoublewriteEnd(4096) == 2050);
  CHECK(page[32] == 0x00);
  CHECK(page[287] == 0x00);
  CHECK(page[288] == 0xFC);
  CHECK(page[289] == 0xFF);
  CHECK(page[ps - 1] == 0xFF);
  PipSetFree(page.data(), ps, 2057, false);
  CHECK(page[289] == 0xFD);
  PipSetFree(page.data(), ps, 8 * (ps - 32) - 1, false);
  CHECK(page[ps - 1] == 0x7F);
}

TEST_CASE("pip: allocate every page, then free and find again", "[page]") {
  const uint32_t ps = 4096;
  std::vector<uint8_t> page(ps);
  InitPip(page.data(), ps, 1, 0);
  PageNo expect = DoublewriteEnd(ps);
  uint32_t n = 0;
  while (auto p = PipFindFree(page.data(), ps)) {
    REQUIRE(*p == expect);
    PipSetFree(page.data(), ps, *p, false);
    ++expect;
    ++n;
  }
  CHECK(n == PagesPerPip(ps) - DoublewriteEnd(ps));
  CHECK(util::Get32(page.data() + 20) == PagesPerPip(ps));  // hint parked at the end
  CHECK_FALSE(PipFindFree(page.data(), ps).has_value());
  PipSetFree(page.data(), ps, 5000, true);
  CHECK(util::Get32(page.data() + 20) == 5000);
  CHECK(PipFindFree(page.data(), ps) == PageNo{5000});
  PipSetFree(page.data(), ps, 100, true);  // below the hint: the hint follows
  CHECK(PipFindFree(page.data(), ps) == PageNo{100});
  PipSetFree(page.data(), ps, 100, false);
  CHECK(PipFindFree(page.data(), ps) == PageNo{5000});
  PipSetFree(page.data(), ps, 5000, false);
  CHECK_FALSE(PipFindFree(page.data(), ps).has_value());
}

TEST_CASE("pip: random allocate/free against a model", "[page]") {
  for (uint32_t ps : {4096u, 8192u}) {
    INFO("page size " << ps);
    const PageNo first = PipPageNo(1, ps);
    const uint32_t n = PagesPerPip(ps);
    std::vector<uint8_t> page(ps);
    InitPip(page.data(), ps, first, first);
    std::vector<bool> model(n, true);
    model[0] = false;
    std::set<uint32_t> free_set;  // the same, for a quick lowest-free answer
    for (uint32_t i = 1; i < n; ++i) free_set.insert(i);
    std::mt19937 rng(ps + 7);
    for (int op = 0; op < 20000; ++op) {
      if (rng() % 3 != 0) {
        // Allocate: must get the lowest free page.
        auto p = PipFindFree(page.data(), ps);
        const uint32_t lowest = free_set.empty() ? n : *free_set.begin();
        if (lowest == n) {
          REQUIRE_FALSE(p.has_value());
        } else {
          REQUIRE(p.has_value());
          REQUIRE(*p == first + lowest);
          PipSetFree(page.data(), ps, *p, false);
          model[lowest] = false;
          free_set.erase(lowest);
        }
      } else {
        // Free (or re-mark) a random page, biased to low numbers so allocations recur there.
        const uint32_t i = 1 + rng() % ((rng() % 2) ? 300 : n - 1);
        const bool f = rng() % 4 != 0;
        PipSetFree(page.data(), ps, first + i, f);
        model[i] = f;
        if (f) {
          free_set.insert(i);
        } else {
          free_set.erase(i);
        }
      }
      if (op % 1000 == 0) {
        uint32_t mismatches = 0;
        for (uint32_t i = 0; i < n; ++i)
          mismatches += PipIsFree(page.data(), ps, first + i) != model[i];
        REQUIRE(mismatches == 0);
      }
    }
  }
}

TEST_CASE("pip: PipFindFreeRun finds the lowest aligned run of free pages, against a model",
          "[page]") {
  for (uint32_t ps : {4096u, 8192u}) {
    for (uint32_t k : {0u, 1u}) {
      INFO("page size " << ps << ", PIP " << k);
      const PageNo first = PipPageNo(k, ps) == 1 ? 0 : PipPageNo(k, ps);
      const uint32_t n = PagesPerPip(ps);
      std::vector<uint8_t> page(ps);
      InitPip(page.data(), ps, PipPageNo(k, ps), first);
      std::mt19937 rng(ps + k);
      // The model's answer: the lowest multiple of `len` (in page numbers) whose run is free.
      auto expect = [&](uint32_t len) -> std::optional<PageNo> {
        for (uint32_t i = 0; i + len <= n; i += len) {
          bool all = true;
          for (uint32_t j = i; j < i + len && all; ++j) all = PipIsFree(page.data(), ps, first + j);
          if (all) return first + i;
        }
        return std::nullopt;
      };
      for (int op = 0; op < 3000; ++op) {
        const uint32_t len = 8u << (rng() % 4);  // 8, 16, 32, 64
        const std::optional<PageNo> got = PipFindFreeRun(page.data(), ps, len);
        REQUIRE(got == expect(len));
        if (got) {
          CHECK(*got % len == 0);
          for (PageNo p = *got; p < *got + len; ++p) PipSetFree(page.data(), ps, p, false);
        }
        // Scattered frees and uses, so runs open up below and get broken.
        for (int i = 0; i < 6; ++i) {
          const uint32_t b = 1 + rng() % ((rng() % 2) ? 600 : n - 1);
          PipSetFree(page.data(), ps, first + b, rng() % 3 != 0);
        }
        if (rng() % 5 == 0) PipFindFree(page.data(), ps);  // moves the hint the search starts at
      }
    }
  }
  // Lengths it does not do.
  std::vector<uint8_t> page(4096);
  InitPip(page.data(), 4096, 1, 0);
  CHECK_FALSE(PipFindFreeRun(page.data(), 4096, 0).has_value());
  CHECK_FALSE(PipFindFreeRun(page.data(), 4096, 12).has_value());
  CHECK_FALSE(PipFindFreeRun(page.data(), 4096, 128).has_value());
  // Pages 0, 1 and the doublewrite area (up to 2049) are in use.
  CHECK(PipFindFreeRun(page.data(), 4096, 8) == PageNo{2056});
}

// Found by the page fuzz target: a min_free hint near 2^32 (a damaged page that got past its
// checksum) made idx + n wrap, and the search read far outside the page.
TEST_CASE("pip: PipFindFreeRun on a page whose min_free hint is past the bitmap finds nothing",
          "[pip]") {
  for (uint32_t hint : {PagesPerPip(4096), PagesPerPip(4096) + 1, 0xFFFFFFF8u, 0xFFFFFFFFu}) {
    std::vector<uint8_t> page(4096);
    InitPip(page.data(), 4096, 1, 0);
    util::Put32(page.data() + 20, hint);  // min_free
    for (uint32_t n = 8; n <= 64; n += 8)
      CHECK_FALSE(PipFindFreeRun(page.data(), 4096, n).has_value());
    CHECK_FALSE(PipFindFree(page.data(), 4096).has_value());
  }
}

}  // namespace
}  // namespace ember::page
