// Transactions, table and index handles, and cursors.
//
// Thread safety: a Transaction (and its cursors) is used by one thread at a time; many
// transactions run concurrently on one Database. Table and Index handles are small values,
// valid while their Database is open, usable from any thread.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ember/blob.h"
#include "ember/schema.h"
#include "ember/stats.h"

namespace ember {

namespace internal {
struct TableState;
struct IndexState;
}  // namespace internal

class Table {
 public:
  Table() = default;
  uint32_t id() const;
  const TableSchema& schema() const;
  explicit operator bool() const { return state_ != nullptr; }

 private:
  friend struct internal::TableState;
  explicit Table(internal::TableState* s) : state_(s) {}
  internal::TableState* state_ = nullptr;
};

class Index {
 public:
  Index() = default;
  const IndexSchema& schema() const;
  explicit operator bool() const { return state_ != nullptr; }

 private:
  friend struct internal::IndexState;
  explicit Index(internal::IndexState* s) : state_(s) {}
  internal::IndexState* state_ = nullptr;
};

enum class Isolation {
  kSnapshot,       // sees the database as of Begin(), plus its own changes
  kReadCommitted,  // every read sees the newest committed versions
};

struct TransactionOptions {
  Isolation isolation = Isolation::kSnapshot;
  // On an update conflict with a transaction that is still active: wait for it to end (then
  // fail if it committed, go on if it rolled back), or fail at once.
  bool wait = true;
  int64_t lock_timeout_ms = -1;  // with wait: give up after this many ms (-1 = no limit)
  bool read_only = false;
  // No undo log (Firebird's isc_dpb_no_savepoint / TRA_no_auto_undo): mass changes are cheaper,
  // but savepoints and multi-row statements cannot be undone. A single call that fails is still
  // undone (it needs no log); a RunStatement body that fails after changing something dooms
  // the transaction (every later call fails; only Rollback works), and Rollback marks the
  // transaction dead, leaving its versions to garbage collection. Also switched on for every
  // transaction by Options::no_savepoint.
  bool no_savepoint = false;
};

// A forward-only cursor. After Next() returns an error, Valid() is false.
class Cursor {
 public:
  virtual ~Cursor() = default;
  virtual bool Valid() const = 0;
  virtual absl::Status Next() = 0;
  virtual RecordId id() const = 0;
  virtual const Row& row() const = 0;
};

// Errors specific to transactions:
// - Aborted "update conflict ...": the record was changed by a concurrent transaction
//   (committed after our snapshot, or still active with wait = false); "update conflict: lock
//   time-out ..." when it was still active after lock_timeout_ms; "deadlock ..." when waiting
//   would deadlock. Every Aborted means: roll back and retry the transaction.
// - FailedPrecondition "database ... is closed": the Database was closed (Close ended this
//   transaction as rolled back); every call fails so, Rollback returns OK. A Transaction (and
//   its cursors and BLOB readers and writers) must be destroyed before its Database object.
// - AlreadyExists "unique index ...": a visible or in-flight record has the same key.
// - FailedPrecondition: the transaction is already committed or rolled back.
// - InvalidArgument "index ... key of N bytes": a key longer than Database::max_key_size(); the
//   call changed nothing and the transaction goes on.
class Transaction {
 public:
  virtual ~Transaction() = default;  // rolls back if still active
  virtual uint64_t id() const = 0;

  virtual absl::StatusOr<RecordId> Insert(const Table& t, const Row& row) = 0;
  // The row as this transaction sees it; nullopt when there is no visible version.
  virtual absl::StatusOr<std::optional<Row>> Get(const Table& t, RecordId id) = 0;
  virtual absl::Status Update(const Table& t, RecordId id, const Row& row) = 0;
  virtual absl::Status Delete(const Table& t, RecordId id) = 0;
  // All visible rows in record-number order.
  virtual absl::StatusOr<std::unique_ptr<Cursor>> Scan(const Table& t) = 0;

  // The first visible record whose key columns equal `key` (one value per key column).
  virtual absl::StatusOr<std::optional<std::pair<RecordId, Row>>> Lookup(const Index& ix,
                                                                         const Row& key) = 0;
  // Visible records with lo <= key <= hi in key order (descending if asked). `lo` / `hi` may
  // give fewer values than key columns (a prefix) or none (unbounded).
  virtual absl::StatusOr<std::unique_ptr<Cursor>> IndexScan(const Index& ix, const Row& lo,
                                                            const Row& hi,
                                                            bool descending = false) = 0;

