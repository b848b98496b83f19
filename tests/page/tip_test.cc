// Tests for transaction inventory pages (engine/page/tip.h).
#include "engine/page/tip.h"

#include <catch2/catch.hpp>
#include <random>
#include <vector>

#include "engine/util/coding.h"

namespace ember::page {
namespace {

TEST_CASE("tip: init, chain link and layout", "[page]") {
  const uint32_t ps = 4096;
  std::vector<uint8_t> page(ps, 0xEE);
  InitTip(page.data(), ps, 2, 1000);
  CHECK(GetType(page.data()) == PageType::kTip);
  CHECK(GetPageNo(page.data()) == 2);
  CHECK(TipFirstTxn(page.data()) == 1000);
  CHECK(TipNext(page.data()) == kNoPage);
  TipSetNext(page.data(), 77);
  CHECK(TipNext(page.data()) == 77);
  CHECK(util::Get64(page.data() + 16) == 1000);
  CHECK(util::Get32(page.data() + 24) == 77);
  CHECK(TxnsPerTip(ps) == (ps - 32) * 4);
  for (uint64_t t = 1000; t < 1000 + TxnsPerTip(ps); t += 97) {
    REQUIRE(TipGetState(page.data(), t) == TxnState::kActive);
  }
}

TEST_CASE("tip: two bits per transaction, LSB first", "[page]") {
  const uint32_t ps = 4096;
  std::vector<uint8_t> page(ps);
  InitTip(page.data(), ps, 2, 1000);
  TipSetState(page.data(), 1000, TxnState::kLimbo);      // byte 32 bits 0-1
  TipSetState(page.data(), 1005, TxnState::kCommitted);  // byte 33 bits 2-3
  TipSetState(page.data(), 1007, TxnState::kDead);       // byte 33 bits 6-7
  CHECK(page[32] == 0x01);
  CHECK(page[33] == 0x8C);
  const uint64_t last = 1000 + TxnsPerTip(ps) - 1;
  TipSetState(page.data(), last, TxnState::kCommitted);
  CHECK(page[ps - 1] == 0xC0);
  CHECK(TipGetState(page.data(), last) == TxnState::kCommitted);
  TipSetState(page.data(), 1005, TxnState::kActive);
  CHECK(page[33] == 0x80);
  SealPage(page.data(), ps);
  CHECK(VerifyPage(page.data(), ps, 2, "db").ok());
}

TEST_CASE("tip: below the covered range is ignored", "[page]") {
  std::vector<uint8_t> page(4096);
  InitTip(page.data(), 4096, 2, 1000);
  std::vector<uint8_t> before = page;
  TipSetState(page.data(), 999, TxnState::kCommitted);
  CHECK(page == before);
  CHECK(TipGetState(page.data(), 999) == TxnState::kActive);
}

TEST_CASE("tip: random states against a model", "[page]") {
  for (uint32_t ps : {4096u, 32768u}) {
    std::vector<uint8_t> page(ps);
    const uint64_t first = 5 * TxnsPerTip(ps) + 1;
    InitTip(page.data(), ps, 9, first);
    std::vector<uint8_t> model(TxnsPerTip(ps), 0);
    std::mt19937_64 rng(ps);
    for (int i = 0; i < 50000; ++i) {
      const uint64_t k = rng() % model.size();
      const auto s = static_cast<TxnState>(rng() % 4);
      TipSetState(page.data(), first + k, s);
      model[k] = static_cast<uint8_t>(s);
    }
    for (uint64_t k = 0; k < model.size(); ++k) {
      REQUIRE(static_cast<uint8_t>(TipGetState(page.data(), first + k)) == model[k]);
    }
  }
}

}  // namespace
}  // namespace ember::page
