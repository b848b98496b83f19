// Relation storage (see relation.h): loading the pointer pages, adding data pages, reading
// version chains, BLOB header records and the check for Validate. Writing versions is in
// relation_write.cc, removing them in relation_gc.cc, secondary pages' free space in
// relation_space.cc.
#include "engine/record/relation.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/page/data_page.h"
#include "engine/page/pointer_page.h"

namespace ember::record {

using cache::LatchMode;
using cache::PageRef;
using page::PageNo;

namespace {
std::string Where(uint32_t rel, uint64_t rec) {
  return absl::StrCat("relation ", rel, " record ", rec);
}
}  // namespace

absl::StatusOr<PageNo> Relation::Create(cache::BufferCache* cache, cache::PageSpace* space,
                                        uint64_t txn, uint32_t relation_id) {
  absl::StatusOr<PageRef> pp = space->Allocate(txn);
  if (!pp.ok()) return pp.status();
  page::InitPointerPage(pp->data(), cache->page_size(), pp->page_no(), relation_id, 0);
  pp->Mark(txn);
  return pp->page_no();
}

Relation::Relation(cache::BufferCache* cache, cache::PageSpace* space, const txn::TxnManager* tm,
                   uint32_t relation_id, PageNo first_pp)
    : cache_(cache),
      space_(space),
      tm_(tm),
      id_(relation_id),
      first_pp_(first_pp),
      ps_(cache->page_size()),
      slots_per_pp_(page::SlotsPerPointerPage(cache->page_size())) {}

absl::Status Relation::Load() {
  // Pointer pages are latched without mu_ held, and the lists installed afterwards: SetPageFlags
  // takes mu_ while it holds a pointer page, so no latch may be taken under mu_.
  std::vector<PageNo> pps;
  std::vector<PageInfo> pages;
  // Damage is kept (and the lists left empty): the caller decides whether it is fatal (the
  // catalog) or makes only this relation unusable (a user table, see damage()).
  auto damaged = [&](absl::Status s) {
    if (absl::IsDataLoss(s)) damage_ = s;
    return s;
  };
  for (PageNo p = first_pp_; p != page::kNoPage;) {
    absl::StatusOr<PageRef> r = cache_->Fetch(p, LatchMode::kShared);
    if (!r.ok()) return damaged(r.status());
    const uint8_t* d = r->data();
    if (page::GetType(d) != page::PageType::kPointer || page::PpRelation(d) != id_ ||
        page::PpSequence(d) != pps.size() || page::PpCount(d) > slots_per_pp_) {
      return damaged(absl::DataLossError(absl::StrCat("page ", p, " of ", cache_->file()->path(),
                                                      ": expected pointer page ", pps.size(),
                                                      " of relation ", id_)));
    }
    pps.push_back(p);
    const uint16_t n = page::PpCount(d);
    for (uint32_t s = 0; s < n; ++s) {
      pages.push_back({page::PpGetSlot(d, ps_, s), page::PpGetFlags(d, ps_, s)});
    }
    p = page::PpNext(d);
    if (p != page::kNoPage && n != slots_per_pp_) {
      return damaged(absl::DataLossError(
          absl::StrCat("page ", pps.back(), " of ", cache_->file()->path(), ": pointer page ",
                       pps.size() - 1, " of relation ", id_, " is not full but has a successor")));
    }
  }
  util::WriterLock g(mu_);
  pps_ = std::move(pps);
  pages_ = std::move(pages);
  fast_count_.store(0, std::memory_order_release);
  for (uint32_t s = 0; s < pages_.size(); ++s) SetFastPage(s, pages_[s].page, pages_[s].flags);
  insert_seq_ = 0;
  // The first back version looks for a secondary page not flagged full (SecondaryForStore).
  secondary_seq_ = -1;
  sec_space_ = 0;
  return absl::OkStatus();
}

uint32_t Relation::PageSequences() const { return fast_count_.load(std::memory_order_acquire); }

absl::StatusOr<PageNo> Relation::PageOf(uint32_t seq) const {
  if (!damage_.ok()) return damage_;
  const PageNo p = FastPage(seq);
  if (p == page::kNoPage) {
    return absl::NotFoundError(absl::StrCat("relation ", id_, " has no data page ", seq));
  }
  return p;
}

void Relation::SetFastPage(uint32_t seq, PageNo p, uint8_t flags) {
  if (seq >= fast_capacity_) {
    const uint32_t cap = std::max<uint32_t>(64, std::max(fast_capacity_ * 2, seq + 1));
    auto grown = std::make_unique<std::atomic<uint64_t>[]>(cap);
    const uint32_t n = fast_count_.load(std::memory_order_relaxed);
    const std::atomic<uint64_t>* old = fast_pages_.load(std::memory_order_relaxed);
    for (uint32_t i = 0; i < n; ++i) grown[i].store(old[i].load(std::memory_order_relaxed));
    fast_pages_.store(grown.get(), std::memory_order_release);  // before the count that needs it
    fast_arrays_.push_back(std::move(grown));
    fast_capacity_ = cap;
  }
  std::atomic<uint64_t>* arr = fast_arrays_.back().get();
  arr[seq].store(uint64_t{p} | (uint64_t{flags} << 32), std::memory_order_relaxed);
  if (seq >= fast_count_.load(std::memory_order_relaxed)) {
    fast_count_.store(seq + 1, std::memory_order_release);
  }
}

void Relation::PrefetchPages(uint32_t first, uint32_t n, bool skip_swept) const {
  std::vector<PageNo> pages;
  const uint32_t count = PageSequences();
  const uint64_t skip = page::kPpSecondary | (skip_swept ? page::kPpSwept : 0);
  for (uint32_t seq = first; seq < count && seq - first < n; ++seq) {
    const uint64_t e = FastEntry(seq);
    const PageNo p = static_cast<PageNo>(e);
    if (p != page::kNoPage && !((e >> 32) & skip)) pages.push_back(p);
  }
  for (size_t i = 0; i < pages.size(); i += cache::BufferCache::kMaxPrefetch) {
    const size_t k = std::min(pages.size() - i, cache::BufferCache::kMaxPrefetch);
    cache_->Prefetch(std::span<const PageNo>(pages.data() + i, k));
  }
}

// ---------------------------------------------------------------- page management

uint32_t Relation::ExtentPages(size_t pages) const {
  // An eighth of the relation's pages, rounded down to 8, 16 or 32 (a read-ahead's worth), so
  // that at most about an eighth of a table is allocated ahead of use; a small table (fewer than
  // 64 pages) gets single pages. Never more than an eighth of the cache: all of an extent's new
  // pages are dirty at once.
  uint32_t n = pages >= 256 ? 32 : pages >= 128 ? 16 : pages >= 64 ? 8 : 1;
  while (n >= 8 && n > cache_->capacity() / 8) n /= 2;
  return n >= 8 ? n : 1;
}

absl::StatusOr<uint32_t> Relation::AddDataPage(uint64_t txn, bool secondary) {
  if (!damage_.ok()) return damage_;  // the chain to link the page into is unknown
  util::MutexLock a(alloc_mu_);
  uint32_t seq;
  {
    util::ReaderLock g(mu_);
    seq = static_cast<uint32_t>(pages_.size());
  }
  const uint8_t flags = secondary ? page::kPpSecondary : 0;
  // Back versions go to single pages: a scan reads only primary pages, and a relation that is
  // mostly updated in place needs few secondary ones.
  const uint32_t n = secondary ? 1 : ExtentPages(seq);
  PageNo first = page::kNoPage;
  if (n > 1) {
    absl::StatusOr<PageNo> run = space_->AllocateRun(txn, n);
    if (!run.ok()) return run.status();
    first = *run;
  }
  for (uint32_t i = 0; i < n; ++i) {
    absl::StatusOr<PageRef> dp = n > 1 ? space_->Claim(first + i) : space_->Allocate(txn);
    absl::Status s = dp.status();
    if (s.ok()) {
      page::InitDataPage(dp->data(), ps_, dp->page_no(), id_, seq + i);
      page::SetFlags(dp->data(), flags);
      dp->Mark(txn);
      const PageNo dp_no = dp->page_no();
      dp->Release();
      s = LinkDataPage(txn, seq + i, dp_no, flags);
    }
    if (!s.ok()) {
      // The pages of the extent not linked yet are reachable from nothing: give them back (a
      // failure here leaves them to Validate's free_unreachable instead).
      for (uint32_t j = i; n > 1 && j < n; ++j) {
        (void)space_->Free(first + j, txn);
      }
      if (i == 0) return s;
      break;  // the pages linked so far are usable
    }
  }
  return seq;
}

absl::Status Relation::LinkDataPage(uint64_t txn, uint32_t seq, PageNo dp_no, uint8_t flags) {
  size_t npps;
  PageNo last_pp;
  {
    util::ReaderLock g(mu_);
    npps = pps_.size();
    last_pp = pps_.back();
  }
  const uint32_t pp_index = seq / slots_per_pp_;
  PageNo pp_no = last_pp;
  if (pp_index == npps) {  // the chain needs a new pointer page
    absl::StatusOr<PageRef> np = space_->Allocate(txn);
    if (!np.ok()) return np.status();
    page::InitPointerPage(np->data(), ps_, np->page_no(), id_, pp_index);
    np->Mark(txn);
    pp_no = np->page_no();
    np->Release();
    absl::StatusOr<PageRef> prev = cache_->Fetch(last_pp, LatchMode::kExclusive);
    if (!prev.ok()) return prev.status();
    if (absl::Status s = cache_->AddPrecedence(*prev, pp_no); !s.ok()) return s;
    page::PpSetNext(prev->data(), pp_no);
    prev->Mark(txn);
    prev->Mark(cache::kSystemMark);  // a link: the next commit flush of anyone writes it
    util::WriterLock g(mu_);
    pps_.push_back(pp_no);
  }
  {
    absl::StatusOr<PageRef> pp = cache_->Fetch(pp_no, LatchMode::kExclusive);
    if (!pp.ok()) return pp.status();
    if (absl::Status s = cache_->AddPrecedence(*pp, dp_no); !s.ok()) return s;
    page::PpSetSlot(pp->data(), ps_, seq % slots_per_pp_, dp_no);
    page::PpSetFlags(pp->data(), ps_, seq % slots_per_pp_, flags);
    pp->Mark(txn);
    // The page may get another transaction's committed records while `txn` is still active or
    // after it rolled back: the slot must reach disk with the next commit, whoever makes it.
    pp->Mark(cache::kSystemMark);
  }
  util::WriterLock g(mu_);
  pages_.push_back({dp_no, flags});
  SetFastPage(seq, dp_no, flags);
  return absl::OkStatus();
}

absl::Status Relation::SetPageFlags(uint32_t seq, uint8_t set, uint8_t clear, uint64_t txn) {
  // Most calls change nothing (the flag is set already): decided without mu_.
  const uint8_t known = static_cast<uint8_t>(FastEntry(seq) >> 32);
  if (seq < PageSequences() && ((known | set) & ~clear) == known) return absl::OkStatus();
  PageNo pp_no;
  {
    util::ReaderLock g(mu_);
    const uint8_t cur = pages_[seq].flags;
    if (((cur | set) & ~clear) == cur) return absl::OkStatus();
    pp_no = pps_[seq / slots_per_pp_];
  }
  absl::StatusOr<PageRef> pp = cache_->Fetch(pp_no, LatchMode::kExclusive);
  if (!pp.ok()) return pp.status();
  const uint32_t slot = seq % slots_per_pp_;
  const uint8_t f = static_cast<uint8_t>((page::PpGetFlags(pp->data(), ps_, slot) | set) & ~clear);
  page::PpSetFlags(pp->data(), ps_, slot, f);
  pp->Mark(txn);
  util::WriterLock g(mu_);
  pages_[seq].flags = f;
  SetFastPage(seq, pages_[seq].page, f);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- reading versions

absl::StatusOr<std::string> Relation::ReadLine(PageNo p, uint16_t line) {
  absl::StatusOr<PageRef> r = cache_->Fetch(p, LatchMode::kShared);
  if (!r.ok()) return r.status();
  if (page::GetType(r->data()) != page::PageType::kData || page::DpRelation(r->data()) != id_) {
    return absl::DataLossError(absl::StrCat("page ", p, " of ", cache_->file()->path(),
                                            ": not a data page of relation ", id_));
  }
  std::optional<std::string_view> rec = page::DpGet(r->data(), ps_, line);
  if (!rec) {
    return absl::DataLossError(absl::StrCat("page ", p, " of ", cache_->file()->path(), ": line ",
                                            line, " is empty or corrupt"));
  }
  return std::string(*rec);
}

absl::StatusOr<std::string> Relation::LineAt(const PageRef& P, PageNo pno, PageNo p,
                                             uint16_t line) {
  if (p != pno) return ReadLine(p, line);
  std::optional<std::string_view> b = page::DpGet(P.data(), ps_, line);
  if (!b) return absl::DataLossError(absl::StrCat("page ", pno, ": broken back pointer"));
  return std::string(*b);
}

absl::StatusOr<std::string> Relation::StoredBody(const RecordHeader& h, std::string_view rec) {
  std::string out(rec.substr(h.size()));
  RecordHeader cur = h;
  for (int hops = 0; cur.flags & kRecFragmented; ++hops) {
    if (hops > kMaxChain) return absl::DataLossError("fragment chain loops");
    absl::StatusOr<std::string> f = ReadLine(cur.frag_page, cur.frag_line);
    if (!f.ok()) return f.status();
    RecordHeader fh;
    if (!DecodeHeader(*f, &fh) || !(fh.flags & kRecFragment)) {
      return absl::DataLossError(absl::StrCat("page ", cur.frag_page, " line ", cur.frag_line,
                                              ": expected a record fragment"));
    }
    out.append(*f, fh.size());
    cur = fh;
  }
  return out;
}

absl::StatusOr<std::string> Relation::RawBody(const RecordHeader& h, std::string_view rec,
                                              const std::string& newer_raw) {
  if (h.flags & kRecDeleted) return std::string();
  // A body stored whole is decoded straight from `rec`; only fragments are gathered first.
  std::string gathered;
  std::string_view stored = rec.substr(h.size());
  if (h.flags & kRecFragmented) {
    absl::StatusOr<std::string> g = StoredBody(h, rec);
    if (!g.ok()) return g.status();
    gathered = std::move(*g);
    stored = gathered;
  }
  std::string raw;
  absl::Status s = (h.flags & kRecDelta) ? ApplyDelta(newer_raw, stored, &raw)
                                         : DecompressBody(h.encoding, stored, &raw);
  if (!s.ok()) return s;
  return raw;
}

absl::StatusOr<bool> Relation::ReadChainView(PageNo primary_no, const uint8_t* page, uint16_t line,
                                             const ReadView& view, std::string* scratch,
                                             std::string_view* body) {
  std::optional<std::string_view> first = page::DpGet(page, ps_, line);
  if (!first) return absl::NotFoundError("no such record");
  // Versions on the primary page are read in place (the caller holds its latch, and nothing
  // here changes it); one from another page is copied into `held`.
  std::string_view cur = *first;
  bool cur_in_page = true;
  std::string held;
  std::string newer_raw;
  for (int hops = 0; hops < kMaxChain; ++hops) {
    RecordHeader h;
    if (!DecodeHeader(cur, &h)) {
      return absl::DataLossError(absl::StrCat("page ", primary_no, ": corrupt record header"));
    }
    if (hops == 0 && (h.flags & kRecNotPrimary)) {
      return absl::NotFoundError("not a primary record");
    }
    const bool visible = view.Visible(h.txn);
    if (visible && (h.flags & kRecDeleted)) return false;
    if (!visible && h.back_page == page::kNoPage) return false;
    if (visible && cur_in_page && h.encoding == BodyEncoding::kPlain &&
        !(h.flags & (kRecFragmented | kRecDelta))) {
      *body = cur.substr(h.size());  // the common case: no copy
      return true;
    }
    absl::StatusOr<std::string> raw = RawBody(h, cur, newer_raw);
    if (!raw.ok()) return raw.status();
    if (visible) {
      *scratch = std::move(*raw);
      *body = *scratch;
      return true;
    }
    newer_raw = std::move(*raw);
    if (h.back_page == primary_no) {
      std::optional<std::string_view> b = page::DpGet(page, ps_, h.back_line);
      if (!b)
        return absl::DataLossError(absl::StrCat("page ", primary_no, ": broken back pointer"));
      cur = *b;
    } else {
      absl::StatusOr<std::string> b = ReadLine(h.back_page, h.back_line);
      if (!b.ok()) return b.status();
      held = std::move(*b);
      cur = held;
      cur_in_page = false;
    }
  }
  return absl::DataLossError("version chain loops");
}

absl::StatusOr<VisibleVersion> Relation::ReadChain(PageNo primary_no, const uint8_t* page,
                                                   uint16_t line, const ReadView& view) {
  std::string scratch;
  std::string_view body;
  absl::StatusOr<bool> found = ReadChainView(primary_no, page, line, view, &scratch, &body);
  if (!found.ok()) return found.status();
  if (!*found) return VisibleVersion{};
  if (body.data() == scratch.data()) return VisibleVersion{true, std::move(scratch)};
  return VisibleVersion{true, std::string(body)};
}

absl::StatusOr<VisibleVersion> Relation::Read(uint64_t rec, const ReadView& view) {
  absl::StatusOr<PageNo> p = PageOf(page::RecordDpSequence(rec));
  if (!p.ok()) {
    if (!absl::IsNotFound(p.status())) return p.status();  // damage, not an absent record
    return absl::NotFoundError(absl::StrCat(Where(id_, rec), " does not exist"));
  }
  absl::StatusOr<PageRef> r = cache_->Fetch(*p, LatchMode::kShared);
  if (!r.ok()) return r.status();
  absl::StatusOr<VisibleVersion> v = ReadChain(*p, r->data(), page::RecordLine(rec), view);
  if (absl::IsNotFound(v.status())) {
    return absl::NotFoundError(absl::StrCat(Where(id_, rec), " does not exist"));
  }
  return v;
}

absl::Status Relation::WalkChain(const PageRef& r, PageNo p, uint16_t line, std::string_view first,
                                 RecordHeader h, const VersionFn& fn,
                                 std::pair<PageNo, uint16_t>* at, bool* stopped) {
  std::string_view cur = first;
  std::string held;
  std::string newer_raw;
  std::pair<PageNo, uint16_t> here{p, line};
  for (int hops = 0; hops < kMaxChain; ++hops) {
    if (hops > 0 && !DecodeHeader(cur, &h)) {
      return absl::DataLossError(
          absl::StrCat("page ", here.first, " line ", here.second, ": corrupt record header"));
    }
    if (hops == 0 && h.encoding == BodyEncoding::kPlain &&
        !(h.flags & (kRecFragmented | kRecDelta | kRecDeleted))) {
      // The common head: its body read in place on the latched page, not copied.
      const std::string_view body = cur.substr(h.size());
      if (at) *at = here;
      if (!fn(h.txn, false, body)) {
        if (stopped) *stopped = true;
        return absl::OkStatus();
      }
      if (h.back_page == page::kNoPage) return absl::OkStatus();
      newer_raw.assign(body);
      here = {h.back_page, h.back_line};
      absl::StatusOr<std::string> b = LineAt(r, p, h.back_page, h.back_line);
      if (!b.ok()) return b.status();
      held = std::move(*b);
      cur = held;
      continue;
    }
    absl::StatusOr<std::string> raw = RawBody(h, cur, newer_raw);
    if (!raw.ok()) {
      return absl::Status(
          raw.status().code(),
          absl::StrCat("page ", here.first, " line ", here.second, ": ", raw.status().message()));
    }
    if (at) *at = here;
    if (!fn(h.txn, (h.flags & kRecDeleted) != 0, *raw)) {
      if (stopped) *stopped = true;
      return absl::OkStatus();
    }
    if (h.back_page == page::kNoPage) return absl::OkStatus();
    here = {h.back_page, h.back_line};
    newer_raw = std::move(*raw);
    absl::StatusOr<std::string> b = LineAt(r, p, h.back_page, h.back_line);
    if (!b.ok()) return b.status();
    held = std::move(*b);
    cur = held;
  }
  return absl::DataLossError("version chain loops");
}

absl::Status Relation::ForEachVersion(uint64_t rec, const VersionFn& fn,
                                      std::pair<PageNo, uint16_t>* at) {
  absl::StatusOr<PageNo> p = PageOf(page::RecordDpSequence(rec));
  if (!p.ok()) return p.status();
  // The chain is walked with the record's page latched, as readers walk it: the collector cuts
  // and backs out versions only under that page's exclusive latch, so no line of the chain is
  // freed (and reused) mid-walk.
  absl::StatusOr<PageRef> r = cache_->Fetch(*p, LatchMode::kShared);
  if (!r.ok()) return r.status();
  std::optional<std::string_view> first = page::DpGet(r->data(), ps_, page::RecordLine(rec));
  RecordHeader h;
  if (!first || !DecodeHeader(*first, &h)) {
    return absl::NotFoundError(absl::StrCat(Where(id_, rec), " does not exist"));
  }
  // A record number whose record is gone may name a line that now holds something else: an
  // index entry the collector has not dropped yet can lead here after the line was taken by
  // another record's back version (whose key may well be the entry's). It is not this record.
  if (h.flags & kRecNotPrimary) {
    return absl::NotFoundError(absl::StrCat(Where(id_, rec), " does not exist"));
  }
  return WalkChain(*r, *p, page::RecordLine(rec), *first, h, fn, at, nullptr);
}

absl::Status Relation::ForEachVersionOnPage(uint32_t seq, const PageVersionFn& fn,
                                            std::pair<PageNo, uint16_t>* at) {
  uint64_t rec = 0;
  const VersionFn one = [&](uint64_t txn, bool deleted, std::string_view raw) {
    return fn(rec, txn, deleted, raw);
  };
  bool stopped = false;
  return VisitPrimaryLines(
      seq, [&](const PageRef& ref, uint16_t line, const RecordHeader& h) -> absl::Status {
        if (stopped) return absl::OkStatus();
        rec = page::MakeRecordNo(seq, line);
        const std::string_view first = *page::DpGet(ref.data(), ps_, line);
        return WalkChain(ref, ref.page_no(), line, first, h, one, at, &stopped);
      });
}

absl::Status Relation::VisitPrimaryLines(uint32_t seq, const PrimaryLineFn& fn) {
  if (!damage_.ok()) return damage_;
  if (seq >= PageSequences()) return absl::OkStatus();
  const uint64_t e = FastEntry(seq);
  if ((e >> 32) & page::kPpSecondary) return absl::OkStatus();
  const PageNo p = static_cast<PageNo>(e);
  absl::StatusOr<PageRef> r = cache_->Fetch(p, LatchMode::kShared);
  if (!r.ok()) return r.status();
  const uint16_t n = page::DpLineCount(r->data());
  for (uint16_t line = 0; line < n; ++line) {
    std::optional<std::string_view> rec = page::DpGet(r->data(), ps_, line);
    if (!rec) continue;
    RecordHeader h;
    if (!DecodeHeader(*rec, &h)) {
      return absl::DataLossError(absl::StrCat("page ", p, " line ", line, ": corrupt record"));
    }
    if (h.flags & kRecNotPrimary) continue;
    if (absl::Status s = fn(*r, line, h); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Relation::ReadPage(uint32_t seq, const ReadView& view,
                                std::vector<std::pair<uint64_t, std::string>>* out,
                                std::vector<uint64_t>* garbage, uint64_t horizon_cn) {
  return VisitPage(
      seq, view,
      [&](uint64_t rec, std::string_view raw) {
        out->emplace_back(rec, std::string(raw));
        return absl::OkStatus();
      },
      garbage, horizon_cn);
}

absl::Status Relation::VisitPage(uint32_t seq, const ReadView& view, RecordFn fn,
                                 std::vector<uint64_t>* garbage, uint64_t horizon_cn) {
  std::string scratch;
  return VisitPrimaryLines(seq, [&](const PageRef& ref, uint16_t line, const RecordHeader& h) {
    const PageNo p = ref.page_no();
    const uint8_t* data = ref.data();
    if (garbage) {
      const uint64_t cn = tm_->StateOf(h.txn);
      if (cn == txn::kCnDead || (txn::IsCommittedCn(cn) && cn <= horizon_cn &&
                                 (h.back_page != page::kNoPage || (h.flags & kRecDeleted)))) {
        garbage->push_back(page::MakeRecordNo(seq, line));
      }
    }
    std::string_view body;
    absl::StatusOr<bool> found = ReadChainView(p, data, line, view, &scratch, &body);
    if (!found.ok()) return found.status();
    if (!*found) return absl::OkStatus();
    return fn(page::MakeRecordNo(seq, line), body);
  });
}

absl::StatusOr<std::pair<PageNo, uint16_t>> Relation::StoreBlobRecord(
    uint64_t txn, std::string_view body, std::span<const PageNo> links) {
  if (!damage_.ok()) return damage_;
  RecordHeader h;
  h.txn = txn;
  h.flags = kRecBlob;
  std::string rec;
  EncodeHeader(h, &rec);
  rec.append(body);
  if (rec.size() + page::kDpLineSize > page::MaxRecordOnPage(ps_)) {
    return absl::InvalidArgumentError("BLOB header record larger than a page");
  }
  return StoreSecondary(txn, rec, nullptr, links);
}

absl::StatusOr<std::string> Relation::ReadBlobRecord(PageNo p, uint16_t line) {
  // BLOB ids come from callers too: one naming no BLOB header record (a page past the end, or
  // not a data page of ours, an empty line) is NotFound, not damage.
  auto none = [&](const char* why) {
    return absl::NotFoundError(absl::StrCat("page ", p, " line ", line, " of relation ", id_,
                                            " is not a BLOB (", why, ")"));
  };
  // A BLOB of a damaged table: what reaches it (the table's rows) is lost, so is it.
  if (!damage_.ok()) return damage_;
  if (p >= space_->page_count()) return none("the page is past the end of the database");
  absl::StatusOr<PageRef> r = cache_->Fetch(p, LatchMode::kShared);
  if (!r.ok()) return r.status();
  if (page::GetType(r->data()) != page::PageType::kData || page::DpRelation(r->data()) != id_) {
    return none("not a data page of the relation");
  }
  std::optional<std::string_view> rec = page::DpGet(r->data(), ps_, line);
  if (!rec) return none("no such line");
  RecordHeader h;
  if (!DecodeHeader(*rec, &h) || !(h.flags & kRecBlob)) return none("a record, not a BLOB");
  return std::string(rec->substr(h.size()));
}

absl::Status Relation::DeleteBlobRecord(PageNo p, uint16_t line, uint64_t mark_txn) {
  if (!damage_.ok()) return damage_;
  absl::StatusOr<PageRef> r = FetchForChange(p);
  if (!r.ok()) return r.status();
  std::optional<std::string_view> rec = page::DpGet(r->data(), ps_, line);
  RecordHeader h;
  if (!rec || !DecodeHeader(*rec, &h) || !(h.flags & kRecBlob)) {
    return absl::DataLossError(absl::StrCat("page ", p, " line ", line, " of relation ", id_,
                                            ": expected a BLOB header record"));
  }
  return RemoveLine(&*r, line, mark_txn);
}

absl::StatusOr<PageNo> Relation::RecordPage(uint64_t rec) const {
  return PageOf(page::RecordDpSequence(rec));
}

absl::Status Relation::ListRecords(uint32_t seq, std::vector<uint64_t>* out) {
  return VisitPrimaryLines(seq, [&](const PageRef&, uint16_t line, const RecordHeader&) {
    out->push_back(page::MakeRecordNo(seq, line));
    return absl::OkStatus();
  });
}

absl::Status Relation::ListCollectable(uint32_t seq, std::vector<uint64_t>* out) {
  return VisitPrimaryLines(seq, [&](const PageRef&, uint16_t line, const RecordHeader& h) {
    if (h.back_page != page::kNoPage || (h.flags & kRecDeleted) ||
        tm_->StateOf(h.txn) == txn::kCnDead) {
      out->push_back(page::MakeRecordNo(seq, line));
    }
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------- validation

absl::Status Relation::Check(std::vector<std::string>* errors, std::vector<PageNo>* pages,
                             const std::function<void(uint64_t)>& on_record, uint64_t* versions,
                             const BlobVisitor& on_blob,
                             const std::function<absl::Status(std::string_view)>& on_version) {
  if (!damage_.ok()) {
    // Nothing of the relation is walked: its pages (the ones before the damage too) are
    // listed as unreachable, and with this error nothing is freed.
    errors->push_back(absl::StrCat("relation ", id_, ": ", damage_.message()));
    return absl::OkStatus();
  }
  std::vector<PageInfo> infos;
  {
    util::ReaderLock g(mu_);
    infos = pages_;
    pages->insert(pages->end(), pps_.begin(), pps_.end());
  }
  for (uint32_t seq = 0; seq < infos.size(); ++seq) {
    const PageNo p = infos[seq].page;
    pages->push_back(p);
    absl::StatusOr<PageRef> r = cache_->Fetch(p, LatchMode::kShared);
    if (!r.ok()) {
      errors->push_back(absl::StrCat("relation ", id_, " data page ", seq, " (page ", p,
                                     "): ", r.status().message()));
      continue;
    }
    const uint8_t* d = r->data();
    if (page::GetType(d) != page::PageType::kData || page::DpRelation(d) != id_ ||
        page::DpSequence(d) != seq) {
      errors->push_back(absl::StrCat("page ", p, ": expected data page ", seq, " of relation ", id_,
                                     ", found ", page::PageTypeName(page::GetType(d))));
      continue;
    }
    if (std::string e = page::DpCheck(d, ps_); !e.empty()) {
      errors->push_back(absl::StrCat("page ", p, ": ", e));
      continue;
    }
    const bool secondary = infos[seq].flags & page::kPpSecondary;
    if (secondary != ((page::GetFlags(d) & page::kPpSecondary) != 0)) {
      errors->push_back(absl::StrCat("page ", p, ": secondary flag disagrees with pointer page"));
    }
    // A swept flag (on the page or in its slot) must not lie: nothing but versions every
    // snapshot sees (relation_swept.cc). The slot's flag without the page's never happens.
    const bool pp_swept = (infos[seq].flags & page::kPpSwept) != 0;
    const bool swept = (page::GetFlags(d) & page::kPpSwept) != 0;
    if (pp_swept && !swept) {
      errors->push_back(absl::StrCat("page ", p, ": flagged swept in its pointer page slot only"));
    }
    const uint16_t n = page::DpLineCount(d);
    for (uint16_t line = 0; line < n; ++line) {
      std::optional<std::string_view> rec = page::DpGet(d, ps_, line);
      if (!rec) continue;
      RecordHeader h;
      if (!DecodeHeader(*rec, &h)) {
        errors->push_back(absl::StrCat("page ", p, " line ", line, ": corrupt record header"));
        continue;
      }
      // Any committed version: it was at or below the horizon when the page was flagged.
      if (swept && !SweptLine(h, std::numeric_limits<uint64_t>::max())) {
        errors->push_back(absl::StrCat("page ", p, " line ", line,
                                       ": the page is flagged swept but holds a version a sweep "
                                       "would look at"));
      }
      if ((h.flags & kRecBlob) && on_blob) on_blob(p, line, h.txn, rec->substr(h.size()));
      if (h.flags & kRecNotPrimary) continue;
      if (secondary) {
        errors->push_back(
            absl::StrCat("page ", p, " line ", line, ": primary record on a secondary page"));
        continue;
      }
      const uint64_t rec_no = page::MakeRecordNo(seq, line);
      r->Release();      // ForEachVersion fetches the page itself
      absl::Status bad;  // what on_version said of the version at `at`
      std::pair<PageNo, uint16_t> at;
      absl::Status s = ForEachVersion(
          rec_no,
          [&](uint64_t, bool deleted, std::string_view raw) {
            ++*versions;
            if (!deleted && on_version) bad = on_version(raw);
            return bad.ok();
          },
          &at);
      if (!bad.ok()) {
        errors->push_back(absl::StrCat(Where(id_, rec_no), ": the version at page ", at.first,
                                       " line ", at.second, " does not decode: ", bad.message()));
      } else if (!s.ok()) {
        errors->push_back(absl::StrCat(Where(id_, rec_no), ": ", s.message()));
      } else {
        // Every page the chain reaches is in use, listed in a pointer page or not: a crash can
        // leave a new secondary page of a transaction that never committed out of the pointer
        // pages while its version on disk points into it (and committed versions may lie
        // beyond that one). Freeing it as unreachable would leave that pointer dangling.
        absl::StatusOr<std::string> cur = ReadLine(p, line);
        for (int hops = 0; cur.ok() && hops < kMaxChain; ++hops) {
          RecordHeader vh;
          if (!DecodeHeader(*cur, &vh)) break;
          RecordHeader fh = vh;
          for (int f = 0; (fh.flags & kRecFragmented) && f < kMaxChain; ++f) {
            pages->push_back(fh.frag_page);
            absl::StatusOr<std::string> frag = ReadLine(fh.frag_page, fh.frag_line);
            if (!frag.ok() || !DecodeHeader(*frag, &fh)) break;
          }
          if (vh.back_page == page::kNoPage) break;
          pages->push_back(vh.back_page);
          cur = ReadLine(vh.back_page, vh.back_line);
        }
      }
      on_record(rec_no);
      absl::StatusOr<PageRef> again = cache_->Fetch(p, LatchMode::kShared);
      if (!again.ok()) return again.status();
      *r = std::move(*again);
      d = r->data();
    }
  }
  return absl::OkStatus();
}

}  // namespace ember::record
