// TransactionImpl (see transaction_impl.h): rows, keys and their unique checks.
#include "engine/db/transaction_impl.h"

#include <algorithm>
#include <bit>

#include "absl/strings/str_cat.h"
#include "engine/db/cursors.h"
#include "engine/index/btree.h"
#include "engine/page/data_page.h"
#include "engine/record/record_format.h"
#include "engine/util/coding.h"
#include "engine/util/key_encoding.h"

namespace ember {
namespace db {

using internal::IndexState;
using internal::TableState;

namespace {
TableState* StateOf(const Table& t) { return TableState::From(t); }

// Whether two values encode to the same index key: doubles by their bits (-0.0 and 0.0 compare
// equal but may encode differently; NaN never compares equal).
bool SameKeyValue(const Value& a, const Value& b) {
  const double* x = std::get_if<double>(&a);
  const double* y = std::get_if<double>(&b);
  if (x && y) return std::bit_cast<uint64_t>(*x) == std::bit_cast<uint64_t>(*y);
  return a == b;
}
IndexState* StateOf(const Index& ix) { return IndexState::From(ix); }
}  // namespace

TransactionImpl::TransactionImpl(DatabaseImpl* db, const TransactionOptions& options, uint64_t id,
                                 uint64_t snapshot)
    : db_(db), opts_(options), id_(id), snapshot_(snapshot) {
  if (!opts_.no_savepoint && !db_->options().no_savepoint) {
    undo_ = db_->TakeUndoLog();
    undo_->Push(std::string());  // the transaction-level savepoint
  }
}

TransactionImpl::~TransactionImpl() {
  if (state_ != State::kActive && state_ != State::kFailed) return;
  // No caller can hear this rollback's error: it becomes a background error.
  if (absl::Status s = Rollback(); !s.ok()) {
    db_->background_errors()->Add(absl::Status(
        s.code(),
        absl::StrCat("transaction ", id_, " rolled back by its destructor: ", s.message())));
  }
}

absl::Status TransactionImpl::CheckActive() const {
  // Close() ends every transaction still active: nothing may run (or commit) afterwards.
  if (absl::Status s = db_->CheckOpen(); !s.ok()) return s;
  if (state_ == State::kActive) return absl::OkStatus();
  if (!doomed_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("transaction ", id_, " is doomed and can only be rolled back: ", doomed_));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "transaction ", id_, state_ == State::kCommitted ? " is committed" : " is not active"));
}

absl::Status TransactionImpl::CheckTable(const Table& t) const {
  if (!t) return absl::InvalidArgumentError("invalid table handle");
  if (absl::Status s = db_->CheckOpen(); !s.ok()) return s;
  if (absl::Status s = db_->CheckTableVisible(*StateOf(t), View().snapshot_cn); !s.ok()) return s;
  // Every read and write of the table needs its page lists (a damaged pointer-page chain).
  return StateOf(t)->relation->damage();
}

absl::Status TransactionImpl::NoteWriter(TableState* t) {
  if (t->drop_txn.load(std::memory_order_acquire) != 0) {
    return absl::NotFoundError(absl::StrCat("table ", t->schema.name, " was dropped"));
  }
  if (t == last_written_table_) return absl::OkStatus();
  last_written_table_ = t;
  if (std::find(written_tables_.begin(), written_tables_.end(), t) == written_tables_.end()) {
    written_tables_.push_back(t);
    t->writers.fetch_add(1, std::memory_order_relaxed);
  }
  return absl::OkStatus();
}

void TransactionImpl::ReleaseTables() {
  for (TableState* t : written_tables_) t->writers.fetch_sub(1, std::memory_order_relaxed);
  written_tables_.clear();
  last_written_table_ = nullptr;
}

record::ReadView TransactionImpl::View() const {
  const uint64_t snap =
      opts_.isolation == Isolation::kReadCommitted ? db_->txns_->CurrentCn() : snapshot_;
  return record::ReadView{id_, snap, db_->txns_.get()};
}

Counters TransactionImpl::counters() const { return ToCounters(counters_); }
Counters TransactionImpl::statement_counters() const { return ToCounters(stmt_); }

// ---------------------------------------------------------------- writes

