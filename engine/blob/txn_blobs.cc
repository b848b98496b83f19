// A transaction's temporary and stored BLOBs (see txn_blobs.h).
#include "engine/blob/txn_blobs.h"

#include <algorithm>
#include <cstring>

#include "absl/cleanup/cleanup.h"
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
    : cache_(cache),
      space_(space),
      temp_(temp),
      mode_(mode),
      txn_(txn),
      resolve_(std::move(resolve)),
      ids_(ids) {}

TxnBlobs::~TxnBlobs() { (void)ReleaseAll(); }

absl::StatusOr<uint64_t> TxnBlobs::Create(bool engine_made, bool compressed_target) {
  Temp t;
  t.in_temp_space =
      temp_ != nullptr && (mode_ == 2 || (mode_ == 1 && (engine_made || compressed_target)));
  if (!t.in_temp_space) t.paged = std::make_unique<PagedBlob>(cache_, space_, 0);
  const uint64_t n = ids_ ? ids_->fetch_add(1, std::memory_order_relaxed) : next_temp_++;
  const uint64_t id = kTempBit | (n & ~kTempBit);
  temps_.emplace(id, std::move(t));
  return id;
}

absl::StatusOr<TxnBlobs::Temp*> TxnBlobs::FindTemp(uint64_t id) {
  auto it = temps_.find(id);
  if (it == temps_.end()) {
    return absl::NotFoundError(
        absl::StrCat(IdText(id), " is not a temporary BLOB of this transaction"));
  }
  return &it->second;
}

absl::StatusOr<TxnBlobs::Stored*> TxnBlobs::FindStored(uint64_t id) {
  if (auto it = stored_.find(id); it != stored_.end()) return it->second.get();
  record::Relation* rel = resolve_(IdRelation(id));
  if (!rel) {
    return absl::NotFoundError(
        absl::StrCat(IdText(id), " does not exist: no relation ", IdRelation(id)));
  }
  absl::StatusOr<std::string> body = rel->ReadBlobRecord(IdPage(id), IdLine(id));
  if (absl::IsNotFound(body.status())) {
    return absl::NotFoundError(
        absl::StrCat(IdText(id), " does not exist: ", body.status().message()));
  }
  if (!body.ok()) return body.status();
  absl::StatusOr<BlobHeader> h = DecodeBlobHeader(*body);
  if (!h.ok()) return h.status();
  auto s = std::make_unique<Stored>();
  s->length = h->length;
  const uint64_t stored_bytes = h->stored_bytes();
  if (h->level == 0) {
    s->inline_data = std::move(h->inline_data);
  } else {
    std::vector<page::PageNo> pages, lists;
    if (absl::Status st = DataPagesOf(cache_, *h, &pages, &lists); !st.ok()) return st;
    const uint64_t cap = page::BlobPageCapacity(cache_->page_size());
    if ((stored_bytes + cap - 1) / cap != pages.size()) {
      return absl::DataLossError(absl::StrCat(IdText(id), ": page list does not match length"));
    }
    s->paged = std::make_unique<PagedBlob>(cache_, space_, IdRelation(id));
    s->paged->Adopt(std::move(pages), stored_bytes);
  }
  if (h->compressed) {
    const uint64_t table_bytes = uint64_t{FrameCount(s->length, h->frame_bytes)} * 4;
    if (h->frame_bytes < kMinFrameBytes || table_bytes > stored_bytes) {
      return absl::DataLossError(absl::StrCat(IdText(id), ": corrupt compressed BLOB header"));
    }
    std::string table(table_bytes, '\0');
    if (absl::Status st =
            ReadStoredBytes(*s, stored_bytes - table_bytes, table.data(), table.size());
        !st.ok()) {
      return st;
    }
    absl::StatusOr<FrameTable> ft =
        DecodeFrameTable(table, s->length, stored_bytes, h->frame_bytes);
    if (!ft.ok()) {
      return absl::DataLossError(absl::StrCat(IdText(id), ": ", ft.status().message()));
    }
    s->compressed = true;
    s->frames = std::move(*ft);
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
  size_t i =
      static_cast<size_t>(std::upper_bound(t.ends.begin(), t.ends.end(), offset) - t.ends.begin());
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
    return absl::OutOfRangeError(absl::StrCat(IdText(id), ": read past its length ", (*s)->length));
  }
  if ((*s)->compressed) return ReadCompressed(**s, offset, buf, n);
  return ReadStoredBytes(**s, offset, buf, n);
}

