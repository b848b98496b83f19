// A transaction's temporary and stored BLOBs (see txn_blobs.h).
#include "engine/blob/txn_blobs.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/blob/stored_blobs.h"
#include "engine/page/blob_page.h"
#include "engine/util/coding.h"

namespace ember::blob {

namespace {
constexpr size_t kCopyChunk = 256 << 10;
std::string IdText(uint64_t id) {
  return IsTemp(id) ? absl::StrCat("temporary BLOB ", id & ~kTempBit) : absl::StrCat("BLOB ", id);
}
}  // namespace

TxnBlobs::TxnBlobs(cache::BufferCache* cache, cache::PageSpace* space, io::TempSpace* temp,
                   int mode, uint64_t txn, Resolver resolve, std::atomic<uint64_t>* ids)
    : cache_(cache), space_(space), temp_(temp), mode_(mode), txn_(txn),
      resolve_(std::move(resolve)), ids_(ids) {}

TxnBlobs::~TxnBlobs() { (void)ReleaseAll(); }

absl::StatusOr<uint64_t> TxnBlobs::Create(bool engine_made) {
  Temp t;
  t.in_temp_space = temp_ != nullptr && (mode_ == 2 || (mode_ == 1 && engine_made));
  if (!t.in_temp_space) t.paged = std::make_unique<PagedBlob>(cache_, space_, 0);
  const uint64_t n = ids_ ? ids_->fetch_add(1, std::memory_order_relaxed) : next_temp_++;
  const uint64_t id = kTempBit | (n & ~kTempBit);
  temps_.emplace(id, std::move(t));
  return id;
}

absl::StatusOr<TxnBlobs::Temp*> TxnBlobs::FindTemp(uint64_t id) {
  auto it = temps_.find(id);
  if (it == temps_.end()) {
    return absl::NotFoundError(absl::StrCat(IdText(id),
                                            " is not a temporary BLOB of this transaction"));
  }
  return &it->second;
}

absl::StatusOr<TxnBlobs::Stored*> TxnBlobs::FindStored(uint64_t id) {
  if (auto it = stored_.find(id); it != stored_.end()) return it->second.get();
  record::Relation* rel = resolve_(IdRelation(id));
  if (!rel) return absl::NotFoundError(absl::StrCat(IdText(id), ": no such relation"));
  absl::StatusOr<std::string> body = rel->ReadBlobRecord(IdPage(id), IdLine(id));
  if (!body.ok()) return body.status();
  absl::StatusOr<BlobHeader> h = DecodeBlobHeader(*body);
  if (!h.ok()) return h.status();
  auto s = std::make_unique<Stored>();
  s->length = h->length;
  if (h->level == 0) {
    s->inline_data = std::move(h->inline_data);
  } else {
    std::vector<page::PageNo> pages, lists;
    if (absl::Status st = DataPagesOf(cache_, *h, &pages, &lists); !st.ok()) return st;
    const uint64_t cap = page::BlobPageCapacity(cache_->page_size());
    if ((s->length + cap - 1) / cap != pages.size()) {
      return absl::DataLossError(absl::StrCat(IdText(id), ": page list does not match length"));
    }
    s->paged = std::make_unique<PagedBlob>(cache_, space_, IdRelation(id));
    s->paged->Adopt(std::move(pages), s->length);
  }
  Stored* raw = s.get();
  stored_.emplace(id, std::move(s));
  return raw;
}

void TxnBlobs::AddPiece(Temp* t, Piece p) {
  t->len += p.len;
  t->pieces.push_back(std::move(p));
  t->ends.push_back(t->len);
}

absl::Status TxnBlobs::AppendTemp(Temp* t, const void* data, size_t n) {
  if (n == 0) return absl::OkStatus();
  if (!t->in_temp_space) return t->paged->Append(txn_, data, n);
  const char* src = static_cast<const char*>(data);
  if (!t->pieces.empty()) {
    // Past the end of the last extent, when our last piece is what reaches that end: bytes
    // other pieces name (all below `used`) never change.
    Piece& last = t->pieces.back();
    Extent& e = *last.ext;
    if (last.start + last.len == e.used && e.used < e.cap) {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(n, e.cap - e.used));
      if (absl::Status s = temp_->Write(e.off + e.used, src, k); !s.ok()) return s;
      e.used += k;
      last.len += k;
      t->len += k;
      t->ends.back() = t->len;
      src += k;
      n -= k;
      if (n == 0) return absl::OkStatus();
    }
  }
  // A new extent, doubling: a BLOB grown by appends has O(log n) pieces.
  const uint64_t cap = std::max<uint64_t>({uint64_t{n}, t->len, 4096});
  absl::StatusOr<uint64_t> off = temp_->Allocate(cap);
  if (!off.ok()) return off.status();
  io::TempSpace* temp = temp_;
  std::shared_ptr<Extent> e(new Extent{*off, cap, 0}, [temp](Extent* x) {
    temp->Release(x->off, x->cap);
    delete x;
  });
  if (absl::Status s = temp_->Write(e->off, src, n); !s.ok()) return s;
  e->used = n;
  AddPiece(t, Piece{std::move(e), 0, n});
  return absl::OkStatus();
}

