// Writing versions of a relation's records (see relation.h): storing records on secondary pages
// and as fragment chains, building a version within the room its page has, inserting a record,
// and replacing a record's head (Write): the version on top is overwritten in place or pushed
// down the chain as a back version, and on a full page a last resort moves back versions away
// to make room for the new head (MakeRoomForHead). Removing versions is in relation_gc.cc.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/page/data_page.h"
#include "engine/page/pointer_page.h"
#include "engine/record/relation.h"

namespace ember::record {

using cache::LatchMode;
using cache::PageRef;
using page::PageNo;

// ---------------------------------------------------------------- storing versions

absl::StatusOr<std::pair<PageNo, uint16_t>> Relation::StoreSecondary(
    uint64_t txn, std::string_view rec_bytes, PageRef* holder,
    std::span<const PageNo> extra_links) {
  RecordHeader h;
  if (!DecodeHeader(rec_bytes, &h)) return absl::InternalError("StoreSecondary: bad header");
  const size_t need = rec_bytes.size() + page::kDpLineSize;
  for (int attempt = 0; attempt < 64; ++attempt) {
    absl::StatusOr<uint32_t> seq = SecondaryForStore(txn);
    if (!seq.ok()) return seq.status();
    absl::StatusOr<PageNo> pno = PageOf(*seq);
    if (!pno.ok()) return pno.status();
    absl::StatusOr<PageRef> s = FetchForChange(*pno);
    if (!s.ok()) return s.status();
    if (page::DpFreeSpace(s->data(), ps_) < need) {
      s->Release();
      if (absl::Status st = SecondaryIsFull(*seq, need, txn); !st.ok()) return st;
      continue;
    }
    // What this record points at must reach disk before this page.
    auto link_to = [&](PageNo link) -> absl::Status {
      if (link != page::kNoPage && link != *pno && (!holder || link != holder->page_no())) {
        return cache_->AddPrecedence(*s, link);
      }
      return absl::OkStatus();
    };
    for (PageNo link : {PageNo{h.back_page}, PageNo{h.frag_page}}) {
      if (absl::Status st = link_to(link); !st.ok()) return st;
    }
    for (PageNo link : extra_links) {
      if (absl::Status st = link_to(link); !st.ok()) return st;
    }
    std::optional<uint16_t> line = page::DpInsert(s->data(), ps_, rec_bytes);
    if (!line) return absl::InternalError("secondary page insert failed after space check");
    s->Mark(txn);
    s->Release();
    if (holder) {
      if (absl::Status st = cache_->AddPrecedence(*holder, *pno); !st.ok()) return st;
    }
    return std::make_pair(*pno, *line);
  }
  return absl::ResourceExhaustedError("could not place a back version");
}

absl::StatusOr<std::pair<PageNo, uint16_t>> Relation::StoreFragments(uint64_t txn,
                                                                     std::string_view bytes,
                                                                     PageRef* holder) {
  const size_t chunk = page::MaxRecordOnPage(ps_) - kRecMaxHeaderSize - 64;
  const size_t n = (bytes.size() + chunk - 1) / chunk;
  std::pair<PageNo, uint16_t> next{page::kNoPage, 0};
  // Last fragment first, so each one can point at the next, already stored.
  for (size_t i = n; i-- > 0;) {
    RecordHeader fh;
    fh.flags = kRecFragment;
    if (next.first != page::kNoPage) {
      fh.flags |= kRecFragmented;
      fh.frag_page = next.first;
      fh.frag_line = next.second;
    }
    std::string rec;
    EncodeHeader(fh, &rec);
    rec.append(bytes.substr(i * chunk, chunk));
    absl::StatusOr<std::pair<PageNo, uint16_t>> loc =
        StoreSecondary(txn, rec, i == 0 ? holder : nullptr);
    if (!loc.ok()) return loc.status();
    next = *loc;
  }
  return next;
}

size_t Relation::HeadInlineLimit(const uint8_t* page, size_t head_size, size_t full) const {
  const size_t free = page::DpFreeSpace(page, ps_);
  size_t room = free + head_size;
  if (full > head_size) {
    // A head that grows may not take the other records' reserve: else the first updates on a
    // page of small records can grow inline into all of its free space and leave the rest no
    // room to grow even by a back pointer, and their updates fail ("does not fit after space
    // check"). Its own bytes it may always keep. The line count bounds the records; they are
    // counted only when that bound leaves too little.
    size_t others = page::DpLineCount(page);
    if (free < full - head_size + kHeadSlack + others * kReservePerRecord) {
      others = page::DpLiveLines(page, ps_);
    }
    const size_t reserve = (others > 0 ? others - 1 : 0) * kReservePerRecord;
    room = head_size + (free > reserve ? free - reserve : 0);
  }
  size_t limit = room > kHeadSlack ? room - kHeadSlack : 0;
  if (full > limit) limit = std::min<size_t>(limit, ps_ / 4);
  return std::max<size_t>(limit, kRecMaxHeaderSize + 16);
}

absl::StatusOr<std::string> Relation::BuildVersion(uint64_t txn, RecordHeader h,
                                                   std::string_view stored, size_t inline_limit,
                                                   PageRef* primary) {
  std::string rec;
  // No inline body at all when the limit is 0 (the last resort of Write() on a full page);
  // callers otherwise pass limits of at least kRecMaxHeaderSize + 16. A record no larger than
  // its fragmented header alone (a delete stub, a tiny row) is never fragmented: that would not
  // make it smaller.
  const size_t frag_header = h.SizeWith(h.back_page != 0, /*fragmented=*/true);
  if (h.size() + stored.size() <= std::max(inline_limit, frag_header)) {
    rec.reserve(h.size() + stored.size());  // one allocation, not one per append
    EncodeHeader(h, &rec);
    rec.append(stored);
    return rec;
  }
  const size_t head = inline_limit > frag_header ? inline_limit - frag_header : 0;
  const size_t keep = std::min(head, stored.size());
  absl::StatusOr<std::pair<PageNo, uint16_t>> frag =
      StoreFragments(txn, stored.substr(keep), primary);
  if (!frag.ok()) return frag.status();
  h.flags |= kRecFragmented;
  h.frag_page = frag->first;
  h.frag_line = frag->second;
  EncodeHeader(h, &rec);
  rec.append(stored.substr(0, keep));
  return rec;
}

// ---------------------------------------------------------------- writing versions

absl::StatusOr<uint64_t> Relation::Insert(uint64_t txn, std::string_view raw,
                                          std::span<const PageNo> links) {
  // Concurrent inserters spread over the first pages with room (the k-th inserter in flight
  // takes the k-th such page) instead of queueing for one page's latch; alone, an inserter
  // fills the first page with room, as always.
  InsertStripe stripe(&inserters_);
  PageRef held;
  uint32_t held_seq = 0;
  bool dirty = false;
  absl::StatusOr<uint64_t> rec =
      InsertOnto(txn, raw, links, stripe.index(), &held, &held_seq, &dirty);
  if (dirty) held.Mark(txn);
  return rec;
}

absl::Status Relation::InsertBatch(uint64_t txn, std::span<const std::string> raws,
                                   std::span<const std::vector<PageNo>> links,
                                   std::vector<uint64_t>* recs) {
  InsertStripe stripe(&inserters_);
  PageRef held;
  uint32_t held_seq = 0;
  bool dirty = false;  // a page is marked once, when the batch leaves it
  absl::Status s;
  for (size_t i = 0; i < raws.size() && s.ok(); ++i) {
    absl::StatusOr<uint64_t> rec =
        InsertOnto(txn, raws[i],
                   i < links.size() ? std::span<const PageNo>(links[i]) : std::span<const PageNo>(),
                   stripe.index(), &held, &held_seq, &dirty);
    s = rec.status();
    if (s.ok()) recs->push_back(*rec);
  }
  if (dirty) held.Mark(txn);
  return s;
}

absl::StatusOr<uint64_t> Relation::InsertOnto(uint64_t txn, std::string_view raw,
                                              std::span<const PageNo> links, uint32_t stripe,
                                              PageRef* held, uint32_t* held_seq, bool* dirty) {
  if (!damage_.ok()) return damage_;
  RecordHeader h;
  h.txn = txn;
  std::string stored;
  h.encoding = CompressBody(raw, &stored);
  const size_t full = h.size() + stored.size();
  const size_t max_inline = ps_ / 4;
  const size_t need = std::min(full, std::max(max_inline, size_t{kRecMaxHeaderSize + 16}));
  for (;;) {
    if (!*held) {
      uint32_t seq;
      bool found = false;
      {
        util::ReaderLock g(mu_);
        uint32_t skip = stripe;
        uint32_t first_found = 0;
        for (seq = insert_seq_; seq < pages_.size(); ++seq) {
          if (!(pages_[seq].flags & (page::kPpFull | page::kPpSecondary))) {
            if (!found) first_found = seq;
            found = true;
            if (skip == 0) break;
            --skip;
          }
        }
        // Fewer pages with room than inserters: the first of them.
        if (found && seq >= pages_.size()) seq = first_found;
      }
      if (!found) {
        absl::StatusOr<uint32_t> ns = AddDataPage(txn, /*secondary=*/false);
        if (!ns.ok()) return ns.status();
        seq = *ns;
      }
      absl::StatusOr<PageNo> pno = PageOf(seq);
      if (!pno.ok()) return pno.status();
      // Unswept only once the record is known to fit: a page tried and found full keeps its
      // flag.
      absl::StatusOr<PageRef> r = cache_->Fetch(*pno, LatchMode::kExclusive);
      if (!r.ok()) return r.status();
      *held = std::move(*r);
      *held_seq = seq;
    }
    PageRef& r = *held;
    const uint32_t seq = *held_seq;
    // Room for the record and, for every record on the page and this one, a first back
    // version. line_count bounds the live records, so counting them (a walk of the line
    // array, a visible cost of a bulk load) is only needed when the page is nearly full.
    const uint32_t free = page::DpFreeSpace(r.data(), ps_);
    const size_t base = need + page::kDpLineSize;
    bool fits = free >= base + (size_t{page::DpLineCount(r.data())} + 1) * kReservePerRecord;
    if (!fits && free >= base) {
      const size_t live = page::DpLiveLines(r.data(), ps_);
      fits = live == 0 || free >= base + (live + 1) * kReservePerRecord;
    }
    if (fits) {
      if (absl::Status st = Unsweep(r); !st.ok()) return st;
      for (PageNo link : links) {
        if (absl::Status st = cache_->AddPrecedence(r, link); !st.ok()) return st;
      }
      absl::StatusOr<std::string> rec =
          BuildVersion(txn, h, stored, full <= max_inline ? full : need, &r);
      if (!rec.ok()) return rec.status();
      std::optional<uint16_t> line = page::DpInsert(r.data(), ps_, *rec);
      if (line) {
        *dirty = true;  // marked by the caller before it lets the page go
        return page::MakeRecordNo(seq, *line);
      }
    }
    if (*dirty) r.Mark(txn);
    *dirty = false;
    r.Release();
    if (absl::Status s = SetPageFlags(seq, page::kPpFull, 0, txn); !s.ok()) return s;
    // insert_seq_ passes only full pages: one before `seq` may still be another inserter's.
    util::WriterLock g(mu_);
    while (insert_seq_ < pages_.size() &&
           (pages_[insert_seq_].flags & (page::kPpFull | page::kPpSecondary))) {
      ++insert_seq_;
    }
  }
}

// What Write carries from one step to the next.
struct Relation::WriteState {
  // The record: its data page sequence and line, and the page (number `pno`), latched
  // exclusively by LatchHead until the new head is in place.
  uint32_t seq = 0;
  uint16_t line = 0;
  PageNo pno = page::kNoPage;
  PageRef P;
  // The head in place: read only before the page changes (afterwards only its size,
  // head_size, is used).
  std::string_view head_rec;
  size_t head_size = 0;
  RecordHeader h;
  bool own = false;        // the head is the writer's own version
  bool overwrite = false;  // the head is overwritten in place, not pushed down
  std::string dead_back;   // over a dead version: the version below it
  std::string old_raw;     // the head's raw body
  // Over a dead version: the raw body of the version below it (the one readers saw).
  std::string replaced_raw;
  // The new head: its header and its stored (possibly compressed) body.
  RecordHeader nh;
  std::string stored;
};

namespace {
// A step of Write returns kDone for the write to go on; any other code is Write's outcome.
bool WriteEnds(const absl::StatusOr<WriteOutcome>& step) {
  return !step.ok() || step->code != WriteOutcome::kDone;
}
}  // namespace

absl::StatusOr<WriteOutcome> Relation::Write(uint64_t rec, uint64_t txn, const ReadView& view,
                                             bool read_committed, const std::string* raw,
                                             std::span<const PageNo> links, bool undo) {
  WriteState w;
  if (absl::StatusOr<WriteOutcome> s = LatchHead(rec, &w); WriteEnds(s)) return s;
  // Whose version is on top decides between overwriting it and pushing it down.
  if (absl::StatusOr<WriteOutcome> s = DecideOverwrite(txn, view, read_committed, undo, &w);
      WriteEnds(s)) {
    return s;
  }
  if (absl::Status s = ReadReplacedBodies(&w); !s.ok()) return s;

  w.nh.txn = txn;
  if (raw) w.nh.encoding = CompressBody(*raw, &w.stored);
  else w.nh.flags |= kRecDeleted;

  if (w.overwrite) {
    if (absl::Status s = MakeBackVersionWhole(txn, raw, &w); !s.ok()) return s;
    // The fragments of the version overwritten are handed to the caller to free once the page
    // is on disk (unlinked_fragments, below).
  } else {
    if (absl::Status s = PushDownHead(txn, raw, &w); !s.ok()) return s;
  }
  if (absl::Status s = PlaceNewHead(txn, links, &w); !s.ok()) return s;

  w.P.Mark(txn);
  w.P.Release();
  if (!w.overwrite) {
    // A hint for the collector and statistics, not needed for recovery: the commit does not
    // write the pointer page for it (a crash may lose the flag; the garbage stays findable).
    // The new head is in place by now, so an error here (the pointer page unreadable) must not
    // fail the write: the caller would not note the change for its undo, and a rollback would
    // leave the version behind, committed with the transaction's undo, its index keys never
    // added. The flag stays unset, as after a crash.
    (void)SetPageFlags(w.seq, page::kPpHasGarbage, 0, cache::kNoOwnerMark);
  }
  WriteOutcome out;
  out.code = WriteOutcome::kDone;
  if (w.overwrite && (w.h.flags & kRecFragmented)) {
    Unlinked u;
    u.from = w.pno;
    u.page = w.h.frag_page;
    u.line = w.h.frag_line;
    u.fragments_only = true;
    out.unlinked_fragments = u;
  }
  if (!w.dead_back.empty()) out.dead_body = w.old_raw;
  out.old_body = w.dead_back.empty() ? std::move(w.old_raw) : std::move(w.replaced_raw);
  out.old_was_own = w.own;
  return out;
}

absl::StatusOr<WriteOutcome> Relation::LatchHead(uint64_t rec, WriteState* w) {
  w->seq = page::RecordDpSequence(rec);
  w->line = page::RecordLine(rec);
  absl::StatusOr<PageNo> pno = PageOf(w->seq);
  if (!pno.ok()) return WriteOutcome{WriteOutcome::kNotFound};
  w->pno = *pno;
  absl::StatusOr<PageRef> pr = FetchForChange(w->pno);
  if (!pr.ok()) return pr.status();
  w->P = std::move(*pr);
  std::optional<std::string_view> cur = page::DpGet(w->P.data(), ps_, w->line);
  if (!cur) return WriteOutcome{WriteOutcome::kNotFound};
  w->head_rec = *cur;
  w->head_size = w->head_rec.size();
  if (!DecodeHeader(w->head_rec, &w->h)) {
    return absl::DataLossError(
        absl::StrCat("page ", w->pno, " line ", w->line, ": corrupt record"));
  }
  if (w->h.flags & kRecNotPrimary) return WriteOutcome{WriteOutcome::kNotFound};
  return WriteOutcome{};
}

absl::StatusOr<WriteOutcome> Relation::DecideOverwrite(uint64_t txn, const ReadView& view,
                                                       bool read_committed, bool undo,
                                                       WriteState* w) {
  const RecordHeader& h = w->h;
  w->own = h.txn == txn;
  if (w->own) {
    if ((h.flags & kRecDeleted) && !undo) return WriteOutcome{WriteOutcome::kNotFound};
    w->overwrite = true;
    return WriteOutcome{};
  }
  const uint64_t cn = tm_->StateOf(h.txn);
  if (cn == txn::kCnActive || cn == txn::kCnLimbo) {
    return WriteOutcome{WriteOutcome::kWaitFor, h.txn};
  }
  if (cn == txn::kCnDead) {
    // A rolled-back version: overwrite it; the version under it decides conflicts.
    if (h.back_page == page::kNoPage) return WriteOutcome{WriteOutcome::kNotFound};
    absl::StatusOr<std::string> b = LineAt(w->P, w->pno, h.back_page, h.back_line);
    if (!b.ok()) return b.status();
    std::string back = std::move(*b);
    RecordHeader bh;
    if (!DecodeHeader(back, &bh)) return absl::DataLossError("corrupt back version");
    const uint64_t bcn = tm_->StateOf(bh.txn);
    if (!read_committed && txn::IsCommittedCn(bcn) && bcn > view.snapshot_cn) {
      return WriteOutcome{WriteOutcome::kConflict, bh.txn};
    }
    if (bh.flags & kRecDeleted) return WriteOutcome{WriteOutcome::kNotFound};
    w->dead_back = std::move(back);
    w->overwrite = true;
    return WriteOutcome{};
  }
  if (!read_committed && cn > view.snapshot_cn) {
    return WriteOutcome{WriteOutcome::kConflict, h.txn};
  }
  if (h.flags & kRecDeleted) return WriteOutcome{WriteOutcome::kNotFound};
  w->overwrite = false;
  return WriteOutcome{};
}

absl::Status Relation::ReadReplacedBodies(WriteState* w) {
  absl::StatusOr<std::string> old_raw = RawBody(w->h, w->head_rec, std::string());
  if (!old_raw.ok()) return old_raw.status();
  w->old_raw = std::move(*old_raw);
  // Over a dead version, the version replaced (what readers saw, what an undo puts back) is the
  // one below it, which may be a delta against the dead one.
  if (!w->dead_back.empty()) {
    RecordHeader dbh;
    if (!DecodeHeader(w->dead_back, &dbh)) return absl::DataLossError("corrupt back version");
    absl::StatusOr<std::string> r = RawBody(dbh, w->dead_back, w->old_raw);
    if (!r.ok()) return r.status();
    w->replaced_raw = std::move(*r);
  }
  return absl::OkStatus();
}

absl::Status Relation::MakeBackVersionWhole(uint64_t txn, const std::string* raw, WriteState* w) {
  const RecordHeader& h = w->h;
  if (h.back_page == page::kNoPage) return absl::OkStatus();
  PageRef& P = w->P;
  RecordHeader& nh = w->nh;
  const bool same = h.back_page == w->pno;
  std::string back;
  PageRef S;
  if (same) {
    back.assign(*page::DpGet(P.data(), ps_, h.back_line));
  } else {
    absl::StatusOr<PageRef> s = FetchForChange(h.back_page);
    if (!s.ok()) return s.status();
    S = std::move(*s);
    std::optional<std::string_view> b = page::DpGet(S.data(), ps_, h.back_line);
    if (!b) return absl::DataLossError("broken back pointer");
    back.assign(*b);
  }
  RecordHeader bh;
  if (!DecodeHeader(back, &bh)) return absl::DataLossError("corrupt back version");
  nh.back_page = h.back_page;
  nh.back_line = h.back_line;
  // A delta stays valid when the bytes it is against do not change (an update that sets
  // the same values): then the back version need not be rewritten whole.
  if ((bh.flags & kRecDelta) && !(raw && *raw == w->old_raw)) {
    absl::StatusOr<std::string> braw = RawBody(bh, back, w->old_raw);
    if (!braw.ok()) return braw.status();
    RecordHeader fh = bh;
    fh.flags &= ~kRecDelta;
    std::string fstored;
    fh.encoding = CompressBody(*braw, &fstored);
    std::string frec;
    EncodeHeader(fh, &frec);
    frec.append(fstored);
    uint8_t* bp = same ? P.data() : S.data();
    if (page::DpReplace(bp, ps_, h.back_line, frec)) {
      (same ? P : S).Mark(txn);
      if (!same) {
        // Once P holds the new head, the old copy (a delta against the head it replaces)
        // would decode wrongly: the whole copy must reach disk first.
        S.Release();
        if (absl::Status st = cache_->AddPrecedence(P, h.back_page); !st.ok()) return st;
      }
    } else {
      if (S) S.Release();
      absl::StatusOr<std::pair<PageNo, uint16_t>> loc = StoreSecondary(txn, frec, &P);
      if (!loc.ok()) return loc.status();
      nh.back_page = loc->first;
      nh.back_line = loc->second;
    }
  }
  return absl::OkStatus();
}

absl::Status Relation::PushDownHead(uint64_t txn, const std::string* raw, WriteState* w) {
  const RecordHeader& h = w->h;
  PageRef& P = w->P;
  RecordHeader& nh = w->nh;
  // Push the committed version down as a back version: a delta against ours if smaller.
  RecordHeader bh = h;
  bh.flags |= kRecBackVersion;
  std::string body(w->head_rec.substr(h.size()));
  std::string delta;
  if (!(h.flags & kRecFragmented) && raw && MakeDelta(*raw, w->old_raw, &delta) &&
      delta.size() < body.size()) {
    bh.flags |= kRecDelta;
    bh.encoding = BodyEncoding::kPlain;
    body = std::move(delta);
  }
  std::string brec;
  brec.reserve(bh.size() + body.size());
  EncodeHeader(bh, &brec);
  brec.append(body);
  const size_t new_head_est =
      nh.SizeWith(/*has_back=*/true, false) + std::min<size_t>(w->stored.size(), ps_ / 4);
  const uint32_t free = page::DpFreeSpace(P.data(), ps_);
  std::optional<uint16_t> same_line;
  if (free + w->head_size >= brec.size() + page::kDpLineSize + new_head_est + kHeadSlack) {
    same_line = page::DpInsert(P.data(), ps_, brec);
  }
  if (same_line) {
    nh.back_page = w->pno;
    nh.back_line = *same_line;
  } else {
    absl::StatusOr<std::pair<PageNo, uint16_t>> loc = StoreSecondary(txn, brec, &P);
    if (!loc.ok()) return loc.status();
    nh.back_page = loc->first;
    nh.back_line = loc->second;
  }
  return absl::OkStatus();
}

absl::Status Relation::PlaceNewHead(uint64_t txn, std::span<const PageNo> links, WriteState* w) {
  PageRef& P = w->P;
  RecordHeader& nh = w->nh;
  for (PageNo link : links) {
    if (absl::Status st = cache_->AddPrecedence(P, link); !st.ok()) return st;
  }
  // The new head: inline if it fits in the room the page has, else fragmented with a small
  // inline part.
  const size_t limit = HeadInlineLimit(P.data(), w->head_size, nh.size() + w->stored.size());
  absl::StatusOr<std::string> nrec = BuildVersion(txn, nh, w->stored, limit, &P);
  if (!nrec.ok()) return nrec.status();
  if (page::DpReplace(P.data(), ps_, w->line, *nrec)) return absl::OkStatus();
  // Retry with the smallest head: the fragmented header alone, which fits wherever the old
  // head had at least that much room (e.g. over a rolled-back delete stub on a full page).
  // The fragments of the first attempt become unreachable lines.
  nrec = BuildVersion(txn, nh, w->stored, /*inline_limit=*/0, &P);
  if (!nrec.ok()) return nrec.status();
  bool placed = page::DpReplace(P.data(), ps_, w->line, *nrec);
  // Still no room (a delete stub being overwritten on a page full to the last bytes): move
  // back versions off this page until the head fits.
  if (!placed) {
    absl::StatusOr<bool> p = MakeRoomForHead(P, w->pno, w->line, txn, &nh, &*nrec);
    if (!p.ok()) return p.status();
    placed = *p;
  }
  if (!placed) {
    return absl::InternalError(absl::StrCat("page ", w->pno, " line ", w->line,
                                            ": new version does not fit after space check"));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- making room on a full page

namespace {
// `rec` with its back pointer set to (page, line); the pointer is fixed-width, so the record
// keeps its size and can be replaced in place.
absl::Status Repoint(std::string* rec, PageNo page, uint16_t line) {
  RecordHeader rh;
  if (!DecodeHeader(*rec, &rh)) return absl::InternalError("repoint: bad record header");
  rh.back_page = page;
  rh.back_line = line;
  std::string out;
  EncodeHeader(rh, &out);
  out.append(rec->substr(rh.size()));
  *rec = std::move(out);
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<bool> Relation::MakeRoomForHead(PageRef& P, PageNo pno, uint16_t line, uint64_t txn,
                                               RecordHeader* nh, std::string* nrec) {
  struct Loc {
    PageNo page;
    uint16_t line;
    bool operator==(const Loc&) const = default;
  };
  // Who points at each line of P. Chains start at heads on P and continue on P or on
  // secondary pages (never on another primary page), so walking every chain from P's heads, and
  // the new head's, finds every pointer into P: those on P and those on secondary pages (a
  // newer back version placed on a secondary page while an older one stayed here).
  absl::flat_hash_map<uint16_t, std::vector<Loc>> refs;
  auto walk = [&](Loc from, PageNo back_page, uint16_t back_line) -> absl::Status {
    for (int hops = 0; back_page != page::kNoPage; ++hops) {
      if (hops >= kMaxChain) return absl::DataLossError("version chain loops");
      if (back_page == pno) {
        std::vector<Loc>& r = refs[back_line];
        if (std::find(r.begin(), r.end(), from) != r.end()) return absl::OkStatus();  // seen
        r.push_back(from);
      }
      absl::StatusOr<std::string> v = LineAt(P, pno, back_page, back_line);
      if (!v.ok()) return v.status();
      RecordHeader vh;
      if (!DecodeHeader(*v, &vh)) return absl::DataLossError("corrupt back version");
      from = {back_page, back_line};
      back_page = vh.back_page;
      back_line = vh.back_line;
    }
    return absl::OkStatus();
  };
  for (uint16_t k = 0; k < page::DpLineCount(P.data()); ++k) {
    std::optional<std::string_view> v = page::DpGet(P.data(), ps_, k);
    RecordHeader vh;
    if (!v || !DecodeHeader(*v, &vh) || (vh.flags & kRecNotPrimary)) continue;
    if (absl::Status s = walk({pno, k}, vh.back_page, vh.back_line); !s.ok()) return s;
  }
  // The new head is not on the page yet: kNoPage stands for it.
  if (absl::Status s = walk({page::kNoPage, 0}, nh->back_page, nh->back_line); !s.ok()) return s;

  for (uint16_t l = 0; l < page::DpLineCount(P.data()); ++l) {
    std::optional<std::string_view> v = page::DpGet(P.data(), ps_, l);
    RecordHeader vh;
    if (l == line || !v || !DecodeHeader(*v, &vh) || !(vh.flags & kRecBackVersion)) continue;
    auto it = refs.find(l);
    if (it == refs.end()) continue;  // unreachable (garbage waiting to be freed): leave it
    const std::vector<Loc> referrers = std::move(it->second);
    refs.erase(it);
    // The copy reaches disk before P (StoreSecondary orders it) and before every page that
    // is repointed at it; P, which loses the line, goes after all of them. Either state of
    // each page on disk is then a whole chain.
    absl::StatusOr<std::pair<PageNo, uint16_t>> loc = StoreSecondary(txn, std::string(*v), &P);
    if (!loc.ok()) return loc.status();
    const Loc to{loc->first, loc->second};
    for (const Loc& r : referrers) {
      if (r.page == page::kNoPage) {
        nh->back_page = to.page;
        nh->back_line = to.line;
        if (absl::Status s = Repoint(nrec, to.page, to.line); !s.ok()) return s;
      } else if (r.page == pno) {
        std::string rec(*page::DpGet(P.data(), ps_, r.line));
        if (absl::Status s = Repoint(&rec, to.page, to.line); !s.ok()) return s;
        page::DpReplace(P.data(), ps_, r.line, rec);
      } else {
        // A secondary page after the primary one: the latch order every writer uses.
        absl::StatusOr<PageRef> s = FetchForChange(r.page);
        if (!s.ok()) return s.status();
        std::optional<std::string_view> cur = page::DpGet(s->data(), ps_, r.line);
        RecordHeader ch;
        if (!cur || !DecodeHeader(*cur, &ch) || ch.back_page != pno || ch.back_line != l) {
          return absl::InternalError(absl::StrCat("page ", r.page, " line ", r.line,
                                                  ": back pointer moved under the latch"));
        }
        std::string rec(*cur);
        if (absl::Status st = Repoint(&rec, to.page, to.line); !st.ok()) return st;
        page::DpReplace(s->data(), ps_, r.line, rec);
        s->Mark(txn);
        if (r.page != to.page) {
          if (absl::Status st = cache_->AddPrecedence(*s, to.page); !st.ok()) return st;
        }
        s->Release();
        if (absl::Status st = cache_->AddPrecedence(P, r.page); !st.ok()) return st;
      }
    }
    // The copy's own pointer into P (an older version still here) now comes from the copy.
    if (vh.back_page == pno) {
      auto t = refs.find(vh.back_line);
      if (t != refs.end()) {
        for (Loc& r : t->second) {
          if (r == Loc{pno, l}) r = to;
        }
      }
    }
    // If the line is garbage waiting to be freed, the copy is what FreeLine must free.
    MovePendingFree(pno, l, to.page, to.line);
    page::DpDelete(P.data(), ps_, l);
    if (page::DpReplace(P.data(), ps_, line, *nrec)) return true;
  }
  return false;
}

}  // namespace ember::record
