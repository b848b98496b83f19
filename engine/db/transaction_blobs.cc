// The BLOB part of TransactionImpl: temporary BLOBs, Concat/Append, streaming reader and
// writer, and storing temporary BLOBs when a row takes them (see engine/blob/txn_blobs.h).
#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "engine/db/transaction_impl.h"
#include "engine/record/record_format.h"

namespace ember::db {

namespace {

class WriterImpl : public BlobWriter {
 public:
  WriterImpl(const DatabaseImpl* db, blob::TxnBlobs* blobs, uint64_t id)
      : db_(db), blobs_(blobs), id_(id) {}
  absl::Status Write(std::string_view bytes) override {
    if (absl::Status s = db_->CheckOpen(); !s.ok()) return s;
    return blobs_->Append(id_, bytes);
  }
  BlobId id() const override { return BlobId{id_}; }

 private:
  const DatabaseImpl* db_;
  blob::TxnBlobs* blobs_;
  uint64_t id_;
};

class ReaderImpl : public BlobReader {
 public:
  ReaderImpl(const DatabaseImpl* db, blob::TxnBlobs* blobs, uint64_t id, uint64_t size)
      : db_(db), blobs_(blobs), id_(id), size_(size) {}
  absl::StatusOr<size_t> Read(void* buf, size_t n) override {
    if (absl::Status s = db_->CheckOpen(); !s.ok()) return s;
    const size_t k = static_cast<size_t>(std::min<uint64_t>(n, size_ - pos_));
    if (k == 0) return size_t{0};
    if (absl::Status s = blobs_->Read(id_, pos_, buf, k); !s.ok()) return s;
    pos_ += k;
    return k;
  }
  absl::Status Seek(uint64_t pos) override {
    if (pos > size_) {
      return absl::OutOfRangeError(absl::StrCat("seek to ", pos, " past the BLOB's end ", size_));
    }
    pos_ = pos;
    return absl::OkStatus();
  }
  uint64_t size() const override { return size_; }
  uint64_t position() const override { return pos_; }