absl::Status TxnBlobs::AppendBlob(Temp* dst, uint64_t src) {
  if (src == 0) return absl::OkStatus();
  if (dst->in_temp_space && IsTemp(src)) {
    absl::StatusOr<Temp*> s = FindTemp(src);
    if (!s.ok()) return s.status();
    if ((*s)->in_temp_space) {
      // Copied first: dst and src may be the same BLOB.
      const std::vector<Piece> pieces = (*s)->pieces;
      for (const Piece& p : pieces) AddPiece(dst, p);
      return absl::OkStatus();
    }
  }
  return CopyInto(src, dst);
}

absl::Status TxnBlobs::ReadTemp(const Temp& t, uint64_t offset, void* buf, size_t n) const {
  char* out = static_cast<char*>(buf);
  size_t i = static_cast<size_t>(
      std::upper_bound(t.ends.begin(), t.ends.end(), offset) - t.ends.begin());
  while (n > 0 && i < t.pieces.size()) {
    const Piece& p = t.pieces[i];
    const uint64_t piece_from = t.ends[i] - p.len;
    const uint64_t in = offset - piece_from;
    const size_t k = static_cast<size_t>(std::min<uint64_t>(n, p.len - in));
    if (absl::Status s = temp_->Read(p.ext->off + p.start + in, out, k); !s.ok()) return s;
    out += k;
    offset += k;
    n -= k;
    ++i;
  }
  return absl::OkStatus();
}

absl::Status TxnBlobs::Append(uint64_t id, std::string_view bytes) {
  absl::StatusOr<Temp*> t = FindTemp(id);
  if (!t.ok()) return t.status();
  return AppendTemp(*t, bytes.data(), bytes.size());
}

absl::StatusOr<uint64_t> TxnBlobs::Length(uint64_t id) {
  if (IsTemp(id)) {
    absl::StatusOr<Temp*> t = FindTemp(id);
    if (!t.ok()) return t.status();
    return (*t)->in_temp_space ? (*t)->len : (*t)->paged->length();
  }
  absl::StatusOr<Stored*> s = FindStored(id);
  if (!s.ok()) return s.status();
  return (*s)->length;
}

absl::Status TxnBlobs::Read(uint64_t id, uint64_t offset, void* buf, size_t n) {
  if (IsTemp(id)) {
    absl::StatusOr<Temp*> t = FindTemp(id);
    if (!t.ok()) return t.status();
    Temp& tt = **t;
    if (!tt.in_temp_space) return tt.paged->Read(offset, buf, n);
    if (offset + n > tt.len) {
      return absl::OutOfRangeError(absl::StrCat(IdText(id), ": read past its length ", tt.len));
    }
    return ReadTemp(tt, offset, buf, n);
  }
  absl::StatusOr<Stored*> s = FindStored(id);
  if (!s.ok()) return s.status();
  if (offset + n > (*s)->length) {
    return absl::OutOfRangeError(absl::StrCat(IdText(id), ": read past its length ",
                                              (*s)->length));
  }
  if ((*s)->paged) return (*s)->paged->Read(offset, buf, n);
  std::memcpy(buf, (*s)->inline_data.data() + offset, n);
  return absl::OkStatus();
}

