// Transaction inventory pages (TIP): 2 bits per transaction, chained from the header page.
// A transaction's commit point is the write of its TIP page with state kCommitted.
//
//   offset size field
//   0      16   page header (type kTip)
//   16     8    first_txn   first transaction id covered
//   24     4    next_tip    next TIP page (0 = none)
//   28     4    reserved
//   32     ...  2 bits per transaction, 4 per byte, LSB first
#pragma once
#include <cstdint>

#include "engine/page/page.h"

namespace ember::page {

enum class TxnState : uint8_t { kActive = 0, kLimbo = 1, kDead = 2, kCommitted = 3 };

constexpr size_t kTipBitsOffset = 32;
constexpr uint64_t TxnsPerTip(uint32_t page_size) {
  return uint64_t{page_size - kTipBitsOffset} * 4;
}

void InitTip(uint8_t* page, uint32_t page_size, PageNo no, uint64_t first_txn);
uint64_t TipFirstTxn(const uint8_t* page);
PageNo TipNext(const uint8_t* page);
void TipSetNext(uint8_t* page, PageNo next);
// `txn` must lie in [first_txn, first_txn + TxnsPerTip).
TxnState TipGetState(const uint8_t* page, uint64_t txn);
void TipSetState(uint8_t* page, uint64_t txn, TxnState s);

}  // namespace ember::page
