// Transaction inventory pages: two state bits per transaction (see tip.h).
#include "engine/page/tip.h"

#include "engine/util/coding.h"

namespace ember::page {

namespace {

constexpr size_t kFirstTxnOff = 16, kNextTipOff = 24;
static_assert(kFirstTxnOff == kPageHeaderSize && kNextTipOff + 4 + 4 == kTipBitsOffset);
static_assert(TxnsPerTip(4096) == 16256);
static_assert(static_cast<uint8_t>(TxnState::kCommitted) == 3);  // fits the 2-bit field

}  // namespace

void InitTip(uint8_t* page, uint32_t page_size, PageNo no, uint64_t first_txn) {
  // Zeroed bits read as kActive: a transaction id not yet started has no other sensible state,
  // and a transaction that was running at a crash is recognised as such by the recovery code.
  InitPage(page, page_size, PageType::kTip, no);
  util::Put64(page + kFirstTxnOff, first_txn);
  util::Put32(page + kNextTipOff, kNoPage);
}

uint64_t TipFirstTxn(const uint8_t* page) { return util::Get64(page + kFirstTxnOff); }
PageNo TipNext(const uint8_t* page) { return util::Get32(page + kNextTipOff); }
void TipSetNext(uint8_t* page, PageNo next) { util::Put32(page + kNextTipOff, next); }

// The upper bound of `txn` cannot be checked here (no page size is passed); callers pick the
// TIP page as (txn - first) / TxnsPerTip, which keeps it in range. Below the range a read says
// kActive (the conservative answer: not committed) and a write is ignored, rather than index
// before the bitmap.
TxnState TipGetState(const uint8_t* page, uint64_t txn) {
  const uint64_t first = TipFirstTxn(page);
  if (txn < first) return TxnState::kActive;
  const uint64_t i = txn - first;
  return static_cast<TxnState>((page[kTipBitsOffset + i / 4] >> (2 * (i % 4))) & 3);
}

void TipSetState(uint8_t* page, uint64_t txn, TxnState s) {
  const uint64_t first = TipFirstTxn(page);
  if (txn < first) return;
  const uint64_t i = txn - first;
  uint8_t& b = page[kTipBitsOffset + i / 4];
  const unsigned shift = 2 * (i % 4);
  b = static_cast<uint8_t>((b & ~(3u << shift)) | ((static_cast<unsigned>(s) & 3u) << shift));
}

}  // namespace ember::page
