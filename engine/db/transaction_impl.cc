// TransactionImpl (see transaction_impl.h) and the index key helpers of db_state.h.
#include "engine/db/transaction_impl.h"

#include "absl/strings/str_cat.h"
#include "engine/db/cursors.h"
#include "engine/record/record_format.h"
#include "engine/util/key_encoding.h"

namespace ember {
namespace internal {

namespace {
void AppendKeyValue(const Value& v, std::string* key) {
  if (IsNull(v)) util::AppendKeyNull(key);
  else if (auto* i = std::get_if<int64_t>(&v)) util::AppendKeyInt64(key, *i);
  else if (auto* d = std::get_if<double>(&v)) util::AppendKeyDouble(key, *d);
  else if (auto* s = std::get_if<std::string>(&v)) util::AppendKeyString(key, *s);
  else if (auto* b = std::get_if<BlobId>(&v)) util::AppendKeyInt64(key, static_cast<int64_t>(b->value));
}
}  // namespace

bool EncodeIndexKey(const IndexState& ix, const Row& row, std::string* key) {
  key->clear();
  bool has_null = false;
  for (size_t c : ix.key_columns) {
    has_null |= IsNull(row[c]);
    AppendKeyValue(row[c], key);
  }
  return has_null;
}

absl::Status EncodeKeyPrefix(const IndexState& ix, const Row& values, std::string* key) {
  key->clear();
  if (values.size() > ix.key_columns.size()) {
    return absl::InvalidArgumentError(absl::StrCat("index ", ix.schema.name, " has ",
                                                   ix.key_columns.size(), " key columns, ",
                                                   values.size(), " values given"));
  }
  const auto& cols = ix.table->schema.columns;
  for (size_t i = 0; i < values.size(); ++i) {
    const Column& col = cols[ix.key_columns[i]];
    const Value& v = values[i];
    bool ok = IsNull(v);
    switch (col.type) {
      case ColumnType::kInt64: ok |= std::holds_alternative<int64_t>(v); break;
      case ColumnType::kDouble: ok |= std::holds_alternative<double>(v); break;
      case ColumnType::kString:
      case ColumnType::kBytes: ok |= std::holds_alternative<std::string>(v); break;
      case ColumnType::kBlob: ok |= std::holds_alternative<BlobId>(v); break;
    }
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("index ", ix.schema.name, ": value ", i,
                                                     " does not match column ", col.name));
    }
    AppendKeyValue(v, key);
  }
  return absl::OkStatus();
}

std::string IndexEntry(std::string_view key, uint64_t rec) {
  std::string e(key);
  for (int i = 7; i >= 0; --i) e.push_back(static_cast<char>((rec >> (8 * i)) & 0xFF));
  return e;
}

uint64_t EntryRecord(std::string_view entry) {
  uint64_t r = 0;
  if (entry.size() < 8) return 0;
  for (size_t i = entry.size() - 8; i < entry.size(); ++i) r = (r << 8) | static_cast<uint8_t>(entry[i]);
  return r;
}

}  // namespace internal

namespace db {

using internal::IndexState;
using internal::TableState;

namespace {
TableState* StateOf(const Table& t) { return TableState::From(t); }
IndexState* StateOf(const Index& ix) { return IndexState::From(ix); }

Counters ToCounters(const util::PageCounters& c) { return {c.fetches, c.marks, c.reads, c.writes}; }
}  // namespace


TransactionImpl::TransactionImpl(DatabaseImpl* db, const TransactionOptions& options, uint64_t id,
                                 uint64_t snapshot)
    : db_(db), opts_(options), id_(id), snapshot_(snapshot) {}

TransactionImpl::~TransactionImpl() {
  if (state_ == State::kActive || state_ == State::kFailed) (void)Rollback();
}

absl::Status TransactionImpl::CheckActive() const {
  // Close() ends every transaction still active: nothing may run (or commit) afterwards.
  if (!db_->open_.load()) return absl::FailedPreconditionError("database is closed");
  if (state_ == State::kActive) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "transaction ", id_, state_ == State::kCommitted ? " is committed" : " is not active"));
}

