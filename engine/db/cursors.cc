// Table and index cursors (see cursors.h).
#include "engine/db/cursors.h"

#include "absl/strings/str_cat.h"
#include "engine/db/garbage_collector.h"
#include "engine/db/transaction_impl.h"
#include "engine/record/record_format.h"

namespace ember::db {

TableCursor::~TableCursor() {
  // An abandoned scan must not leak the lines it unlinked; if freeing fails they stay as
  // unreachable lines, which a later collection does not see (Validate can).
  if (!unlinked_.empty() && txn_->db()->open_for_gc()) {
    (void)table_->relation->FreeUnlinked(&unlinked_, cache::kNoOwnerMark);
  }
}

absl::Status TableCursor::Fill() {
  util::ScopedCounterSinks sinks(txn_->Sinks());
  nrows_ = 0;
  pos_ = 0;
  const size_t ncols = table_->schema.columns.size();
  const record::ReadView view = txn_->View();
  DatabaseImpl* db = txn_->db();
  const GcPolicy policy = db->options().gc_policy;
  std::vector<uint64_t> garbage;
  // Rows are decoded straight from the latched page into rows_, whose values keep their
  // storage from page to page: a scan allocates little once it is under way.
  auto decode = [&](uint64_t rec, std::string_view raw) {
    if (nrows_ == rows_.size()) rows_.emplace_back();
    auto& [id, row] = rows_[nrows_];
    id = rec;
    if (absl::Status s = record::DecodeRow(raw, ncols, &row); !s.ok()) {
      return absl::DataLossError(
          absl::StrCat("table ", table_->schema.name, " record ", rec, ": ", s.message()));
    }
    ++nrows_;
    return absl::OkStatus();
  };
  while (nrows_ == 0 && next_seq_ < table_->relation->PageSequences()) {
    garbage.clear();
    const uint32_t seq = next_seq_++;
    if (seq % internal::kReadAhead == 0) {
      table_->relation->PrefetchPages(seq, internal::kReadAhead);
    }
    if (absl::Status s = table_->relation->VisitPage(seq, view, decode, &garbage, db->GcHorizon());
        !s.ok()) {
      return s;
    }
    // Long values stored out of line are read now, with the page released.
    for (size_t i = 0; i < nrows_; ++i) {
      if (absl::Status s = txn_->UnspillRow(table_, &rows_[i].second); !s.ok()) return s;
    }
    if (!garbage.empty()) {
      // A reader that meets garbage collects it (cooperative, combined) or hands the page to
      // the background collector (background). What it read stays valid: collection removes
      // only versions nobody can see.
      if (policy == GcPolicy::kBackground && db->gc()) {
        db->gc()->Notify({{table_->id, seq}}, 0);
      } else {
        // (An index build of the table holds its rows: the garbage waits for a later reader.)
        bool busy = false;
        absl::Status s = db->CollectRecords(table_, garbage, &unlinked_, nullptr, &busy);
        if (!s.ok()) return s;
        table_->relation->TakeLater(&unlinked_);
      }
    }
    if (unlinked_.size() >= 4096 ||
        (!unlinked_.empty() && next_seq_ >= table_->relation->PageSequences())) {
      if (absl::Status s = table_->relation->FreeUnlinked(&unlinked_, cache::kNoOwnerMark);
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status TableCursor::Next() {
  // After Close nothing may read or collect through this cursor (Fill writes what it collects).
  absl::Status s = txn_->db()->CheckOpen();
  if (s.ok() && ++pos_ < nrows_) return absl::OkStatus();
  if (s.ok()) s = Fill();
  if (!s.ok()) nrows_ = 0;
  return s;
}

bool IndexCursor::InRange(std::string_view key) const {
  // Compare on the bound's length: a bound is a prefix of full column encodings.
  if (key.substr(0, lo_.size()) < lo_) return false;
  if (hi_ && key.substr(0, hi_->size()) > *hi_) return false;
  return true;
}

absl::Status IndexCursor::Start() {
  util::ScopedCounterSinks sinks(txn_->Sinks());
  tree_ = ix_->btree();
  if (tree_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("index ", ix_->schema.name, " is inactive"));
  }
  absl::StatusOr<index::BTree::Cursor> c =
      // Past every entry beginning with hi_: what follows it is a column tag or the record
      // number's byte count, all below 0xff.
      descending_ ? tree_->Seek(hi_ ? *hi_ + std::string(1, '\xff') : std::string(), true)
                  : tree_->Seek(lo_, false,
                                hi_ == lo_ ? internal::kPointSeekBatch : index::BTree::kSeekBatch);
  if (!c.ok()) return c.status();
  it_.emplace(std::move(*c));
  return Settle();
}

absl::Status IndexCursor::Next() {
  if (!valid_) return absl::OkStatus();
  if (absl::Status s = txn_->db()->CheckOpen(); !s.ok()) {
    valid_ = false;
    return s;
  }
  util::ScopedCounterSinks sinks(txn_->Sinks());
  if (absl::Status s = it_->Next(); !s.ok()) {
    valid_ = false;
    return s;
  }
  return Settle();
}

absl::Status IndexCursor::Settle() {
  valid_ = false;
  const size_t ncols = ix_->table->schema.columns.size();
  const record::ReadView view = txn_->View();
  std::string key;
  for (; it_->Valid();) {
    std::string_view entry_key;
    uint64_t rec;
    if (!internal::ParseIndexEntry(*ix_, it_->key(), &entry_key, &rec)) {
      return absl::DataLossError(
          absl::StrCat("index ", ix_->schema.name, ": an entry does not parse"));
    }
    if (!InRange(entry_key)) {
      // Past the far bound: done. Before the near bound (descending start): keep going.
      const bool past = descending_ ? entry_key.substr(0, lo_.size()) < lo_
                                    : (hi_ && entry_key.substr(0, hi_->size()) > *hi_);
      if (past) return absl::OkStatus();
      if (absl::Status s = it_->Next(); !s.ok()) return s;
      continue;
    }
    absl::StatusOr<record::VisibleVersion> v = ix_->table->relation->Read(rec, view);
    if (!v.ok() && !absl::IsNotFound(v.status())) return v.status();
    if (v.ok() && v->exists) {
      Row row;
      if (absl::Status s = record::DecodeRow(v->body, ncols, &row); !s.ok()) return s;
      internal::EncodeIndexKey(*ix_, row, &key);
      // The entry counts only if it is the key of the version we see.
      if (entry_key == key) {
        if (absl::Status s = txn_->UnspillRow(ix_->table, &row); !s.ok()) return s;
        rec_ = rec;
        row_ = std::move(row);
        valid_ = true;
        return absl::OkStatus();
      }
    }
    if (absl::Status s = it_->Next(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace ember::db