absl::Status TransactionImpl::WaitOrConflict(uint64_t other, const char* what, bool* retry) {
  *retry = false;
  if (!opts_.wait) {
    return absl::AbortedError(
        absl::StrCat("update conflict: ", what, " is being changed by active transaction ", other));
  }
  absl::StatusOr<uint64_t> st = db_->txns_->WaitFor(id_, other, opts_.lock_timeout_ms);
  if (absl::IsDeadlineExceeded(st.status())) {
    // A conflict like any other for the caller (transaction.h): retry loops test for Aborted.
    return absl::AbortedError(absl::StrCat(
        "update conflict: lock time-out: ", what, " is being changed by transaction ", other,
        ", still active after ", opts_.lock_timeout_ms, " ms (lock_timeout_ms)"));
  }
  if (!st.ok()) return st.status();
  *retry = true;
  return absl::OkStatus();
}

void TransactionImpl::NotePage(TableState* t, uint64_t rec, bool insert) {
  const std::pair<uint32_t, uint32_t> p{t->id, page::RecordDpSequence(rec)};
  auto& last = insert ? last_insert_page_ : last_page_;
  if (p == last) return;
  last = p;
  (insert ? insert_pages_ : pages_).insert(p);
}

absl::StatusOr<record::WriteOutcome> TransactionImpl::WriteVersion(
    TableState* t, uint64_t rec, const std::string* raw, std::span<const page::PageNo> links,
    std::unique_lock<std::mutex>* lock) {
  const bool rc = opts_.isolation == Isolation::kReadCommitted;
  for (;;) {
    *lock = std::unique_lock<std::mutex>(db_->RecordMutex(t->id, rec));
    absl::StatusOr<record::WriteOutcome> w = t->relation->Write(rec, id_, View(), rc, raw, links);
    if (!w.ok()) return w.status();
    switch (w->code) {
      case record::WriteOutcome::kDone:
        wrote_ = true;
        NotePage(t, rec, /*insert=*/false);
        if (w->unlinked_fragments) {
          std::vector<record::Unlinked> u{*w->unlinked_fragments};
          // The write is done; a line not freed only stays unreachable.
          if (absl::Status s = DeferFrees(t, &u); !s.ok()) db_->background_errors()->Add(s);
        }
        return w;
      case record::WriteOutcome::kNotFound:
        return absl::NotFoundError(absl::StrCat("table ", t->schema.name, " record ", rec,
                                                " does not exist or was deleted"));
      case record::WriteOutcome::kConflict:
        return absl::AbortedError(absl::StrCat("update conflict: table ", t->schema.name,
                                               " record ", rec, " was changed by transaction ",
                                               w->other_txn, " after this one started"));
      case record::WriteOutcome::kWaitFor: {
        lock->unlock();  // never wait for another transaction holding a record lock
        bool retry;
        const std::string what = absl::StrCat("table ", t->schema.name, " record ", rec);
        if (absl::Status s = WaitOrConflict(w->other_txn, what.c_str(), &retry); !s.ok()) return s;
        // In snapshot isolation the next attempt reports the conflict if the other committed.
        continue;
      }
    }
  }
}