 private:
  const DatabaseImpl* db_;
  blob::TxnBlobs* blobs_;
  uint64_t id_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

// The empty BLOB (id 0) reads as no bytes.
class EmptyReader : public BlobReader {
 public:
  absl::StatusOr<size_t> Read(void*, size_t) override { return size_t{0}; }
  absl::Status Seek(uint64_t pos) override {
    return pos == 0 ? absl::OkStatus() : absl::OutOfRangeError("seek past the empty BLOB");
  }
  uint64_t size() const override { return 0; }
  uint64_t position() const override { return 0; }
};

}  // namespace

blob::TxnBlobs* TransactionImpl::Blobs() {
  if (!blobs_) blobs_ = db_->SnapshotBlobs(id_);
  return blobs_.get();
}

absl::Status TransactionImpl::EndBlobs() {
  if (!blobs_) return absl::OkStatus();
  absl::Status s = blobs_->ReleaseAll();
  blobs_.reset();
  return s;
}

absl::Status TransactionImpl::MaterializeBlobs(internal::TableState* t, uint64_t rec, Row* row,
                                               std::vector<page::PageNo>* links) {
  std::optional<absl::flat_hash_set<uint64_t>> current;  // read on first need
  for (size_t i = 0; i < row->size(); ++i) {
    auto* b = std::get_if<BlobId>(&(*row)[i]);
    if (!b || b->value == 0) continue;
    uint64_t temp = b->value;
    if (!blob::IsTemp(b->value)) {
      if (!current) {
        current.emplace();
        if (rec != 0) {
          absl::StatusOr<record::VisibleVersion> v = t->relation->Read(rec, View());
          Row cur;
          if (v.ok() && v->exists &&
              record::DecodeRow(v->body, t->schema.columns.size(), &cur).ok()) {
            for (const Value& c : cur) {
              if (const auto* cb = std::get_if<BlobId>(&c)) current->insert(cb->value);
            }
          }
        }
      }
      if (current->contains(b->value)) continue;  // kept from the version it replaces
    }
    // A BLOB of no bytes is the empty BLOB: stored as id 0, with no record or page of its own
    // (the backup format, the restore and the API's BlobId{} all know only that one).
    absl::StatusOr<uint64_t> len = Blobs()->Length(b->value);
    if (!len.ok()) return len.status();
    if (*len == 0 && !db_->TEST_store_empty_blobs) {
      if (blob::IsTemp(b->value)) {
        if (absl::Status s = Blobs()->Release(b->value); !s.ok()) return s;
      }
      b->value = 0;
      continue;
    }
    if (!blob::IsTemp(b->value)) {
      absl::StatusOr<uint64_t> copy = Blobs()->Copy(b->value);
      if (!copy.ok()) return copy.status();
      temp = *copy;
    }
    absl::StatusOr<uint64_t> stored =
        Blobs()->Materialize(temp, t->relation.get(), links, t->zstd_level(i));
    if (!stored.ok()) return stored.status();
    b->value = *stored;
    wrote_ = true;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> TransactionImpl::StoredEquals(uint64_t id, std::string_view bytes) {
  absl::StatusOr<uint64_t> len = Blobs()->Length(id);
  if (!len.ok()) return len.status();
  if (*len != bytes.size()) return false;
  // In pieces, so a value that differs early costs one piece, and memory stays small.
  constexpr size_t kPiece = size_t{64} << 10;
  std::string piece(std::min(kPiece, bytes.size()), '\0');
  for (size_t off = 0; off < bytes.size(); off += kPiece) {
    const size_t n = std::min(kPiece, bytes.size() - off);
    if (absl::Status s = Blobs()->Read(id, off, piece.data(), n); !s.ok()) return s;
    if (std::memcmp(piece.data(), bytes.data() + off, n) != 0) return false;
  }
  return true;
}

absl::Status TransactionImpl::SpillValues(internal::TableState* t, const Row& row, uint64_t rec,
                                          std::vector<uint64_t>* spilled,
                                          std::vector<page::PageNo>* links) {
  spilled->clear();
  const size_t threshold = record::SpillThreshold(db_->cache()->page_size());
  std::optional<Row> replaced;  // the version an update replaces, read on first need
  for (size_t i = 0; i < row.size(); ++i) {
    const auto* v = std::get_if<std::string>(&row[i]);
    if (!v || v->size() < threshold) continue;
    if (spilled->empty()) spilled->assign(row.size(), 0);
    if (rec != 0) {
      // An update that leaves a long value as it was keeps its BLOB (a version may keep the
      // BLOBs of the version it replaces) instead of storing the bytes again: one read, no
      // write now and nothing for the collector to free later.
      if (!replaced) {
        replaced.emplace();
        absl::StatusOr<record::VisibleVersion> cur = t->relation->Read(rec, View());
        if (cur.ok() && cur->exists) {
          (void)record::DecodeRow(cur->body, t->schema.columns.size(), &*replaced);
        }
      }
      const auto* old = i < replaced->size() ? std::get_if<BlobId>(&(*replaced)[i]) : nullptr;
      if (old && old->value != 0 && !blob::IsTemp(old->value)) {
        absl::StatusOr<bool> same = StoredEquals(old->value, *v);
        if (!same.ok()) return same.status();
        if (*same) {
          (*spilled)[i] = old->value;
          continue;
        }
      }
    }
    if (const int level = t->zstd_level(i); level > 0) {  // compressed straight from the row
      absl::StatusOr<uint64_t> stored =
          Blobs()->StoreCompressed(*v, t->relation.get(), links, level);
      if (!stored.ok()) return stored.status();
      (*spilled)[i] = *stored;
      wrote_ = true;
      continue;
    }
    // Written straight into pages of the table (a temporary BLOB in pages, adopted whole), so
    // the value is copied once, as a BlobWriter's bytes would be.
    absl::StatusOr<uint64_t> temp = Blobs()->Create(/*engine_made=*/false);
    if (!temp.ok()) return temp.status();
    absl::Status s = Blobs()->Append(*temp, *v);
    absl::StatusOr<uint64_t> stored =
        s.ok() ? Blobs()->Materialize(*temp, t->relation.get(), links) : s;
    if (!stored.ok()) {
      (void)Blobs()->Release(*temp);
      return stored.status();
    }
    (*spilled)[i] = *stored;
    wrote_ = true;
  }
  return absl::OkStatus();
}

absl::Status TransactionImpl::UnspillRow(const internal::TableState* t, Row* row) {
  const std::vector<Column>& cols = t->schema.columns;
  for (size_t i = 0; i < row->size() && i < cols.size(); ++i) {
    if (cols[i].type != ColumnType::kString && cols[i].type != ColumnType::kBytes) continue;
    const auto* b = std::get_if<BlobId>(&(*row)[i]);
    if (!b) continue;
    const uint64_t id = b->value;
    absl::StatusOr<uint64_t> len = Blobs()->Length(id);
    if (!len.ok()) return len.status();
    std::string bytes(*len, '\0');
    if (absl::Status s = Blobs()->Read(id, 0, bytes.data(), bytes.size()); !s.ok()) return s;
    (*row)[i] = std::move(bytes);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<BlobWriter>> TransactionImpl::CreateBlob() {
  return NewBlobWriter(/*compressed_target=*/false);
}

absl::StatusOr<std::unique_ptr<BlobWriter>> TransactionImpl::CreateBlob(const Table& table,
                                                                        std::string_view column) {
  if (!table) return absl::InvalidArgumentError("CreateBlob: no table given");
  for (const Column& c : table.schema().columns) {
    if (c.name != column) continue;
    if (c.type != ColumnType::kBlob) {
      return absl::InvalidArgumentError(absl::StrCat("CreateBlob: column ", std::string(column),
                                                     " of table ", table.schema().name,
                                                     " is not a BLOB column"));
    }
    return NewBlobWriter(/*compressed_target=*/c.zstd_level > 0);
  }
  return absl::NotFoundError(absl::StrCat("CreateBlob: table ", table.schema().name,
                                          " has no column ", std::string(column)));
}

absl::StatusOr<std::unique_ptr<BlobWriter>> TransactionImpl::NewBlobWriter(bool compressed_target) {
  Statement stmt(this);
  if (absl::Status s = CheckActive(); !s.ok()) return s;
  absl::StatusOr<uint64_t> id = Blobs()->Create(/*engine_made=*/false, compressed_target);
  if (!id.ok()) return id.status();
  wrote_ = true;
  return std::unique_ptr<BlobWriter>(new WriterImpl(db_, Blobs(), *id));
}

absl::StatusOr<std::unique_ptr<BlobReader>> TransactionImpl::OpenBlob(BlobId id) {
  Statement stmt(this);
  if (absl::Status s = CheckActive(); !s.ok()) return s;
  if (id.value == 0) return std::unique_ptr<BlobReader>(new EmptyReader());
  absl::StatusOr<uint64_t> len = Blobs()->Length(id.value);
  if (!len.ok()) return len.status();
  return std::unique_ptr<BlobReader>(new ReaderImpl(db_, Blobs(), id.value, *len));
}

absl::StatusOr<BlobId> TransactionImpl::Concat(BlobId a, BlobId b) {
  Statement stmt(this);
  if (absl::Status s = CheckActive(); !s.ok()) return s;
  wrote_ = true;
  absl::StatusOr<uint64_t> id;
  if (a.value == 0 && b.value == 0) id = Blobs()->Create(true);
  else if (a.value == 0) id = Blobs()->ConcatBytes(b.value, {});
  else if (b.value == 0) id = Blobs()->ConcatBytes(a.value, {});
  else id = Blobs()->Concat(a.value, b.value);
  if (!id.ok()) return id.status();
  return BlobId{*id};
}

absl::StatusOr<BlobId> TransactionImpl::Concat(BlobId a, std::string_view bytes) {
  Statement stmt(this);
  if (absl::Status s = CheckActive(); !s.ok()) return s;
  wrote_ = true;
  absl::StatusOr<uint64_t> id;
  if (a.value == 0) {
    id = Blobs()->Create(true);
    if (id.ok()) {
      if (absl::Status s = Blobs()->Append(*id, bytes); !s.ok()) return s;
    }
  } else {
    id = Blobs()->ConcatBytes(a.value, bytes);
  }
  if (!id.ok()) return id.status();
  return BlobId{*id};
}

absl::Status TransactionImpl::Append(BlobId* blob, std::string_view bytes) {
  Statement stmt(this);
  if (absl::Status s = CheckActive(); !s.ok()) return s;
  wrote_ = true;
  if (blob->value == 0) {
    absl::StatusOr<uint64_t> id = Blobs()->Create(true);
    if (!id.ok()) return id.status();
    blob->value = *id;
  } else if (!blob::IsTemp(blob->value)) {
    // A stored BLOB is never changed in place: append to a temporary copy.
    absl::StatusOr<uint64_t> id = Blobs()->ConcatBytes(blob->value, {});
    if (!id.ok()) return id.status();
    blob->value = *id;
  }
  return Blobs()->Append(blob->value, bytes);
}

absl::Status TransactionImpl::ReleaseBlob(BlobId temp) {
  Statement stmt(this);
  if (absl::Status s = CheckActive(); !s.ok()) return s;
  return Blobs()->Release(temp.value);
}

}  // namespace ember::db
