// Swept flags (relation.h, MarkSwept / Unsweep): a data page, and its pointer-page slot, say
// "nothing here for a sweep" so that the next sweep skips the page without reading it.
//
// Honesty after a crash: the page's own flag changes in the same image as its lines, so it is
// true of whatever copy of the page is on disk. The slot's flag is a second copy on another
// page, kept honest by careful write in both directions:
// - setting: the slot is flagged only once the flagged data page is on disk (durably), so a
//   slot on disk never says swept over an older page image (no edge pointer page -> data page:
//   with the edges of clearing, those would make cycles between latched pages);
// - clearing: before a flagged page changes, its slot is cleared and the page may be written
//   only after the slot (precedence data page -> pointer page).
// A change between MarkSwept and FlagSweptSlots is caught by `sweep_pending` (under mu_) and
// the pointer page's latch: the slot is set only if no Unsweep came between, and an Unsweep
// after the slot was set clears it.
#include <span>

#include "absl/strings/str_cat.h"
#include "engine/page/data_page.h"
#include "engine/page/pointer_page.h"
#include "engine/record/relation.h"

namespace ember::record {

using cache::LatchMode;
using cache::PageRef;
using page::PageNo;

absl::StatusOr<PageRef> Relation::FetchForChange(PageNo p) {
  absl::StatusOr<PageRef> r = cache_->Fetch(p, LatchMode::kExclusive);
  if (!r.ok()) return r;
  if (absl::Status s = Unsweep(*r); !s.ok()) return s;
  return r;
}

absl::Status Relation::Unsweep(PageRef& P) {
  uint8_t* d = P.data();
  if (page::GetType(d) != page::PageType::kData || !(page::GetFlags(d) & page::kPpSwept)) {
    return absl::OkStatus();
  }
  const uint32_t seq = page::DpSequence(d);
  PageNo pp_no = page::kNoPage;
  {
    util::WriterLock g(mu_);
    if (seq < pages_.size() && pages_[seq].page == P.page_no()) {
      pages_[seq].sweep_pending = false;
      pp_no = pps_[seq / slots_per_pp_];
    }
  }
  if (pp_no != page::kNoPage) {
    // Always through the latch (no shortcut on the copy in memory): FlagSweptSlots may be
    // between its check of sweep_pending and its store under this latch.
    absl::StatusOr<PageRef> pp = cache_->Fetch(pp_no, LatchMode::kExclusive);
    if (!pp.ok()) return pp.status();
    const uint32_t slot = seq % slots_per_pp_;
    const uint8_t f = page::PpGetFlags(pp->data(), ps_, slot);
    if (f & page::kPpSwept) {
      const uint8_t nf = static_cast<uint8_t>(f & ~page::kPpSwept);
      page::PpSetFlags(pp->data(), ps_, slot, nf);
      pp->Mark(cache::kNoOwnerMark);
      util::WriterLock g(mu_);
      pages_[seq].flags = nf;
      SetFastPage(seq, pages_[seq].page, nf);
    }
    pp->Release();
    // Also when the slot in memory is clear: a copy on disk may still say swept until the
    // pointer page is written (an earlier Unsweep's edge holds only the page version it was
    // added for).
    if (absl::Status s = cache_->AddPrecedence(P, pp_no); !s.ok()) return s;
  }
  page::SetFlags(d, static_cast<uint8_t>(page::GetFlags(d) & ~page::kPpSwept));
  return absl::OkStatus();
}

bool Relation::SweptLine(const RecordHeader& h, uint64_t horizon_cn) const {
  // A fragment belongs to a head on some page; a back version or BLOB header here is something
  // a sweep may still have to look at (or a line waiting to be freed).
  if (h.flags & kRecFragment) return true;
  if (h.flags & (kRecNotPrimary | kRecDeleted)) return false;
  if (h.back_page != page::kNoPage) return false;
  const uint64_t cn = tm_->StateOf(h.txn);
  return txn::IsCommittedCn(cn) && cn <= horizon_cn;
}

absl::StatusOr<bool> Relation::MarkSwept(uint32_t seq, uint64_t horizon_cn) {
  if (!damage_.ok()) return damage_;
  const uint64_t e = FastEntry(seq);
  const PageNo pno = static_cast<PageNo>(e);
  const uint8_t known = static_cast<uint8_t>(e >> 32);
  if (seq >= PageSequences() || pno == page::kNoPage || (known & page::kPpSecondary)) return false;
  if (known & page::kPpSwept) return false;  // nothing left to do
  absl::StatusOr<PageRef> r = cache_->Fetch(pno, LatchMode::kExclusive);
  if (!r.ok()) return r.status();
  uint8_t* d = r->data();
  if (page::GetType(d) != page::PageType::kData || page::DpRelation(d) != id_ ||
      page::DpSequence(d) != seq) {
    return absl::DataLossError(absl::StrCat("page ", pno, " of ", cache_->file()->path(),
                                            ": expected data page ", seq, " of relation ", id_));
  }
  const uint16_t n = page::DpLineCount(d);
  for (uint16_t line = 0; line < n; ++line) {
    std::optional<std::string_view> rec = page::DpGet(d, ps_, line);
    if (!rec) continue;
    RecordHeader h;
    if (!DecodeHeader(*rec, &h)) {
      return absl::DataLossError(
          absl::StrCat("page ", pno, " line ", line, ": corrupt record header"));
    }
    if (!SweptLine(h, horizon_cn)) return false;
  }
  if (!(page::GetFlags(d) & page::kPpSwept)) {
    page::SetFlags(d, static_cast<uint8_t>(page::GetFlags(d) | page::kPpSwept));
    r->Mark(cache::kNoOwnerMark);
  }
  util::WriterLock g(mu_);
  pages_[seq].sweep_pending = true;
  return true;
}

absl::Status Relation::FlagSweptSlots(std::span<const uint32_t> seqs, uint32_t* flagged) {
  if (!damage_.ok()) return damage_;
  for (size_t i = 0; i < seqs.size();) {
    // The seqs of one pointer page, under one latch of it.
    const uint32_t pp_index = seqs[i] / slots_per_pp_;
    size_t j = i;
    while (j < seqs.size() && seqs[j] / slots_per_pp_ == pp_index) ++j;
    PageNo pp_no;
    {
      util::ReaderLock g(mu_);
      if (pp_index >= pps_.size()) return absl::InternalError("FlagSweptSlots: no such page");
      pp_no = pps_[pp_index];
    }
    absl::StatusOr<PageRef> pp = cache_->Fetch(pp_no, LatchMode::kExclusive);
    if (!pp.ok()) return pp.status();
    bool changed = false;
    for (; i < j; ++i) {
      const uint32_t seq = seqs[i];
      PageNo dp;
      {
        // An Unsweep since MarkSwept cleared this, and waits for this latch to clear the slot.
        util::ReaderLock g(mu_);
        if (seq >= pages_.size() || !pages_[seq].sweep_pending) continue;
        dp = pages_[seq].page;
      }
      // The flagged page must be on disk before the slot can say so: otherwise a crash could
      // leave the slot's flag over the page's older image.
      if (!cache_->IsOnDisk(dp)) continue;
      const uint32_t slot = seq % slots_per_pp_;
      const uint8_t f =
          static_cast<uint8_t>(page::PpGetFlags(pp->data(), ps_, slot) | page::kPpSwept);
      page::PpSetFlags(pp->data(), ps_, slot, f);
      changed = true;
      if (flagged) ++*flagged;
      util::WriterLock g(mu_);
      pages_[seq].flags = f;
      pages_[seq].sweep_pending = false;
      SetFastPage(seq, pages_[seq].page, f);
    }
    if (changed) pp->Mark(cache::kNoOwnerMark);
  }
  return absl::OkStatus();
}

}  // namespace ember::record