absl::Status TransactionImpl::CheckUnique(IndexState* ix, std::string_view key, uint64_t self_rec) {
  const size_t ncols = ix->table->schema.columns.size();
  for (;;) {
    absl::StatusOr<index::BTree::Cursor> c =
        ix->btree()->Seek(key, false, internal::kPointSeekBatch);
    if (!c.ok()) return c.status();
    uint64_t wait_for = 0;
    for (; c->Valid();) {
      std::string_view e = c->key();
      std::string_view ekey;
      uint64_t rec;
      if (!internal::ParseIndexEntry(*ix, e, &ekey, &rec)) {
        return absl::DataLossError(
            absl::StrCat("index ", ix->schema.name, ": an entry does not parse"));
      }
      if (ekey != key) break;
      if (rec != self_rec) {
        // The newest version that is not dead decides. If that is another transaction's
        // uncommitted version without the key (it deletes the record or changes its key), the
        // key is still taken until that transaction commits: wait for it if the version under
        // it has the key.
        bool dup = false;
        uint64_t uncommitted_other = 0;
        absl::Status bad;
        std::pair<page::PageNo, uint16_t> at;
        absl::Status s = ix->table->relation->ForEachVersion(
            rec,
            [&](uint64_t writer, bool deleted, std::string_view raw) {
              const uint64_t cn = db_->txns_->StateOf(writer);
              if (cn == txn::kCnDead) return true;
              Row row;
              std::string k;
              bool has_key = false;
              if (!deleted) {
                // A version that does not decode could hold the key: no answer is safe.
                bad = record::DecodeRow(raw, ncols, &row);
                if (!bad.ok()) return false;
                internal::EncodeIndexKey(*ix, row, &k);
                has_key = k == key;
              }
              if (writer == id_ || txn::IsCommittedCn(cn)) {
                if (has_key) {
                  if (uncommitted_other) wait_for = uncommitted_other;
                  else dup = true;
                }
                return false;
              }
              if (has_key) {
                wait_for = writer;
                return false;
              }
              if (uncommitted_other) return false;
              uncommitted_other = writer;
              return true;
            },
            &at);
        if (!bad.ok()) return internal::UndecodableVersion(*ix->table, rec, at, bad);
        if (!s.ok() && !absl::IsNotFound(s)) return s;
        if (dup) {
          return internal::DuplicateKeyError(*ix, key);
        }
        if (wait_for) break;
      }
      if (absl::Status s = c->Next(); !s.ok()) return s;
    }
    if (!wait_for) return absl::OkStatus();
    bool retry;
    const std::string what = absl::StrCat("a key of unique index ", ix->schema.name);
    if (absl::Status s = WaitOrConflict(wait_for, what.c_str(), &retry); !s.ok()) return s;
  }
}

absl::StatusOr<std::vector<IndexState*>> TransactionImpl::AddKeys(TableState* t, uint64_t rec,
                                                                  const Row& row,
                                                                  const std::string* old_raw,
                                                                  bool* changed) {
  *changed = false;
  std::vector<IndexState*> check;
  if (t->indexes.empty()) return check;
  Row& old_row = old_row_scratch_;
  const bool have_old = old_raw && !old_raw->empty() &&
                        record::DecodeRow(*old_raw, t->schema.columns.size(), &old_row).ok();
  std::string key;
  for (IndexState* ix : t->indexes) {
    // An update that keeps the key adds no entry: the replaced version's entry serves both.
    // (Equal values encode equally; comparing them skips the encoding on the common path.)
    if (have_old && std::all_of(ix->key_columns.begin(), ix->key_columns.end(),
                                [&](size_t c) { return SameKeyValue(row[c], old_row[c]); })) {
      continue;
    }
    const bool has_null = internal::EncodeIndexKey(*ix, row, &key);
    if (const uint32_t max = db_->max_key_size(); key.size() > max) {
      // Refused before the tree sees it, so the call's undo has nothing to take back there.
      return absl::InvalidArgumentError(
          absl::StrCat("index ", ix->schema.name, ": key of ", key.size(),
                       " bytes is longer than the maximum of ", max, " (Database::max_key_size)"));
    }
    *changed = true;
    // A unique key whose entry went in with no entry of the same key around it needs no
    // check: a writer of the same key after us will find ours.
    const bool unique = ix->schema.unique && !has_null;
    bool alone = false;
    absl::Status s = ix->btree()->Insert(internal::IndexEntry(key, rec), 0, id_, key.size(),
                                         unique ? &alone : nullptr);
    if (!s.ok() && !absl::IsAlreadyExists(s)) return s;
    if (unique && !alone) check.push_back(ix);
  }
  return check;
}

