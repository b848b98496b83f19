// TransactionImpl: the public Transaction over the record, index and transaction layers:
// visibility, update conflicts and waits, index maintenance and uniqueness, counters.
#pragma once
#include <memory>
#include <optional>
#include <span>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "ember/transaction.h"
#include "engine/blob/txn_blobs.h"
#include "engine/db/database_impl.h"
#include "engine/txn/undo_log.h"
#include "engine/util/counters.h"

namespace ember::db {

class TransactionImpl : public Transaction {
 public:
  TransactionImpl(DatabaseImpl* db, const TransactionOptions& options, uint64_t id,
                  uint64_t snapshot);
  ~TransactionImpl() override;

  uint64_t id() const override { return id_; }
  absl::StatusOr<RecordId> Insert(const Table& t, const Row& row) override;
  absl::StatusOr<std::optional<Row>> Get(const Table& t, RecordId id) override;
  absl::Status Update(const Table& t, RecordId id, const Row& row) override;
  absl::Status Delete(const Table& t, RecordId id) override;
  absl::StatusOr<std::unique_ptr<Cursor>> Scan(const Table& t) override;
  absl::StatusOr<std::optional<std::pair<RecordId, Row>>> Lookup(const Index& ix,
                                                                 const Row& key) override;
  absl::StatusOr<std::unique_ptr<Cursor>> IndexScan(const Index& ix, const Row& lo, const Row& hi,
                                                    bool descending) override;
  absl::StatusOr<std::unique_ptr<BlobWriter>> CreateBlob() override;
  absl::StatusOr<std::unique_ptr<BlobWriter>> CreateBlob(const Table& table,
                                                         std::string_view column) override;
  absl::StatusOr<std::unique_ptr<BlobReader>> OpenBlob(BlobId id) override;
  absl::StatusOr<BlobId> Concat(BlobId a, BlobId b) override;
  absl::StatusOr<BlobId> Concat(BlobId a, std::string_view bytes) override;
  absl::Status Append(BlobId* blob, std::string_view bytes) override;
  absl::Status ReleaseBlob(BlobId temp) override;
  absl::Status RunStatement(const std::function<absl::Status()>& body) override;
  absl::Status Savepoint(std::string_view name) override;
  absl::Status ReleaseSavepoint(std::string_view name) override;
  absl::Status RollbackToSavepoint(std::string_view name) override;
  UndoLogStats undo_stats() const override;
  absl::Status Commit() override;
  absl::Status Rollback() override;
  Counters counters() const override;
  Counters statement_counters() const override;

  // Restore's bulk load: inserts `rows` into `table` as Insert would, filling each data page
  // under one latch and taking the table's locks once. Only for a table without indexes (a
  // table with some goes row by row through Insert). An error (returned as it is) dooms the
  // transaction, rows before it may be stored: meant for a load thrown away when it fails.
  absl::Status BulkInsert(const Table& table, std::span<const Row> rows);
  // For cursors: the view of the current statement and the counter sinks.
  record::ReadView View() const;
  // Reads back the string/bytes values of `row` (decoded from table `t`) that were stored out of
  // line (record::SpillThreshold), so callers see the bytes they stored.
  absl::Status UnspillRow(const internal::TableState* t, Row* row);
  util::CounterSinks Sinks() { return {&counters_, &stmt_}; }
  DatabaseImpl* db() const { return db_; }

 private:
  // Statement scope: resets the statement counters and routes page counts to this transaction.
  // Nested scopes (the calls inside RunStatement) keep counting into the outer statement.
  class Statement {
   public:
    explicit Statement(TransactionImpl* t)
        : t_(t), sinks_((t->stmt_depth_++ == 0 ? (void)(t->stmt_ = {}) : (void)0, t->Sinks())) {}
    ~Statement() { --t_->stmt_depth_; }

