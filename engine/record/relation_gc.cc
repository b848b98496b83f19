// Removing versions from a relation: undo and backout of a head version, garbage collection of
// a chain, and freeing the lines they unlink in careful-write order (see relation.h).
//
// Careful write: a line that a chain stops pointing at is freed only after the page that
// pointed at it is on disk without the pointer; until then the old copy of that page on disk
// may still lead a reader (after a crash) to the line. Lines on the same page as the pointer
// change atomically with it and are freed at once. The others are collected as `Unlinked` and
// freed in one batch by FreeUnlinked (one flush for the whole batch, not one per record).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/page/data_page.h"
#include "engine/page/pointer_page.h"
#include "engine/record/relation.h"

namespace ember::record {

using cache::LatchMode;
using cache::PageRef;
using page::PageNo;

absl::Status Relation::Backout(uint64_t rec, uint64_t head_txn, uint64_t mark_txn,
                               std::vector<Unlinked>* unlinked, std::string* removed_raw) {
  absl::StatusOr<PageNo> pno = PageOf(page::RecordDpSequence(rec));
  if (!pno.ok()) return pno.status();
  absl::StatusOr<PageRef> pr = FetchForChange(*pno);
  if (!pr.ok()) return pr.status();
  const uint16_t line = page::RecordLine(rec);
  std::optional<std::string_view> cur = page::DpGet(pr->data(), ps_, line);
  RecordHeader h;
  if (!cur || !DecodeHeader(*cur, &h) || (h.flags & kRecNotPrimary)) {
    return absl::NotFoundError(absl::StrCat("relation ", id_, " record ", rec, " does not exist"));
  }
  if (h.txn != head_txn) {
    return absl::InternalError(absl::StrCat("relation ", id_, " record ", rec, ": head version is ",
                                            "transaction ", h.txn, "'s, not ", head_txn, "'s"));
  }
  return BackoutLatched(*pr, *pno, line, mark_txn, unlinked, removed_raw);
}

absl::Status Relation::BackoutLatched(PageRef& P, PageNo pno, uint16_t line, uint64_t mark_txn,
                                      std::vector<Unlinked>* unlinked, std::string* removed_raw) {
  const std::string head_rec(*page::DpGet(P.data(), ps_, line));
  RecordHeader h;
  if (!DecodeHeader(head_rec, &h)) {
    return absl::DataLossError(absl::StrCat("page ", pno, " line ", line, ": corrupt record"));
  }
  absl::StatusOr<std::string> head_raw = RawBody(h, head_rec, std::string());
  if (!head_raw.ok()) return head_raw.status();
  // Nothing on P changes until the restored head is sure to be placed: an error (a fragment
  // page that cannot be read or written) leaves the chain as it was, whole, for a later
  // backout. What this one frees goes to `unlinked` only once the head is placed (below),
  // so the lines stay in use after an error.
  if (h.back_page == page::kNoPage) {
    // The record was new: it goes, and its record number can be reused.
    page::DpDelete(P.data(), ps_, line);
  } else {
    const bool same = h.back_page == pno;
    absl::StatusOr<std::string> b = LineAt(P, pno, h.back_page, h.back_line);
    if (!b.ok()) return b.status();
    const std::string back = std::move(*b);
    RecordHeader bh;
    if (!DecodeHeader(back, &bh) || !(bh.flags & kRecBackVersion)) {
      return absl::DataLossError(
          absl::StrCat("page ", h.back_page, " line ", h.back_line, ": expected a back version"));
    }
    RecordHeader nh = bh;
    nh.flags &= ~(kRecBackVersion | kRecDelta);
    std::string nrec;
    if (!(bh.flags & kRecDelta)) {
      // The stored bytes move up as they are (their fragments with them).
      EncodeHeader(nh, &nrec);
      nrec.append(back, bh.size());
    }
    // A back version on P goes first (its room is the restored head's); if the head cannot be
    // placed after all, it comes back to its line.
    if (same) page::DpDelete(P.data(), ps_, h.back_line);
    auto fail = [&](absl::Status s) {
      if (same && !page::DpInsertAt(P.data(), ps_, h.back_line, back)) {
        return absl::InternalError(absl::StrCat("page ", pno, " line ", h.back_line,
                                                ": back version could not be put back (",
                                                s.message(), ")"));
      }
      return s;
    };
    bool placed = !nrec.empty() && page::DpReplace(P.data(), ps_, line, nrec);
    if (!placed) {
      // A delta (or a version too big for the room here): rebuild it whole.
      absl::StatusOr<std::string> raw = RawBody(bh, back, *head_raw);
      if (!raw.ok()) return fail(raw.status());
      nh.flags &= ~kRecFragmented;
      nh.frag_page = page::kNoPage;
      nh.frag_line = 0;
      std::string stored;
      if (!(nh.flags & kRecDeleted)) nh.encoding = CompressBody(*raw, &stored);
      const size_t limit = HeadInlineLimit(P.data(), head_rec.size(), nh.size() + stored.size());
      absl::StatusOr<std::string> built = BuildVersion(mark_txn, nh, stored, limit, &P);
      if (!built.ok()) return fail(built.status());
      placed = page::DpReplace(P.data(), ps_, line, *built);
      if (!placed) {
        built = BuildVersion(mark_txn, nh, stored, /*inline_limit=*/0, &P);
        if (!built.ok()) return fail(built.status());
        placed = page::DpReplace(P.data(), ps_, line, *built);
      }
      if (!placed && !same) {
        // The head shrank (a delete stub, a tiny row) and the page has filled since: even the
        // fragmented header is up to a pointer larger than what it replaces. Back versions
        // stored on this page move to secondary pages until it fits, as for a new head. (With
        // the back version on P its room is enough.)
        absl::StatusOr<bool> room = MakeRoomForHead(P, pno, line, mark_txn, &nh, &*built);
        if (!room.ok()) return room.status();
        placed = *room;
      }
      if (!placed) {
        return fail(absl::InternalError(
            absl::StrCat("page ", pno, " line ", line, ": restored version does not fit")));
      }
      if (bh.flags & kRecFragmented) unlinked->push_back({pno, bh.frag_page, bh.frag_line, true});
    }
    if (!same) {
      NotePendingFree(h.back_page, h.back_line);
      unlinked->push_back({pno, h.back_page, h.back_line, false});
    }
  }
  if (h.flags & kRecFragmented) unlinked->push_back({pno, h.frag_page, h.frag_line, true});
  P.Mark(mark_txn);
  if (removed_raw) *removed_raw = std::move(*head_raw);
  return absl::OkStatus();
}

// What Collect carries from one step to the next.
struct Relation::CollectState {
  // The record's line and its page (number `pno`), latched exclusively throughout.
  PageNo pno = page::kNoPage;
  uint16_t line = 0;
  PageRef P;
  struct Version {
    PageNo page;
    uint16_t line;
    RecordHeader h;
    std::string rec;
    std::string raw;
    uint64_t cn;
  };
  // The chain, newest first, from the committed head up to and including the first version
  // every snapshot sees (chain[keep]; keep is SIZE_MAX when there is none yet).
  std::vector<Version> chain;
  size_t keep = SIZE_MAX;
  Collected out;
};

absl::StatusOr<Collected> Relation::Collect(uint64_t rec, uint64_t horizon_cn, uint64_t mark_txn,
                                            std::vector<Unlinked>* unlinked,
                                            const VersionCheck& check) {
  CollectState c;
  absl::StatusOr<bool> committed = BackOutDeadHeads(rec, mark_txn, unlinked, check, &c);
  if (!committed.ok()) return committed.status();
  if (!*committed) return std::move(c.out);
  if (absl::Status s = ReadChainToHorizon(horizon_cn, check, &c); !s.ok()) return s;
  Collected& out = c.out;
  // Nothing (more) to cut: only a backed-out dead head, if anything, went; the whole chain stays.
  auto keep_all = [&]() {
    for (const CollectState::Version& v : c.chain) {
      if (!(v.h.flags & kRecDeleted)) out.staying.push_back(v.raw);
    }
    if (out.changed) c.P.Mark(mark_txn);
    return out;
  };
  if (c.keep == SIZE_MAX) {  // nothing every snapshot sees yet
    out.pending = c.chain.size() > 1;
    return keep_all();
  }
  out.pending = c.keep > 0;
  const bool whole = c.keep == 0 && (c.chain[0].h.flags & kRecDeleted);
  if (!whole && c.keep + 1 == c.chain.size()) return keep_all();
  if (absl::Status s = CutChain(whole, mark_txn, unlinked, &c); !s.ok()) return s;
  return std::move(out);
}

absl::StatusOr<bool> Relation::BackOutDeadHeads(uint64_t rec, uint64_t mark_txn,
                                                std::vector<Unlinked>* unlinked,
                                                const VersionCheck& check, CollectState* c) {
  Collected& out = c->out;
  absl::StatusOr<PageNo> pno = PageOf(page::RecordDpSequence(rec));
  if (!pno.ok()) return false;
  c->pno = *pno;
  absl::StatusOr<PageRef> pr = FetchForChange(c->pno);
  if (!pr.ok()) return pr.status();
  c->P = std::move(*pr);
  PageRef& P = c->P;
  c->line = page::RecordLine(rec);
  const uint16_t line = c->line;
  for (;;) {
    std::optional<std::string_view> cur = page::DpGet(P.data(), ps_, line);
    RecordHeader h;
    if (!cur || !DecodeHeader(*cur, &h) || (h.flags & kRecNotPrimary)) return false;
    const uint64_t cn = tm_->StateOf(h.txn);
    if (cn == txn::kCnDead) {
      const size_t size = cur->size();
      if (check && !(h.flags & kRecDeleted)) {
        absl::StatusOr<std::string> head = RawBody(h, *cur, std::string());
        if (!head.ok()) return head.status();
        if (absl::Status s = check(*head, c->pno, line); !s.ok()) return s;
      }
      std::string raw;
      if (absl::Status s = BackoutLatched(P, c->pno, line, mark_txn, unlinked, &raw); !s.ok()) {
        return s;
      }
      out.backout_page = c->pno;
      out.changed = true;
      ++out.versions;
      out.bytes += size;
      if (!raw.empty()) out.going.push_back(std::move(raw));
      continue;
    }
    if (!txn::IsCommittedCn(cn)) {  // an active (or limbo) head: leave it
      out.pending = h.back_page != page::kNoPage;
      if (out.changed) P.Mark(mark_txn);
      return false;
    }
    c->chain.push_back(CollectState::Version{c->pno, line, h, std::string(*cur), {}, cn});
    return true;
  }
}

absl::Status Relation::ReadChainToHorizon(uint64_t horizon_cn, const VersionCheck& check,
                                          CollectState* c) {
  std::vector<CollectState::Version>& chain = c->chain;
  size_t& keep = c->keep;
  for (int hops = 0; hops < kMaxChain; ++hops) {
    CollectState::Version& v = chain.back();
    absl::StatusOr<std::string> raw =
        RawBody(v.h, v.rec, chain.size() > 1 ? chain[chain.size() - 2].raw : std::string());
    if (!raw.ok()) return raw.status();
    v.raw = std::move(*raw);
    if (check && !(v.h.flags & kRecDeleted)) {
      if (absl::Status s = check(v.raw, v.page, v.line); !s.ok()) return s;
    }
    if (keep == SIZE_MAX && txn::IsCommittedCn(v.cn) && v.cn <= horizon_cn) keep = chain.size() - 1;
    if (v.h.back_page == page::kNoPage) return absl::OkStatus();
    CollectState::Version b{v.h.back_page, v.h.back_line, {}, {}, {}, 0};
    absl::StatusOr<std::string> r = LineAt(c->P, c->pno, b.page, b.line);
    if (!r.ok()) return r.status();
    b.rec = std::move(*r);
    if (!DecodeHeader(b.rec, &b.h)) return absl::DataLossError("corrupt back version");
    b.cn = tm_->StateOf(b.h.txn);
    chain.push_back(std::move(b));
  }
  // Collecting a looping chain would unlink the same lines twice: report it, as readers do.
  return absl::DataLossError(
      absl::StrCat("page ", c->pno, " line ", c->line, ": version chain loops"));
}

absl::Status Relation::CutChain(bool whole, uint64_t mark_txn, std::vector<Unlinked>* unlinked,
                                CollectState* c) {
  const std::vector<CollectState::Version>& chain = c->chain;
  const size_t keep = c->keep;
  Collected& out = c->out;
  PageRef& P = c->P;
  // The page whose change makes the rest unreachable; lines on it go at once, others later.
  PageNo cut_page = chain[keep].page;
  if (whole) {
    page::DpDelete(P.data(), ps_, c->line);
    out.record_gone = true;
    cut_page = c->pno;
  }
  out.cut_page = cut_page;
  if (!whole) {
    RecordHeader nh = chain[keep].h;
    nh.back_page = page::kNoPage;
    nh.back_line = 0;
    std::string nrec;
    EncodeHeader(nh, &nrec);
    nrec.append(chain[keep].rec, chain[keep].h.size());
    if (cut_page == c->pno) {
      if (!page::DpReplace(P.data(), ps_, chain[keep].line, nrec)) {
        return absl::InternalError("collect: shrinking replace failed");
      }
    } else {
      absl::StatusOr<PageRef> s = FetchForChange(cut_page);
      if (!s.ok()) return s.status();
      if (!page::DpReplace(s->data(), ps_, chain[keep].line, nrec)) {
        return absl::InternalError("collect: shrinking replace failed");
      }
      s->Mark(mark_txn);
    }
  }
  for (size_t i = 0; i < chain.size(); ++i) {
    const CollectState::Version& v = chain[i];
    const bool goes = whole || i > keep;
    if (!goes) {
      if (!(v.h.flags & kRecDeleted)) out.staying.push_back(v.raw);
      continue;
    }
    ++out.versions;
    out.bytes += v.rec.size();
    if (!(v.h.flags & kRecDeleted)) out.going.push_back(v.raw);
    if (v.h.flags & kRecFragmented)
      unlinked->push_back({cut_page, v.h.frag_page, v.h.frag_line, true});
    if (i == 0) continue;  // the head line itself was deleted above
    if (v.page == cut_page && cut_page == c->pno) {
      page::DpDelete(P.data(), ps_, v.line);
    } else {
      NotePendingFree(v.page, v.line);
      unlinked->push_back({cut_page, v.page, v.line, false});
    }
  }
  out.changed = true;
  P.Mark(mark_txn);
  return absl::OkStatus();
}

void Relation::NotePendingFree(PageNo page, uint16_t line) {
  const uint64_t key = uint64_t{page} << 16 | line;
  util::MutexLock g(pending_mu_);
  pending_free_[key] = key;
  pending_at_[key] = key;
}

void Relation::MovePendingFree(PageNo from_page, uint16_t from_line, PageNo to_page,
                               uint16_t to_line) {
  const uint64_t from = uint64_t{from_page} << 16 | from_line;
  const uint64_t to = uint64_t{to_page} << 16 | to_line;
  util::MutexLock g(pending_mu_);
  auto it = pending_at_.find(from);
  if (it == pending_at_.end()) return;
  const uint64_t key = it->second;
  pending_at_.erase(it);
  pending_at_[to] = key;
  pending_free_[key] = to;
}

void Relation::FreeLater(std::vector<Unlinked>* unlinked) {
  util::MutexLock g(later_mu_);
  later_.insert(later_.end(), unlinked->begin(), unlinked->end());
  unlinked->clear();
}

void Relation::TakeLater(std::vector<Unlinked>* unlinked) {
  util::MutexLock g(later_mu_);
  unlinked->insert(unlinked->end(), later_.begin(), later_.end());
  later_.clear();
}

absl::Status Relation::FreeUnlinked(std::vector<Unlinked>* unlinked, uint64_t mark_txn,
                                    bool when_written) {
  if (unlinked->empty()) return absl::OkStatus();
  size_t waiting = 0;
  if (when_written) {
    util::MutexLock g(later_mu_);
    waiting = later_.size();
  }
  const bool wait_for_writes = when_written && waiting + unlinked->size() <= kMaxWaitingFrees;
  if (wait_for_writes) {
    // Each line goes once its pages are on disk without the pointer: an early write of them
    // would cost a sync of its own (a collector's batch is often just a page or two). A stored
    // BLOB goes now, as without `when_written`: until it is freed, Validate counts it orphaned.
    std::vector<Unlinked> wait;
    size_t ready = 0;
    for (Unlinked& u : *unlinked) {
      bool on_disk = true;
      for (auto [page, version] :
           {std::pair{u.from, &u.from_version}, {u.from2, &u.from2_version}}) {
        if (u.blob != 0 || page == page::kNoPage) continue;
        if (*version == Unlinked::kUnknownVersion) *version = cache_->VersionNow(page);
        if (!cache_->IsOnDisk(page, *version)) on_disk = false;
      }
      if (on_disk) {
        (*unlinked)[ready++] = std::move(u);
      } else {
        wait.push_back(std::move(u));
      }
    }
    unlinked->resize(ready);
    FreeLater(&wait);
  }
  std::vector<PageNo> from;
  for (const Unlinked& u : *unlinked) {
    if (wait_for_writes && u.blob == 0) continue;  // on disk already (seen above)
    if (u.from != page::kNoPage) from.push_back(u.from);
    if (u.from2 != page::kNoPage) from.push_back(u.from2);
  }
  std::sort(from.begin(), from.end());
  from.erase(std::unique(from.begin(), from.end()), from.end());
  if (absl::Status s = cache_->FlushPagesEarly(from); !s.ok()) return s;  // all can be retried
  std::vector<uint64_t> blobs;
  for (size_t i = 0; i < unlinked->size(); ++i) {
    const Unlinked& u = (*unlinked)[i];
    if (u.blob != 0) {
      blobs.push_back(u.blob);
      continue;
    }
    if (absl::Status s = FreeLine(u, mark_txn); !s.ok()) {
      // Left for a retry: this line and the rest, and the BLOBs not freed yet.
      std::vector<Unlinked> left;
      for (size_t k = 0; k < i; ++k) {
        if ((*unlinked)[k].blob != 0) left.push_back((*unlinked)[k]);
      }
      left.insert(left.end(), unlinked->begin() + static_cast<ptrdiff_t>(i), unlinked->end());
      *unlinked = std::move(left);
      return s;
    }
  }
  // A BLOB freed halfway (its header record gone, its pages not) cannot be retried; its pages
  // are unreachable, which Validate and the reclamation after a crash find.
  unlinked->clear();
  if (!blobs.empty() && blob_freer_) {
    std::sort(blobs.begin(), blobs.end());
    blobs.erase(std::unique(blobs.begin(), blobs.end()), blobs.end());
    if (absl::Status s = blob_freer_(blobs, mark_txn); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Relation::FreeLine(const Unlinked& u, uint64_t mark_txn) {
  PageNo p = u.page;
  uint16_t line = u.line;
  const uint64_t key = uint64_t{u.page} << 16 | u.line;
  // Where the unlinked back version is now (Write may have moved it): looked up, then checked
  // again under the latch of that page, which a move needs too.
  auto now = [&]() -> uint64_t {
    util::MutexLock g(pending_mu_);
    auto it = pending_free_.find(key);
    return it == pending_free_.end() ? key : it->second;
  };
  for (int hops = 0; hops < kMaxChain; ++hops) {
    if (!u.fragments_only) {
      const uint64_t at = now();
      p = static_cast<PageNo>(at >> 16);
      line = static_cast<uint16_t>(at & 0xFFFF);
    }
    absl::StatusOr<PageRef> r = FetchForChange(p);
    if (!r.ok()) return r.status();
    if (!u.fragments_only && now() != (uint64_t{p} << 16 | line)) continue;  // moved meanwhile
    std::optional<std::string_view> f = page::DpGet(r->data(), ps_, line);
    RecordHeader fh;
    const uint8_t want = u.fragments_only ? kRecFragment : kRecBackVersion;
    if (!f || !DecodeHeader(*f, &fh) || !(fh.flags & want)) {
      return absl::DataLossError(
          absl::StrCat("page ", p, " line ", line, ": expected ",
                       u.fragments_only ? "a record fragment" : "a back version"));
    }
    if (!u.fragments_only) {
      util::MutexLock g(pending_mu_);
      pending_free_.erase(key);
      pending_at_.erase(uint64_t{p} << 16 | line);
    }
    if (absl::Status s = RemoveLine(&*r, line, mark_txn); !s.ok()) return s;
    // A back version's own fragments are listed separately; a fragment chain continues here.
    if (!u.fragments_only || !(fh.flags & kRecFragmented)) return absl::OkStatus();
    p = fh.frag_page;
    line = fh.frag_line;
  }
  return absl::DataLossError("fragment chain loops");
}

absl::Status Relation::NoteSpaceFreed(uint64_t rec, uint64_t mark_txn) {
  if (!damage_.ok()) return damage_;
  const uint32_t seq = page::RecordDpSequence(rec);
  {
    util::ReaderLock g(mu_);
    if (seq >= pages_.size() || (pages_[seq].flags & page::kPpSecondary)) return absl::OkStatus();
  }
  if (absl::Status s = SetPageFlags(seq, 0, page::kPpFull, mark_txn); !s.ok()) return s;
  util::WriterLock g(mu_);
  if (seq < insert_seq_) insert_seq_ = seq;
  return absl::OkStatus();
}

absl::Status Relation::GetVersionStats(VersionStats* out) {
  if (!damage_.ok()) return damage_;
  std::vector<PageInfo> pages;
  {
    util::ReaderLock g(mu_);
    pages = pages_;
  }
  for (uint32_t seq = 0; seq < pages.size(); ++seq) {
    ++out->data_pages;
    if (pages[seq].flags & page::kPpHasGarbage) ++out->garbage_pages;
    if (pages[seq].flags & page::kPpSwept) ++out->swept_pages;
    if (pages[seq].flags & page::kPpSecondary) continue;
    // Each chain is walked with its head page latched, as readers do: the collector unlinks
    // back versions only under that page's exclusive latch, so none vanishes mid-walk.
    absl::Status s =
        VisitPrimaryLines(seq, [&](const PageRef& ref, uint16_t, const RecordHeader& h) {
          const PageNo p = ref.page_no();
          const uint8_t* data = ref.data();
          ++out->records;
          if (h.flags & kRecDeleted) ++out->delete_stubs;
          if (tm_->StateOf(h.txn) == txn::kCnDead) ++out->dead_heads;
          PageNo bp = h.back_page;
          uint16_t bl = h.back_line;
          std::string held;
          for (int hops = 0; bp != page::kNoPage && hops < kMaxChain; ++hops) {
            std::string_view rec;
            if (bp == p) {  // on the latched page itself: read in place, never latched twice
              std::optional<std::string_view> b = page::DpGet(data, ps_, bl);
              if (!b) return absl::DataLossError(absl::StrCat("page ", p, ": broken back pointer"));
              rec = *b;
            } else {
              absl::StatusOr<std::string> r = ReadLine(bp, bl);
              if (!r.ok()) return r.status();
              held = std::move(*r);
              rec = held;
            }
            RecordHeader bh;
            if (!DecodeHeader(rec, &bh)) return absl::DataLossError("corrupt back version");
            ++out->back_versions;
            out->back_version_bytes += rec.size();
            bp = bh.back_page;
            bl = bh.back_line;
          }
          return absl::OkStatus();
        });
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace ember::record