absl::Status TransactionImpl::CheckTable(const Table& t) const {
  if (!t) return absl::InvalidArgumentError("invalid table handle");
  return db_->CheckOpen();
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
    return absl::AbortedError(absl::StrCat("update conflict: ", what,
                                           " is being changed by active transaction ", other));
  }
  absl::StatusOr<uint64_t> st = db_->txns_->WaitFor(id_, other, opts_.lock_timeout_ms);
  if (!st.ok()) return st.status();
  *retry = true;
  return absl::OkStatus();
}

absl::StatusOr<record::WriteOutcome> TransactionImpl::WriteVersion(
    TableState* t, uint64_t rec, const std::string* raw, std::span<const page::PageNo> links) {
  const bool rc = opts_.isolation == Isolation::kReadCommitted;
  for (;;) {
    absl::StatusOr<record::WriteOutcome> w = t->relation->Write(rec, id_, View(), rc, raw, links);
    if (!w.ok()) return w.status();
    switch (w->code) {
      case record::WriteOutcome::kDone:
        wrote_ = true;
        return w;
      case record::WriteOutcome::kNotFound:
        return absl::NotFoundError(absl::StrCat("table ", t->schema.name, " record ", rec,
                                                " does not exist or was deleted"));
      case record::WriteOutcome::kConflict:
        return absl::AbortedError(absl::StrCat("update conflict: table ", t->schema.name,
                                               " record ", rec, " was changed by transaction ",
                                               w->other_txn, " after this one started"));
      case record::WriteOutcome::kWaitFor: {
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
    absl::StatusOr<index::BTree::Cursor> c = ix->tree->Seek(key);
    if (!c.ok()) return c.status();
    uint64_t wait_for = 0;
    for (; c->Valid(); ) {
      std::string_view e = c->key();
      if (e.size() != key.size() + 8 || e.substr(0, key.size()) != key) break;
      const uint64_t rec = internal::EntryRecord(e);
      if (rec != self_rec) {
        // The newest version that is not dead decides. If that is another transaction's
        // uncommitted version without the key (it deletes the record or changes its key), the
        // key is still taken until that transaction commits: wait for it if the version under
        // it has the key.
        bool dup = false;
        uint64_t uncommitted_other = 0;
        absl::Status s = ix->table->relation->ForEachVersion(
            rec, [&](uint64_t writer, bool deleted, std::string_view raw) {
              const uint64_t cn = db_->txns_->StateOf(writer);
              if (cn == txn::kCnDead) return true;
              Row row;
              std::string k;
              bool has_key = false;
              if (!deleted && record::DecodeRow(raw, ncols, &row).ok()) {
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
            });
        if (!s.ok() && !absl::IsNotFound(s)) return s;
        if (dup) {
          return absl::AlreadyExistsError(absl::StrCat("unique index ", ix->schema.name,
                                                       ": duplicate key in table ",
                                                       ix->table->schema.name));
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

absl::Status TransactionImpl::IndexRow(TableState* t, uint64_t rec, const Row& row) {
  std::string key;
  for (IndexState* ix : t->indexes) {
    const bool has_null = internal::EncodeIndexKey(*ix, row, &key);
    absl::Status s = ix->tree->Insert(internal::IndexEntry(key, rec), rec, id_);
    if (!s.ok() && !absl::IsAlreadyExists(s)) return s;
    if (ix->schema.unique && !has_null) {
      if (absl::Status u = CheckUnique(ix, key, rec); !u.ok()) return u;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TransactionImpl::PreparedRow> TransactionImpl::PrepareWrite(const Table& table,
                                                                         const Row& row) {
  if (absl::Status s = CheckActive(); !s.ok()) return s;
  if (absl::Status s = CheckTable(table); !s.ok()) return s;
  if (opts_.read_only) return absl::FailedPreconditionError("read-only transaction");
  PreparedRow p;
  p.table = StateOf(table);
  if (absl::Status s = record::ValidateRow(p.table->schema.columns, row); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", p.table->schema.name, ": ", s.message()));
  }
  p.row = row;
  if (absl::Status s = MaterializeBlobs(p.table, &p.row, &p.links); !s.ok()) return s;
  record::EncodeRow(p.row, &p.raw);
  return p;
}

absl::StatusOr<RecordId> TransactionImpl::Insert(const Table& table, const Row& row) {
  Statement stmt(this);
  std::shared_lock<std::shared_mutex> g(db_->catalog_mu_);
  absl::StatusOr<PreparedRow> p = PrepareWrite(table, row);
  if (!p.ok()) return p.status();
  TableState* t = p->table;
  absl::StatusOr<uint64_t> rec = t->relation->Insert(id_, p->raw, p->links);
  if (!rec.ok()) return rec.status();
  wrote_ = true;
  if (absl::Status s = IndexRow(t, *rec, p->row); !s.ok()) {
    // Undo the statement: our own new record becomes a delete stub nobody sees.
    (void)t->relation->Write(*rec, id_, View(), true, nullptr);
    return s;
  }
  return RecordId{*rec};
}

absl::Status TransactionImpl::Update(const Table& table, RecordId id, const Row& row) {
  Statement stmt(this);
  std::shared_lock<std::shared_mutex> g(db_->catalog_mu_);
  absl::StatusOr<PreparedRow> p = PrepareWrite(table, row);
  if (!p.ok()) return p.status();
  TableState* t = p->table;
  absl::StatusOr<record::WriteOutcome> w = WriteVersion(t, id.value, &p->raw, p->links);
  if (!w.ok()) return w.status();
  if (absl::Status s = IndexRow(t, id.value, p->row); !s.ok()) {
    // Undo the statement by putting the previous values back (as our own version).
    (void)t->relation->Write(id.value, id_, View(), true, &w->old_body);
    return s;
  }
  return absl::OkStatus();
}

absl::Status TransactionImpl::Delete(const Table& table, RecordId id) {
  Statement stmt(this);
  if (absl::Status s = CheckActive(); !s.ok()) return s;
  if (absl::Status s = CheckTable(table); !s.ok()) return s;
  if (opts_.read_only) return absl::FailedPreconditionError("read-only transaction");
  TableState* t = StateOf(table);
  std::shared_lock<std::shared_mutex> g(db_->catalog_mu_);
  return WriteVersion(t, id.value, nullptr).status();
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
    return absl::DataLossError(absl::StrCat("table ", t->schema.name, " record ", id.value, ": ",
                                            s.message()));
  }
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
  std::string prefix;
  if (absl::Status s = internal::EncodeKeyPrefix(*ix, key, &prefix); !s.ok()) return s;
  IndexCursor c(this, ix, prefix, prefix, /*descending=*/false);
  if (absl::Status s = c.Start(); !s.ok()) return s;
  if (!c.Valid()) return std::optional<std::pair<RecordId, Row>>();
  return std::optional<std::pair<RecordId, Row>>(std::make_pair(c.id(), c.row()));
}

absl::StatusOr<std::unique_ptr<Cursor>> TransactionImpl::IndexScan(const Index& index,
                                                                   const Row& lo, const Row& hi,
                                                                   bool descending) {
  Statement stmt(this);
  if (absl::Status s = CheckActive(); !s.ok()) return s;
  if (!index) return absl::InvalidArgumentError("invalid index handle");
  IndexState* ix = StateOf(index);
  std::string lo_key, hi_key;
  if (absl::Status s = internal::EncodeKeyPrefix(*ix, lo, &lo_key); !s.ok()) return s;
  if (absl::Status s = internal::EncodeKeyPrefix(*ix, hi, &hi_key); !s.ok()) return s;
  auto c = std::make_unique<IndexCursor>(this, ix, lo_key, hi.empty() ? std::optional<std::string>()
                                                                      : std::optional<std::string>(hi_key),
                                         descending);
  if (absl::Status s = c->Start(); !s.ok()) return s;
  return std::unique_ptr<Cursor>(std::move(c));
}

// ---------------------------------------------------------------- end

absl::Status TransactionImpl::Commit() {
  Statement stmt(this);
  if (absl::Status s = CheckActive(); !s.ok()) return s;
  if (absl::Status b = EndBlobs(); !b.ok()) return b;
  absl::Status s = wrote_ ? db_->txns_->Commit(id_) : db_->txns_->CommitNoWrites(id_);
  state_ = s.ok() ? State::kCommitted : State::kFailed;
  return s;
}

absl::Status TransactionImpl::Rollback() {
  Statement stmt(this);
  if (state_ != State::kActive && state_ != State::kFailed) {
    return absl::FailedPreconditionError(absl::StrCat("transaction ", id_, " is not active"));
  }
  state_ = State::kRolledBack;
  if (!db_->open_.load()) return absl::OkStatus();  // dead after the next open anyway
  (void)EndBlobs();
  return db_->txns_->MarkDead(id_);
}

}  // namespace db
}  // namespace ember
