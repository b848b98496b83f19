// Free space on a relation's secondary pages (back versions, fragments, BLOB header records).
//
// As in Firebird, the pointer page's fill bit (kPpFull) is the free-space map: a secondary page
// is flagged full when a record did not fit on it, and unflagged when garbage collection (or
// an undo) leaves a quarter of it free again. A back version goes on the current secondary
// page, else on the first one not flagged full, and only then on a new page, so the room
// collection frees is used again, before a restart and after one (the flags are on disk).
// The flag is only a hint: the page's own free space decides, under its latch, whether a record
// goes there, so a flag lost in a crash or left stale costs room, never correctness.
//
// Careful write is unaffected: a line is deleted (and its room can be reused) only once what
// pointed at it is on disk (FreeUnlinked); the flags say nothing about that.
#include <algorithm>

#include "engine/page/data_page.h"
#include "engine/page/pointer_page.h"
#include "engine/record/relation.h"

namespace ember::record {

using cache::LatchMode;
using cache::PageRef;
using page::PageNo;

namespace {
constexpr uint8_t kFullSecondary = page::kPpSecondary | page::kPpFull;
}  // namespace

absl::StatusOr<uint32_t> Relation::SecondaryForStore(uint64_t txn) {
  if (!damage_.ok()) return damage_;
  {
    util::ReaderLock g(mu_);
    if (secondary_seq_ >= 0) return static_cast<uint32_t>(secondary_seq_);
  }
  {
    util::WriterLock g(mu_);
    if (secondary_seq_ >= 0) return static_cast<uint32_t>(secondary_seq_);
    uint32_t seq = sec_space_;
    while (seq < pages_.size() && (pages_[seq].flags & kFullSecondary) != page::kPpSecondary) {
      ++seq;
    }
    sec_space_ = seq;
    if (seq < pages_.size()) {
      secondary_seq_ = static_cast<int32_t>(seq);
      return seq;
    }
  }
  absl::StatusOr<uint32_t> seq = AddDataPage(txn, /*secondary=*/true);
  if (!seq.ok()) return seq.status();
  util::WriterLock g(mu_);
  secondary_seq_ = static_cast<int32_t>(*seq);
  return *seq;
}

absl::Status Relation::SecondaryIsFull(uint32_t seq, size_t need, uint64_t txn) {
  // Flagged with no latch held (a pointer page is never latched under a data page here).
  if (absl::Status s = SetPageFlags(seq, page::kPpFull, 0, txn); !s.ok()) return s;
  {
    util::WriterLock g(mu_);
    if (secondary_seq_ == static_cast<int32_t>(seq)) secondary_seq_ = -1;
  }
  // Collection may have freed room between our look at the page and the flag: it saw no flag
  // to clear then, so look again, or the page could stay flagged full with nothing on it.
  absl::StatusOr<PageNo> p = PageOf(seq);
  if (!p.ok()) return p.status();
  absl::StatusOr<PageRef> r = cache_->Fetch(*p, LatchMode::kShared);
  if (!r.ok()) return r.status();
  const uint32_t free = page::DpFreeSpace(r->data(), ps_);
  r->Release();
  if (free < need) return absl::OkStatus();
  if (absl::Status s = SetPageFlags(seq, 0, page::kPpFull, txn); !s.ok()) return s;
  util::WriterLock g(mu_);
  sec_space_ = std::min(sec_space_, seq);
  return absl::OkStatus();
}

absl::Status Relation::NoteSecondaryRoom(uint32_t seq, PageNo p, uint32_t free, uint64_t mark_txn) {
  // A quarter page takes most back versions (a head larger than that is usually fragmented):
  // a page with less free stays flagged, so flags do not flip on every line freed.
  if (free < ps_ / 4) return absl::OkStatus();
  const uint64_t e = FastEntry(seq);
  if (static_cast<PageNo>(e) != p ||
      (static_cast<uint8_t>(e >> 32) & kFullSecondary) != kFullSecondary) {
    return absl::OkStatus();  // not flagged full (or not a secondary page of this relation)
  }
  if (absl::Status s = SetPageFlags(seq, 0, page::kPpFull, mark_txn); !s.ok()) return s;
  util::WriterLock g(mu_);
  sec_space_ = std::min(sec_space_, seq);
  return absl::OkStatus();
}

absl::Status Relation::RemoveLine(PageRef* r, uint16_t line, uint64_t mark_txn) {
  page::DpDelete(r->data(), ps_, line);
  r->Mark(mark_txn);
  const uint32_t seq = page::DpSequence(r->data());
  const PageNo p = r->page_no();
  const uint32_t free = page::DpFreeSpace(r->data(), ps_);
  r->Release();
  return NoteSecondaryRoom(seq, p, free, mark_txn);
}

}  // namespace ember::record