   private:
    TransactionImpl* t_;
    util::ScopedCounterSinks sinks_;
  };
  absl::Status CheckActive() const;
  // A valid handle of a table this transaction sees, on an open database, whose pages are
  // known: a damaged pointer-page chain is its DataLoss (Relation::damage).
  absl::Status CheckTable(const Table& t) const;
  // What Insert and Update share: the checks, the row validated, its temporary BLOBs stored
  // and its encoding. catalog_mu_ is held shared: the index list must not change.
  struct PreparedRow {
    internal::TableState* table = nullptr;
    const Row* given = nullptr;  // the caller's row, when it names no BLOB (nothing to change)
    Row owned;                   // else a copy with its temporary BLOBs stored
    const Row& row() const { return given ? *given : owned; }
    std::vector<page::PageNo> links;
    std::string raw;
  };
  // `rec`: the record an update replaces (0 for an insert).
  absl::StatusOr<PreparedRow> PrepareWrite(const Table& table, const Row& row, uint64_t rec)
      ABSL_SHARED_LOCKS_REQUIRED(db_->catalog_mu_);
  // Writes `raw` (nullptr: delete) over record `rec`, waiting for / failing on conflicts. On
  // success `*lock` holds the record's lock (garbage collection must not run between the write
  // and the index entries for it).
  absl::StatusOr<record::WriteOutcome> WriteVersion(internal::TableState* t, uint64_t rec,
                                                    const std::string* raw,
                                                    std::span<const page::PageNo> links,
                                                    std::unique_lock<std::mutex>* lock);
  // Adds index entries for `row` of record `rec`, skipping indexes whose key equals the one in
  // `old_raw` (the version replaced, whose entry exists). Returns the unique indexes to check;
  // `*changed` tells whether some key differs from old_raw's.
  absl::StatusOr<std::vector<internal::IndexState*>> AddKeys(internal::TableState* t, uint64_t rec,
                                                             const Row& row,
                                                             const std::string* old_raw,
                                                             bool* changed)
      ABSL_SHARED_LOCKS_REQUIRED(t->rows_mu);
  // Checks the unique indexes for `row`'s keys (may wait for other transactions).
  absl::Status CheckUniques(const std::vector<internal::IndexState*>& ixs, uint64_t rec,
                            const Row& row);
  // Records in the undo log what undoes the change just made to `rec` (an insert when `w` is
  // null). Returns whether an entry was added (so a failing call can forget it).
  absl::StatusOr<bool> NoteChange(internal::TableState* t, uint64_t rec,
                                  const record::WriteOutcome* w);
  // Undoes the change a failed call made to `rec` right away (it needs no log).
  absl::Status UndoCall(internal::TableState* t, uint64_t rec, const record::WriteOutcome* w,
                        bool noted) ABSL_SHARED_LOCKS_REQUIRED(t->rows_mu);
  // Applies one undo action to a record and drops the index entries it leaves unused.
  absl::Status ApplyUndo(internal::TableState* t, uint64_t rec, txn::UndoKind kind,
                         const std::string& before, std::vector<record::Unlinked>* unlinked)
      ABSL_SHARED_LOCKS_REQUIRED(t->rows_mu);
  // Rolls back the top savepoint of the undo log (popping it).
  absl::Status RollbackTop();
  // Lines our changes made unreachable (fragments of our versions overwritten in place, back
  // versions an undo unlinked) are freed only once the page that pointed at them is on disk.
  // Freeing them at once would force that page out before the commit, on every such change;
  // so they wait until the transaction ends, when its pages are written anyway, or until
  // kMaxDeferredFrees of them wait (then all go in one batch, the pages they need written
  // first: cycle_writes), except while the whole transaction is being rolled back, which
  // writes its pages at its end anyway. BLOB entries are freed at once (FreeUnlinked).
  static constexpr size_t kMaxDeferredFrees = 4096;
  absl::Status DeferFrees(internal::TableState* t, std::vector<record::Unlinked>* unlinked);
  // Frees the deferred lines, marking the pages they were on for `mark_txn`.
  absl::Status FreeDeferred(uint64_t mark_txn);
  // Leaves the deferred lines to the next collection of their tables (Relation::FreeLater).
  void FreeDeferredLater();
  // Marks the transaction doomed after a failure it cannot undo.
  absl::Status Doom(const absl::Status& cause);
  void NotePage(internal::TableState* t, uint64_t rec, bool insert);
  // Before a change of table `t`'s rows: NotFound once a drop of it began; else counts this
  // transaction among the table's writers (a drop waits for none) until ReleaseTables, at its
  // end.
  absl::Status NoteWriter(internal::TableState* t) ABSL_SHARED_LOCKS_REQUIRED(db_->catalog_mu_);
  void ReleaseTables();
  // Gives the pages where this transaction left garbage to the background collector (if there
  // is one), collectable once the horizon reaches `cn`: those it updated or deleted on, and with
  // `dead` those it inserted on too (a committed insert leaves no garbage).
  void HandPagesToCollector(uint64_t cn, bool dead);
  absl::Status CheckUnique(internal::IndexState* ix, std::string_view key, uint64_t self_rec);
  absl::Status WaitOrConflict(uint64_t other, const char* what, bool* retry);
  blob::TxnBlobs* Blobs();
  // After undoing a version of `rec` (ApplyUndo): queues the stored BLOBs only `removed` named.
  absl::Status QueueUndoneBlobs(internal::TableState* t, uint64_t rec, const std::string& removed,
                                std::vector<record::Unlinked>* unlinked);
  // A version of ours was replaced in place (`gone`: our own earlier version, or a rolled-back
  // one written over) by `replacing` (null: a delete). The stored BLOBs only `gone` named are
  // remembered: garbage collection sees only versions still in a chain, so nothing else would
  // free them, and an undo image may still bring them back until the transaction ends.
  void NoteDroppedBlobs(internal::TableState* t, uint64_t rec, const std::string& gone,
                        const std::string* replacing);
  // At transaction end, while its versions still hold their records (so neither a writer nor
  // the collector can change those chains): frees the remembered BLOBs that no version of
  // their record names now and no undo has freed already. Best effort: one it cannot free
  // stays an orphan for Validate.
  absl::Status FreeDroppedBlobs();
  absl::StatusOr<std::unique_ptr<BlobWriter>> NewBlobWriter(bool compressed_target);
  // Stores the temporary BLOBs among `row`'s BLOB fields; `links` gets the pages the record
  // must follow to disk. A stored BLOB belongs to one record, so a stored id the record's
  // current version (`rec`, 0 for a new record) does not name is stored again as a copy:
  // garbage collection can then free a BLOB with the last version naming it.
  absl::Status MaterializeBlobs(internal::TableState* t, uint64_t rec, Row* row,
                                std::vector<page::PageNo>* links);
  // Stores each string/bytes value of `row` at least record::SpillThreshold long as a BLOB of
  // table `t` (ids in `spilled`, one entry per value, 0 = inline); `links` as above.
  // `rec`: the record an update replaces (0 for an insert); a value equal to the one that
  // version stores keeps its BLOB.
  absl::Status SpillValues(internal::TableState* t, const Row& row, uint64_t rec,
                           std::vector<uint64_t>* spilled, std::vector<page::PageNo>* links);
  // Whether stored BLOB `id` holds exactly `bytes`.
  absl::StatusOr<bool> StoredEquals(uint64_t id, std::string_view bytes);
  absl::Status EndBlobs();

