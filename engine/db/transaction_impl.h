// TransactionImpl: the public Transaction over the record, index and transaction layers:
// visibility, update conflicts and waits, index maintenance and uniqueness, counters.
#pragma once
#include <memory>
#include <optional>

#include "ember/transaction.h"
#include "engine/blob/txn_blobs.h"
#include "engine/db/db_state.h"
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
  absl::StatusOr<std::unique_ptr<BlobReader>> OpenBlob(BlobId id) override;
  absl::StatusOr<BlobId> Concat(BlobId a, BlobId b) override;
  absl::StatusOr<BlobId> Concat(BlobId a, std::string_view bytes) override;
  absl::Status Append(BlobId* blob, std::string_view bytes) override;
  absl::Status ReleaseBlob(BlobId temp) override;
  absl::Status Commit() override;
  absl::Status Rollback() override;
  Counters counters() const override;
  Counters statement_counters() const override;

  // For cursors: the view of the current statement and the counter sinks.
  record::ReadView View() const;
  util::CounterSinks Sinks() { return {&counters_, &stmt_}; }
  DatabaseImpl* db() const { return db_; }

 private:
  // Statement scope: resets the statement counters and routes page counts to this transaction.
  class Statement {
   public:
    explicit Statement(TransactionImpl* t) : sinks_((t->stmt_ = {}, t->Sinks())) {}

   private:
    util::ScopedCounterSinks sinks_;
  };
  absl::Status CheckActive() const;
  absl::Status CheckTable(const Table& t) const;
  // What Insert and Update share: the checks, the row validated, its temporary BLOBs stored
  // and its encoding. REQUIRES: catalog_mu_ held shared (the index list must not change).
  struct PreparedRow {
    internal::TableState* table = nullptr;
    Row row;
    std::vector<page::PageNo> links;
    std::string raw;
  };
  absl::StatusOr<PreparedRow> PrepareWrite(const Table& table, const Row& row);
  // Writes `raw` (nullptr: delete) over record `rec`, waiting for / failing on conflicts.
  absl::StatusOr<record::WriteOutcome> WriteVersion(internal::TableState* t, uint64_t rec,
                                                    const std::string* raw,
                                                    std::span<const page::PageNo> links = {});
  // Adds index entries for `row` of record `rec`; checks unique indexes (other records only).
  absl::Status IndexRow(internal::TableState* t, uint64_t rec, const Row& row);
  absl::Status CheckUnique(internal::IndexState* ix, std::string_view key, uint64_t self_rec);
  absl::Status WaitOrConflict(uint64_t other, const char* what, bool* retry);
  blob::TxnBlobs* Blobs();
  // Stores the temporary BLOBs among `row`'s BLOB fields; `links` gets the pages the record
  // must follow to disk.
  absl::Status MaterializeBlobs(internal::TableState* t, Row* row,
                                std::vector<page::PageNo>* links);
  absl::Status EndBlobs();

  DatabaseImpl* db_;
  TransactionOptions opts_;
  uint64_t id_;
  uint64_t snapshot_;
  enum class State { kActive, kCommitted, kRolledBack, kFailed } state_ = State::kActive;
  bool wrote_ = false;
  util::PageCounters counters_;
  util::PageCounters stmt_;
  std::unique_ptr<blob::TxnBlobs> blobs_;
};

}  // namespace ember::db