absl::Status TxnBlobs::ReadStoredBytes(const Stored& s, uint64_t offset, void* buf,
                                       size_t n) const {
  if (s.paged) return s.paged->Read(offset, buf, n);
  if (offset + n > s.inline_data.size()) {
    return absl::DataLossError("BLOB header record shorter than its BLOB");
  }
  std::memcpy(buf, s.inline_data.data() + offset, n);
  return absl::OkStatus();
}

absl::Status TxnBlobs::ReadCompressed(Stored& s, uint64_t offset, void* buf, size_t n) {
  char* out = static_cast<char*>(buf);
  const FrameTable& ft = s.frames;
  while (n > 0) {
    const size_t f = static_cast<size_t>(offset / ft.frame_bytes);
    if (s.cached_frame != static_cast<int64_t>(f)) {
      s.cached_frame = -1;  // until the frame below decodes
      stored_frame_.resize(ft.starts[f + 1] - ft.starts[f]);
      if (absl::Status st =
              ReadStoredBytes(s, ft.starts[f], stored_frame_.data(), stored_frame_.size());
          !st.ok()) {
        return st;
      }
      if (!decompressor_) decompressor_ = std::make_unique<FrameDecompressor>();
      if (absl::Status st = decompressor_->Decompress(stored_frame_, ft.raw[f],
                                                      ft.FrameSize(f, s.length), &s.frame);
          !st.ok()) {
        return st;
      }
      s.cached_frame = static_cast<int64_t>(f);
    }
    const size_t in = static_cast<size_t>(offset - uint64_t{f} * ft.frame_bytes);
    const size_t k = std::min(n, s.frame.size() - in);
    // NOLINTNEXTLINE(bugprone-not-null-terminated-result): bytes, not a C string
    std::memcpy(out, s.frame.data() + in, k);
    out += k;
    offset += k;
    n -= k;
  }
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

absl::Status TxnBlobs::Compress(const Source& src, uint64_t len, int level, uint32_t rel_id,
                                BlobHeader* h, std::unique_ptr<PagedBlob>* pages) {
  const uint32_t ps = cache_->page_size();
  if (!compressor_) compressor_ = std::make_unique<FrameCompressor>();
  std::vector<uint32_t> table;
  table.reserve(FrameCount(len, kFrameBytes));
  std::string frame(static_cast<size_t>(std::min<uint64_t>(kFrameBytes, len)), '\0');
  std::string out;  // stored bytes not yet in pages: all of them while they could go inline
  uint64_t stored = 0;
  auto flush = [&]() -> absl::Status {
    if (!*pages && out.size() <= ps / 4) return absl::OkStatus();
    if (!*pages) *pages = std::make_unique<PagedBlob>(cache_, space_, rel_id);
    absl::Status s = (*pages)->Append(txn_, out.data(), out.size());
    out.clear();
    return s;
  };
  for (uint64_t done = 0; done < len;) {
    const size_t k = static_cast<size_t>(std::min<uint64_t>(kFrameBytes, len - done));
    if (absl::Status s = src(done, frame.data(), k); !s.ok()) return s;
    const size_t before = out.size();
    absl::StatusOr<uint32_t> e = compressor_->Compress(level, {frame.data(), k}, &out);
    if (!e.ok()) return e.status();
    table.push_back(*e);
    stored += out.size() - before;
    if (absl::Status s = flush(); !s.ok()) return s;
    done += k;
  }
  FrameCompressor::AppendTable(table, &out);
  stored += uint64_t{table.size()} * 4;
  if (absl::Status s = flush(); !s.ok()) return s;
  h->compressed = true;
  h->stored_length = stored;
  h->frame_bytes = kFrameBytes;
  if (!*pages) {
    h->level = 0;
    h->inline_data = std::move(out);
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> TxnBlobs::StoreHeader(BlobHeader& h, std::unique_ptr<PagedBlob>& written,
                                               const PagedBlob* adopted, record::Relation* rel,
                                               std::vector<page::PageNo>* links) {
  const uint32_t ps = cache_->page_size();
  // Pages allocated for this BLOB are unlinked until the header record is stored: on an error
  // they go back to the free list at once (adopted ones stay with their temporary BLOB).
  std::vector<page::PageNo> lists;
  bool stored_ok = false;
  absl::Cleanup free_on_error = [&] {
    if (stored_ok) return;
    if (written) (void)written->Free(txn_);
    for (page::PageNo p : lists) (void)space_->Free(p, txn_);
  };
  const PagedBlob* data_pages = adopted ? adopted : written.get();
  if (data_pages) {
    h.pages = data_pages->pages();
    h.level = 1;
    const size_t max_list = ps / 2 / 4;  // keep the header record within half a page
    if (h.pages.size() > max_list) {
      h.level = 2;
      const uint32_t per = page::BlobListCapacity(ps);
      for (size_t i = 0; i < h.pages.size(); i += per) {
        absl::StatusOr<cache::PageRef> lp = space_->Allocate(txn_);
        if (!lp.ok()) return lp.status();
        lists.push_back(lp->page_no());
        page::InitBlobPage(lp->data(), ps, lp->page_no(), rel->id(), /*list=*/true);
        const size_t n = std::min<size_t>(per, h.pages.size() - i);
        for (size_t j = 0; j < n; ++j) {
          if (absl::Status s = cache_->AddPrecedence(*lp, h.pages[i + j]); !s.ok()) return s;
          util::Put32(page::BlobData(lp->data()) + 4 * j, h.pages[i + j]);
        }
        page::BlobSetUsed(lp->data(), static_cast<uint32_t>(n));
        lp->Mark(txn_);
      }
      h.pages = lists;
    }
  }
  std::string body;
  EncodeBlobHeader(h, &body);
  absl::StatusOr<std::pair<page::PageNo, uint16_t>> loc = rel->StoreBlobRecord(txn_, body, h.pages);
  if (!loc.ok()) return loc.status();
  stored_ok = true;
  links->push_back(loc->first);
  const uint64_t id = StoredId(rel->id(), loc->first, loc->second);
  // The id may be one this transaction read before and freed since (a savepoint rollback or a
  // failed statement undid the row that stored it): its decoded header is another BLOB's.
  stored_.erase(id);
  return id;
}

absl::StatusOr<uint64_t> TxnBlobs::StoreCompressed(std::string_view bytes, record::Relation* rel,
                                                   std::vector<page::PageNo>* links,
                                                   int zstd_level) {
  BlobHeader h;
  h.length = bytes.size();
  std::unique_ptr<PagedBlob> written;
  auto src = [bytes](uint64_t off, char* buf, size_t n) {
    std::memcpy(buf, bytes.data() + off, n);
    return absl::OkStatus();
  };
  absl::Status s = Compress(src, bytes.size(), zstd_level, rel->id(), &h, &written);
  if (!s.ok()) {
    if (written) (void)written->Free(txn_);
    return s;
  }
  return StoreHeader(h, written, nullptr, rel, links);
}

absl::StatusOr<uint64_t> TxnBlobs::Materialize(uint64_t id, record::Relation* rel,
                                               std::vector<page::PageNo>* links, int zstd_level) {
  if (!IsTemp(id)) return id;
  absl::StatusOr<Temp*> found = FindTemp(id);
  if (!found.ok()) return found.status();
  Temp& t = **found;
  const uint32_t ps = cache_->page_size();
  const uint64_t len = t.in_temp_space ? t.len : t.paged->length();
  BlobHeader h;
  h.length = len;
  std::unique_ptr<PagedBlob> written;  // pages written here (freed again on an error)
  const PagedBlob* adopted = nullptr;  // the temporary BLOB's own pages, linked as they are
  absl::Status s;
  if (zstd_level > 0 && len > 0) {
    auto src = [this, id](uint64_t off, char* buf, size_t n) { return Read(id, off, buf, n); };
    s = Compress(src, len, zstd_level, rel->id(), &h, &written);
  } else if (len <= ps / 4) {
    h.level = 0;
    h.inline_data.resize(len);
    s = Read(id, 0, h.inline_data.data(), len);
  } else if (t.in_temp_space) {
    written = std::make_unique<PagedBlob>(cache_, space_, rel->id());
    std::vector<char> chunk;
    for (uint64_t done = 0; s.ok() && done < len;) {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(kCopyChunk, len - done));
      chunk.resize(k);
      s = ReadTemp(t, done, chunk.data(), k);
      if (s.ok()) s = written->Append(txn_, chunk.data(), k);
      done += k;
    }
  } else {
    adopted = t.paged.get();  // the pages are already in the database: adopt them
  }
  if (!s.ok()) {
    if (written) (void)written->Free(txn_);
    return s;
  }
  absl::StatusOr<uint64_t> stored = StoreHeader(h, written, adopted, rel, links);
  if (!stored.ok()) return stored;
  // Ours now: nothing to free at transaction end (shared extents go with their last piece).
  t.pieces.clear();
  // Adopted pages belong to the stored BLOB now. Pages of a page-backed temporary BLOB that was
  // not adopted (stored inline, or compressed into new pages) are linked from nothing: they go
  // back to the free list, or they would stay allocated and unreachable.
  std::unique_ptr<PagedBlob> left = adopted ? nullptr : std::move(t.paged);
  temps_.erase(id);
  if (left) (void)left->Free(txn_);  // on an error the pages only leak (Validate frees them)
  return stored;
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