  DatabaseImpl* db_;
  TransactionOptions opts_;
  uint64_t id_;
  uint64_t snapshot_;
  enum class State { kActive, kCommitted, kRolledBack, kFailed } state_ = State::kActive;
  bool wrote_ = false;
  bool ending_ = false;  // Rollback is undoing everything (see kMaxDeferredFrees)
  int stmt_depth_ = 0;
  uint64_t changes_ = 0;  // successful record changes (to tell if a statement did any)
  std::unique_ptr<txn::UndoLog> undo_;  // null with no_savepoint
  std::string doomed_;                  // why the transaction can only be rolled back
  // Data pages this transaction updated or deleted on, and inserted on (table, page
  // sequence): see HandPagesToCollector.
  absl::flat_hash_set<std::pair<uint32_t, uint32_t>> pages_;
  absl::flat_hash_set<std::pair<uint32_t, uint32_t>> insert_pages_;
  // See DeferFrees: by table, in the order they were made unreachable.
  std::vector<std::pair<internal::TableState*, record::Unlinked>> deferred_frees_;
  std::vector<internal::TableState*> written_tables_;  // see NoteWriter
  internal::TableState* last_written_table_ = nullptr;
  std::pair<uint32_t, uint32_t> last_page_{~0u, ~0u};
  std::pair<uint32_t, uint32_t> last_insert_page_{~0u, ~0u};
  util::PageCounters counters_;
  util::PageCounters stmt_;
  std::unique_ptr<blob::TxnBlobs> blobs_;
  struct DroppedBlob {
    uint32_t table;
    uint64_t rec;
    uint64_t blob;
    auto operator<=>(const DroppedBlob&) const = default;
  };
  std::vector<DroppedBlob> dropped_blobs_;      // see NoteDroppedBlobs
  absl::flat_hash_set<uint64_t> undone_blobs_;  // queued for freeing by an undo (while any
                                                // dropped BLOB is remembered)
  // AddKeys decodes the replaced version into this on every update: kept so a mass update does
  // not allocate a row per record.
  Row old_row_scratch_;
};

}  // namespace ember::db
