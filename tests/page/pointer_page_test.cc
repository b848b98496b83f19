// Tests for pointer pages, a relation's list of data pages (engine/page/pointer_page.h).
#include "engine/page/pointer_page.h"

#include <catch2/catch.hpp>
#include <vector>

#include "engine/util/coding.h"

namespace ember::page {
namespace {

TEST_CASE("pointer page: init and header fields", "[page]") {
  const uint32_t ps = 8192;
  std::vector<uint8_t> page(ps, 0x11);
  InitPointerPage(page.data(), ps, 40, 7, 3);
  CHECK(GetType(page.data()) == PageType::kPointer);
  CHECK(GetPageNo(page.data()) == 40);
  CHECK(PpRelation(page.data()) == 7);
  CHECK(PpSequence(page.data()) == 3);
  CHECK(PpNext(page.data()) == kNoPage);
  CHECK(PpCount(page.data()) == 0);
  PpSetNext(page.data(), 99);
  CHECK(PpNext(page.data()) == 99);
  CHECK(util::Get32(page.data() + 16) == 7);
  CHECK(util::Get32(page.data() + 20) == 3);
  CHECK(util::Get32(page.data() + 24) == 99);
  for (uint32_t s = 0; s < SlotsPerPointerPage(ps); ++s) {
    REQUIRE(PpGetSlot(page.data(), ps, s) == kNoPage);
    REQUIRE(PpGetFlags(page.data(), ps, s) == 0);
  }
}

TEST_CASE("pointer page: slots and flags at the documented offsets", "[page]") {
  for (uint32_t ps : {4096u, 8192u, 16384u, 32768u}) {
    INFO("page size " << ps);
    const uint32_t n = SlotsPerPointerPage(ps);
    CHECK(n == (ps - 32) / 5);
    std::vector<uint8_t> page(ps);
    InitPointerPage(page.data(), ps, 40, 7, 0);
    PpSetSlot(page.data(), ps, 0, 1234);
    PpSetFlags(page.data(), ps, 0, kPpFull | kPpSwept);
    PpSetSlot(page.data(), ps, n - 1, 5678);
    PpSetFlags(page.data(), ps, n - 1, kPpSecondary);
    CHECK(util::Get32(page.data() + 32) == 1234);
    CHECK(util::Get32(page.data() + 32 + 4 * (n - 1)) == 5678);
    CHECK(page[32 + 4 * n] == (kPpFull | kPpSwept));
    CHECK(page[32 + 4 * n + n - 1] == kPpSecondary);
    CHECK(PpCount(page.data()) == n);
    CHECK(PpGetSlot(page.data(), ps, n - 1) == 5678);
    CHECK(PpGetFlags(page.data(), ps, n - 1) == kPpSecondary);
    // Out of range: reads empty, writes ignored.
    std::vector<uint8_t> before = page;
    PpSetSlot(page.data(), ps, n, 1);
    PpSetFlags(page.data(), ps, n, 0xFF);
    CHECK(page == before);
    CHECK(PpGetSlot(page.data(), ps, n) == kNoPage);
    CHECK(PpGetFlags(page.data(), ps, n) == 0);
    SealPage(page.data(), ps);
    CHECK(VerifyPage(page.data(), ps, 40, "db").ok());
  }
}

TEST_CASE("pointer page: count follows the highest used slot", "[page]") {
  const uint32_t ps = 4096;
  std::vector<uint8_t> page(ps);
  InitPointerPage(page.data(), ps, 40, 7, 0);
  PpSetSlot(page.data(), ps, 0, 100);
  CHECK(PpCount(page.data()) == 1);
  PpSetSlot(page.data(), ps, 5, 105);
  CHECK(PpCount(page.data()) == 6);
  PpSetSlot(page.data(), ps, 2, 102);
  CHECK(PpCount(page.data()) == 6);
  PpSetFlags(page.data(), ps, 2, kPpHasGarbage);
  // Clearing a middle slot keeps count and clears the slot's flags.
  PpSetSlot(page.data(), ps, 2, kNoPage);
  CHECK(PpCount(page.data()) == 6);
  CHECK(PpGetSlot(page.data(), ps, 2) == kNoPage);
  CHECK(PpGetFlags(page.data(), ps, 2) == 0);
  // Clearing the last slot drops every trailing empty slot.
  PpSetSlot(page.data(), ps, 5, kNoPage);
  CHECK(PpCount(page.data()) == 1);
  PpSetSlot(page.data(), ps, 0, kNoPage);
  CHECK(PpCount(page.data()) == 0);
}

}  // namespace
}  // namespace ember::page