  // --- BLOBs. BlobId{} (0) is the empty BLOB. Temporary BLOBs belong to this transaction.
  // A BLOB of no bytes is the empty BLOB: a row given one (a writer never written to, an empty
  // Concat) stores BlobId{} and reads it back so; nothing is stored for it.
  // A new temporary BLOB written segment by segment (blob_temp_space 2 keeps it in temp space,
  // 0 and 1 in database pages).
  virtual absl::StatusOr<std::unique_ptr<BlobWriter>> CreateBlob() = 0;
  // The same for a BLOB meant for `column` of `table` (it may still go anywhere). When that
  // column is compressed (Column::zstd_level), blob_temp_space 1 keeps the BLOB in temp space
  // rather than database pages, so only its compressed form is written to the database.
  // NotFound / InvalidArgument when the table has no such BLOB column.
  virtual absl::StatusOr<std::unique_ptr<BlobWriter>> CreateBlob(const Table& table,
                                                                 std::string_view column) = 0;
  virtual absl::StatusOr<std::unique_ptr<BlobReader>> OpenBlob(BlobId id) = 0;
  // A new temporary BLOB: a's bytes then b's (Firebird's `||`: both are copied).
  virtual absl::StatusOr<BlobId> Concat(BlobId a, BlobId b) = 0;
  virtual absl::StatusOr<BlobId> Concat(BlobId a, std::string_view bytes) = 0;
  // Extends a temporary BLOB of this transaction in place (Firebird 5's BLOB_APPEND): building
  // a BLOB from n pieces costs O(total bytes). Appending to BlobId{} makes a new BLOB and
  // stores its id in `*blob`.
  virtual absl::Status Append(BlobId* blob, std::string_view bytes) = 0;
  // Drops a temporary BLOB before the transaction ends.
  virtual absl::Status ReleaseBlob(BlobId temp) = 0;

  // --- Statements and savepoints (architecture.md "Savepoints"). Every call above runs as a
  // statement: if it fails, its changes are undone and earlier ones stay.
  // Runs `body` as one statement: its calls are atomic as a unit. If `body` returns an error
  // (or a call inside fails and body passes the error on), every change made inside it is
  // undone, and the error is returned. Statements nest (inside user savepoints too).
  virtual absl::Status RunStatement(const std::function<absl::Status()>& body) = 0;
  // Named savepoints, nested to any depth. Creating one with the name of an existing one
  // makes the older one unnamed: it can no longer be released or rolled back to by name, its
  // changes stay with whatever encloses it, and the savepoints made after it are untouched.
  // Release merges a savepoint and every savepoint after it into the enclosing one; rollback
  // undoes every change since it was created and keeps it (empty), and discards every
  // savepoint made after it (their names are unknown afterwards, as in SQL). NotFound for an
  // unknown name; FailedPrecondition with no_savepoint.
  virtual absl::Status Savepoint(std::string_view name) = 0;
  virtual absl::Status ReleaseSavepoint(std::string_view name) = 0;
  virtual absl::Status RollbackToSavepoint(std::string_view name) = 0;
  // Size of the undo log now and at its peak.
  virtual UndoLogStats undo_stats() const = 0;

  // Makes every change durable (forced writes) and visible to later snapshots. OK means the
  // transaction is committed. Its cleanup (ending its temporary BLOBs, freeing the stored BLOBs
  // its changes dropped) runs just before the commit point; if that fails, the commit still
  // goes ahead (a BLOB left unfreed only wastes pages, which Validate(free_unreachable) or the
  // reclamation after a crash frees) and the cleanup's error is reported as a background
  // error (DatabaseStats::background_errors, the next CollectGarbage or Close): Commit returns
  // OK for a committed transaction, and an error only when it is not committed.
  virtual absl::Status Commit() = 0;
  // Undoes every change through the undo log, leaving no versions behind (the transaction then
  // counts as committed with nothing in it, so it holds back no one); without an undo log
  // (no_savepoint) or if the undo fails, marks the transaction dead instead. The transaction
  // has ended either way. When the undo failed (an I/O error, a damaged page), Rollback returns
  // that error, saying the transaction was marked dead: none of its changes are visible.
  // When the rollback itself worked but its cleanup (ending temporary BLOBs, freeing stored
  // BLOBs) failed, Rollback returns that error, saying the rollback is done. A rollback run by
  // the destructor reports its error as a background error (DatabaseStats::background_errors).
  virtual absl::Status Rollback() = 0;
  // Page counters of the whole transaction so far, and of its last call (a "statement";
  // a cursor's page work counts to the call that made it and to the transaction).
  virtual Counters counters() const = 0;
  virtual Counters statement_counters() const = 0;
};

}  // namespace ember