absl::Status TxnBlobs::CopyInto(uint64_t src, Temp* dst) {
  absl::StatusOr<uint64_t> len = Length(src);
  if (!len.ok()) return len.status();
  std::vector<char> chunk;
  for (uint64_t done = 0; done < *len;) {
    const size_t k = static_cast<size_t>(std::min<uint64_t>(kCopyChunk, *len - done));
    chunk.resize(k);
    if (absl::Status s = Read(src, done, chunk.data(), k); !s.ok()) return s;
    if (absl::Status s = AppendTemp(dst, chunk.data(), k); !s.ok()) return s;
    done += k;
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> TxnBlobs::Concat(uint64_t a, uint64_t b) {
  absl::StatusOr<uint64_t> id = Create(/*engine_made=*/true);
  if (!id.ok()) return id;
  Temp* t = &temps_.find(*id)->second;
  if (absl::Status s = AppendBlob(t, a); !s.ok()) return s;
  t = &temps_.find(*id)->second;  // AppendBlob may have read stored BLOBs (no rehash of temps_)
  if (absl::Status s = AppendBlob(t, b); !s.ok()) return s;
  return id;
}

absl::StatusOr<uint64_t> TxnBlobs::ConcatBytes(uint64_t a, std::string_view bytes) {
  absl::StatusOr<uint64_t> id = Create(/*engine_made=*/true);
  if (!id.ok()) return id;
  Temp* t = &temps_.find(*id)->second;
  if (absl::Status s = AppendBlob(t, a); !s.ok()) return s;
  t = &temps_.find(*id)->second;
  if (absl::Status s = AppendTemp(t, bytes.data(), bytes.size()); !s.ok()) return s;
  return id;
}

absl::StatusOr<uint64_t> TxnBlobs::Copy(uint64_t src) {
  absl::StatusOr<uint64_t> id = Create(/*engine_made=*/false);
  if (!id.ok()) return id;
  if (absl::Status s = CopyInto(src, &temps_.find(*id)->second); !s.ok()) {
    (void)Release(*id);
    return s;
  }
  return id;
}

absl::StatusOr<uint64_t> TxnBlobs::Materialize(uint64_t id, record::Relation* rel,
                                               std::vector<page::PageNo>* links) {
  if (!IsTemp(id)) return id;
  absl::StatusOr<Temp*> found = FindTemp(id);
  if (!found.ok()) return found.status();
  Temp& t = **found;
  const uint32_t ps = cache_->page_size();
  const uint64_t len = t.in_temp_space ? t.len : t.paged->length();
  BlobHeader h;
  h.length = len;
  std::unique_ptr<PagedBlob> pages;
  if (len <= ps / 4) {
    h.level = 0;
    h.inline_data.resize(len);
    if (absl::Status s = Read(id, 0, h.inline_data.data(), len); !s.ok()) return s;
  } else {
    if (t.in_temp_space) {
      pages = std::make_unique<PagedBlob>(cache_, space_, rel->id());
      std::vector<char> chunk;
      for (uint64_t done = 0; done < len;) {
        const size_t k = static_cast<size_t>(std::min<uint64_t>(kCopyChunk, len - done));
        chunk.resize(k);
        if (absl::Status s = ReadTemp(t, done, chunk.data(), k); !s.ok()) return s;
        if (absl::Status s = pages->Append(txn_, chunk.data(), k); !s.ok()) return s;
        done += k;
      }
    } else {
      pages = std::move(t.paged);  // the pages are already in the database: adopt them
    }
    h.pages = pages->pages();
    h.level = 1;
    const size_t max_list = ps / 2 / 4;  // keep the header record within half a page
    if (h.pages.size() > max_list) {
      h.level = 2;
      const uint32_t per = page::BlobListCapacity(ps);
      std::vector<page::PageNo> lists;
      for (size_t i = 0; i < h.pages.size(); i += per) {
        absl::StatusOr<cache::PageRef> lp = space_->Allocate(txn_);
        if (!lp.ok()) return lp.status();
        page::InitBlobPage(lp->data(), ps, lp->page_no(), rel->id(), /*list=*/true);
        const size_t n = std::min<size_t>(per, h.pages.size() - i);
        for (size_t j = 0; j < n; ++j) {
          if (absl::Status s = cache_->AddPrecedence(*lp, h.pages[i + j]); !s.ok()) return s;
          util::Put32(page::BlobData(lp->data()) + 4 * j, h.pages[i + j]);
        }
        page::BlobSetUsed(lp->data(), static_cast<uint32_t>(n));
        lp->Mark(txn_);
        lists.push_back(lp->page_no());
      }
      h.pages = std::move(lists);
    }
  }
  std::string body;
  EncodeBlobHeader(h, &body);
  absl::StatusOr<std::pair<page::PageNo, uint16_t>> loc = rel->StoreBlobRecord(txn_, body, h.pages);
  if (!loc.ok()) return loc.status();
  links->push_back(loc->first);
  // Ours now: nothing to free at transaction end (shared extents go with their last piece).
  t.pieces.clear();
  // A page-backed BLOB stored at level 0 is inline in its header record now: its pages (never
  // linked from anything) go back to the free list, or they would stay allocated and unreachable.
  std::unique_ptr<PagedBlob> inlined = std::move(t.paged);
  temps_.erase(id);
  if (inlined) (void)inlined->Free(txn_);  // on an error the pages only leak (Validate frees them)
  return StoredId(rel->id(), loc->first, loc->second);
}

absl::Status TxnBlobs::FreeTemp(Temp& t) {
  if (t.in_temp_space) {
    t.pieces.clear();
    t.ends.clear();
    t.len = 0;
    return absl::OkStatus();
  }
  return t.paged ? t.paged->Free(txn_) : absl::OkStatus();
}

absl::Status TxnBlobs::Release(uint64_t id) {
  absl::StatusOr<Temp*> t = FindTemp(id);
  if (!t.ok()) return t.status();
  absl::Status s = FreeTemp(**t);
  temps_.erase(id);
  return s;
}

absl::Status TxnBlobs::ReleaseAll() {
  absl::Status first;
  for (auto& [id, t] : temps_) {
    absl::Status s = FreeTemp(t);
    if (first.ok()) first = s;
  }
  temps_.clear();
  stored_.clear();
  return first;
}

}  // namespace ember::blob