absl::Status TransactionImpl::CheckUniques(const std::vector<IndexState*>& ixs, uint64_t rec,
                                           const Row& row) {
  std::string key;
  for (IndexState* ix : ixs) {
    internal::EncodeIndexKey(*ix, row, &key);
    if (absl::Status u = CheckUnique(ix, key, rec); !u.ok()) return u;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> TransactionImpl::NoteChange(TableState* t, uint64_t rec,
                                                 const record::WriteOutcome* w) {
  ++changes_;
  if (!undo_) return false;
  const txn::RecKey k{t->id, rec};
  if (undo_->TopHas(k)) return false;
  if (w && w->old_was_own) return undo_->Record(k, txn::UndoKind::kRestoreOwn, w->old_body);
  return undo_->Record(k, txn::UndoKind::kRemoveHead);
}

absl::Status TransactionImpl::UndoCall(TableState* t, uint64_t rec, const record::WriteOutcome* w,
                                       bool noted) {
  if (noted) undo_->Forget(txn::RecKey{t->id, rec});
  --changes_;
  std::vector<record::Unlinked> unlinked;
  std::lock_guard<std::mutex> g(db_->RecordMutex(t->id, rec));
  absl::Status s = w && w->old_was_own
                       ? ApplyUndo(t, rec, txn::UndoKind::kRestoreOwn, w->old_body, &unlinked)
                       : ApplyUndo(t, rec, txn::UndoKind::kRemoveHead, std::string(), &unlinked);
  if (s.ok()) s = t->relation->FreeUnlinked(&unlinked, id_);
  return s;
}

absl::StatusOr<TransactionImpl::PreparedRow> TransactionImpl::PrepareWrite(const Table& table,
                                                                           const Row& row,
                                                                           uint64_t rec) {
  if (absl::Status s = CheckActive(); !s.ok()) return s;
  if (absl::Status s = CheckTable(table); !s.ok()) return s;
  if (opts_.read_only) return absl::FailedPreconditionError("read-only transaction");
  PreparedRow p;
  p.table = StateOf(table);
  if (absl::Status s = NoteWriter(p.table); !s.ok()) return s;
  if (absl::Status s = record::ValidateRow(p.table->schema.columns, row); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", p.table->schema.name, ": ", s.message()));
  }
  // Only BLOB ids change (temporary ones are stored): without any, the caller's row serves.
  const bool names_blob = std::any_of(row.begin(), row.end(), [](const Value& v) {
    const BlobId* b = std::get_if<BlobId>(&v);
    return b != nullptr && b->value != 0;
  });
  if (names_blob) {
    p.owned = row;
    if (absl::Status s = MaterializeBlobs(p.table, rec, &p.owned, &p.links); !s.ok()) return s;
  } else {
    p.given = &row;
  }
  // Long values go out of line; p.row() keeps them whole for the index keys.
  std::vector<uint64_t> spilled;
  if (absl::Status s = SpillValues(p.table, p.row(), rec, &spilled, &p.links); !s.ok()) return s;
  record::EncodeRow(p.row(), &p.raw, spilled.empty() ? nullptr : &spilled);
  return p;
}

absl::Status TransactionImpl::BulkInsert(const Table& table, std::span<const Row> rows) {
  Statement stmt(this);
  // The cause is returned as it is (a caller tells bad data from I/O errors); the transaction
  // is doomed all the same.
  auto fail = [this](const absl::Status& cause) {
    (void)Doom(cause);
    return cause;
  };
  util::ReaderLock g(db_->catalog_mu_);
  if (absl::Status s = CheckTable(table); !s.ok()) return s;
  TableState* t = StateOf(table);
  {
    util::ReaderLock rl(t->rows_mu);
    if (!t->indexes.empty()) {
      rl.Unlock();
      g.Unlock();
      for (const Row& row : rows) {
        if (absl::StatusOr<RecordId> r = Insert(table, row); !r.ok()) return fail(r.status());
      }
      return absl::OkStatus();
    }
  }
  // Prepared first (BLOBs stored, long values spilled), with no data page latched.
  std::vector<std::string> raws(rows.size());
  std::vector<std::vector<page::PageNo>> links(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    absl::StatusOr<PreparedRow> p = PrepareWrite(table, rows[i], 0);
    if (!p.ok()) return fail(p.status());
    raws[i] = std::move(p->raw);
    links[i] = std::move(p->links);
  }
  util::ReaderLock rl(t->rows_mu);
  if (!t->indexes.empty()) {
    return fail(absl::FailedPreconditionError("an index was created during a bulk load"));
  }
  std::vector<uint64_t> recs;
  recs.reserve(rows.size());
  absl::Status s = t->relation->InsertBatch(id_, raws, links, &recs);
  if (!recs.empty()) wrote_ = true;
  for (uint64_t rec : recs) {
    NotePage(t, rec, /*insert=*/true);
    if (absl::StatusOr<bool> noted = NoteChange(t, rec, nullptr); !noted.ok())
      return fail(noted.status());
  }
  if (!s.ok()) return fail(s);
  return absl::OkStatus();
}

absl::StatusOr<RecordId> TransactionImpl::Insert(const Table& table, const Row& row) {
  Statement stmt(this);
  util::ReaderLock g(db_->catalog_mu_);
  absl::StatusOr<PreparedRow> p = PrepareWrite(table, row, 0);
  if (!p.ok()) return p.status();
  TableState* t = p->table;
  util::ReaderLock rows(t->rows_mu);
  absl::StatusOr<uint64_t> rec = t->relation->Insert(id_, p->raw, p->links);
  if (!rec.ok()) return rec.status();
  wrote_ = true;
  NotePage(t, *rec, /*insert=*/true);
  absl::StatusOr<bool> noted = NoteChange(t, *rec, nullptr);
  absl::Status s = noted.status();
  std::vector<IndexState*> uniques;
  if (s.ok()) {
    // The record number may be one garbage collection just freed: the collector, holding the
    // record lock, may still be dropping the old record's entries, which can be ours too.
    std::lock_guard<std::mutex> lock(db_->RecordMutex(t->id, *rec));
    bool changed;
    absl::StatusOr<std::vector<IndexState*>> u = AddKeys(t, *rec, p->row(), nullptr, &changed);
    if (u.ok()) uniques = std::move(*u);
    s = u.status();
  }
  if (s.ok()) s = CheckUniques(uniques, *rec, p->row());
  if (!s.ok()) {
    if (absl::Status u = UndoCall(t, *rec, nullptr, noted.value_or(false)); !u.ok()) {
      return Doom(u);
    }
    return s;
  }
  return RecordId{*rec};
}

absl::Status TransactionImpl::Update(const Table& table, RecordId id, const Row& row) {
  Statement stmt(this);
  util::ReaderLock g(db_->catalog_mu_);
  absl::StatusOr<PreparedRow> p = PrepareWrite(table, row, id.value);
  if (!p.ok()) return p.status();
  TableState* t = p->table;
  util::ReaderLock rows(t->rows_mu);
  std::unique_lock<std::mutex> lock;
  absl::StatusOr<record::WriteOutcome> w = WriteVersion(t, id.value, &p->raw, p->links, &lock);
  if (!w.ok()) return w.status();
  absl::StatusOr<bool> noted = NoteChange(t, id.value, &*w);
  absl::Status s = noted.status();
  std::vector<IndexState*> uniques;
  bool key_changed = false;
  if (s.ok()) {
    absl::StatusOr<std::vector<IndexState*>> u =
        AddKeys(t, id.value, p->row(), &w->old_body, &key_changed);
    if (u.ok()) uniques = std::move(*u);
    s = u.status();
  }
  if (s.ok() && w->old_was_own && key_changed) {
    // Our own earlier version was overwritten: keys only it had lose their entries now, so the
    // index does not collect entries of versions that no longer exist.
    s = db_->DropKeys(t, id.value, {w->old_body}, nullptr, id_);
  }
  if (s.ok() && !w->dead_body.empty()) s = db_->DropKeys(t, id.value, {w->dead_body}, nullptr, id_);
  lock.unlock();
  if (s.ok()) s = CheckUniques(uniques, id.value, p->row());
  if (!s.ok()) {
    if (absl::Status u = UndoCall(t, id.value, &*w, noted.value_or(false)); !u.ok()) {
      return Doom(u);
    }
    return s;
  }
  if (w->old_was_own) NoteDroppedBlobs(t, id.value, w->old_body, &p->raw);
  if (!w->dead_body.empty()) NoteDroppedBlobs(t, id.value, w->dead_body, &p->raw);
  return absl::OkStatus();
}

absl::Status TransactionImpl::Delete(const Table& table, RecordId id) {
  Statement stmt(this);
  if (absl::Status s = CheckActive(); !s.ok()) return s;
  if (absl::Status s = CheckTable(table); !s.ok()) return s;
  if (opts_.read_only) return absl::FailedPreconditionError("read-only transaction");
  TableState* t = StateOf(table);
  util::ReaderLock g(db_->catalog_mu_);
  if (absl::Status s = NoteWriter(t); !s.ok()) return s;
  util::ReaderLock rows(t->rows_mu);
  std::unique_lock<std::mutex> lock;
  absl::StatusOr<record::WriteOutcome> w = WriteVersion(t, id.value, nullptr, {}, &lock);
  if (!w.ok()) return w.status();
  absl::StatusOr<bool> noted = NoteChange(t, id.value, &*w);
  absl::Status s = noted.status();
  if (s.ok() && w->old_was_own) s = db_->DropKeys(t, id.value, {w->old_body}, nullptr, id_);
  if (s.ok() && !w->dead_body.empty()) s = db_->DropKeys(t, id.value, {w->dead_body}, nullptr, id_);
  lock.unlock();
  if (!s.ok()) {
    if (absl::Status u = UndoCall(t, id.value, &*w, noted.value_or(false)); !u.ok()) {
      return Doom(u);
    }
    return s;
  }
  if (w->old_was_own) NoteDroppedBlobs(t, id.value, w->old_body, nullptr);
  if (!w->dead_body.empty()) NoteDroppedBlobs(t, id.value, w->dead_body, nullptr);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- reads

absl::StatusOr<std::optional<Row>> TransactionImpl::Get(const Table& table, RecordId id) {
  Statement stmt(this);
  if (absl::Status s = CheckActive(); !s.ok()) return s;
  if (absl::Status s = CheckTable(table); !s.ok()) return s;
  TableState* t = StateOf(table);
  absl::StatusOr<record::VisibleVersion> v = t->relation->Read(id.value, View());
  if (absl::IsNotFound(v.status())) return std::optional<Row>();
  if (!v.ok()) return v.status();
  if (!v->exists) return std::optional<Row>();
  Row row;
  if (absl::Status s = record::DecodeRow(v->body, t->schema.columns.size(), &row); !s.ok()) {
    return absl::DataLossError(
        absl::StrCat("table ", t->schema.name, " record ", id.value, ": ", s.message()));
  }
  if (absl::Status s = UnspillRow(t, &row); !s.ok()) return s;
  return std::optional<Row>(std::move(row));
}

absl::StatusOr<std::unique_ptr<Cursor>> TransactionImpl::Scan(const Table& table) {
  Statement stmt(this);
  if (absl::Status s = CheckActive(); !s.ok()) return s;
  if (absl::Status s = CheckTable(table); !s.ok()) return s;
  auto c = std::make_unique<TableCursor>(this, StateOf(table));
  if (absl::Status s = c->Start(); !s.ok()) return s;
  return std::unique_ptr<Cursor>(std::move(c));
}

absl::StatusOr<std::optional<std::pair<RecordId, Row>>> TransactionImpl::Lookup(const Index& index,
                                                                                const Row& key) {
  Statement stmt(this);
  if (absl::Status s = CheckActive(); !s.ok()) return s;
  if (!index) return absl::InvalidArgumentError("invalid index handle");
  IndexState* ix = StateOf(index);
  if (absl::Status s = db_->CheckIndexUsable(*ix); !s.ok()) return s;
  std::string prefix;
  if (absl::Status s = internal::EncodeKeyPrefix(*ix, key, &prefix); !s.ok()) return s;
  IndexCursor c(this, ix, prefix, prefix, /*descending=*/false);
  if (absl::Status s = c.Start(); !s.ok()) return s;
  if (!c.Valid()) return std::optional<std::pair<RecordId, Row>>();
  return std::optional<std::pair<RecordId, Row>>(std::make_pair(c.id(), c.TakeRow()));
}

absl::StatusOr<std::unique_ptr<Cursor>> TransactionImpl::IndexScan(const Index& index,
                                                                   const Row& lo, const Row& hi,
                                                                   bool descending) {
  Statement stmt(this);
  if (absl::Status s = CheckActive(); !s.ok()) return s;
  if (!index) return absl::InvalidArgumentError("invalid index handle");
  IndexState* ix = StateOf(index);
  if (absl::Status s = db_->CheckIndexUsable(*ix); !s.ok()) return s;
  std::string lo_key, hi_key;
  if (absl::Status s = internal::EncodeKeyPrefix(*ix, lo, &lo_key); !s.ok()) return s;
  if (absl::Status s = internal::EncodeKeyPrefix(*ix, hi, &hi_key); !s.ok()) return s;
  auto c = std::make_unique<IndexCursor>(
      this, ix, lo_key,
      hi.empty() ? std::optional<std::string>() : std::optional<std::string>(hi_key), descending);
  if (absl::Status s = c->Start(); !s.ok()) return s;
  return std::unique_ptr<Cursor>(std::move(c));
}

}  // namespace db
}  // namespace ember
