// Cursors of the public API: a table scan in record-number order and an index range scan in key
// order, both returning only the versions the transaction sees. Neither holds a page latch
// between calls: a table cursor buffers one data page's visible rows, an index cursor re-reads
// the record behind each entry.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ember/transaction.h"
#include "engine/db/database_impl.h"
#include "engine/index/btree.h"

namespace ember::db {

class TransactionImpl;

class TableCursor : public Cursor {
 public:
  TableCursor(TransactionImpl* txn, internal::TableState* table) : txn_(txn), table_(table) {}
  ~TableCursor() override;  // frees what its garbage collection unlinked (errors dropped)
  absl::Status Start() { return Fill(); }
  bool Valid() const override { return pos_ < nrows_; }
  absl::Status Next() override;
  RecordId id() const override { return RecordId{rows_[pos_].first}; }
  const Row& row() const override { return rows_[pos_].second; }

 private:
  absl::Status Fill();  // loads pages until a visible row is found or the table ends

  TransactionImpl* txn_;
  internal::TableState* table_;
  uint32_t next_seq_ = 0;
  // The rows of the current page: the first nrows_ are valid. The vector is not shrunk between
  // pages, so each Row keeps its storage and decoding the next page allocates nothing.
  std::vector<std::pair<uint64_t, Row>> rows_;
  size_t nrows_ = 0;
  size_t pos_ = 0;
  // Lines unlinked by cooperative garbage collection, freed in batches (one flush each).
  std::vector<record::Unlinked> unlinked_;
};

class IndexCursor : public Cursor {
 public:
  // Keys from `lo` (a prefix: empty = from the start) to `hi` (a prefix, inclusive; nullopt =
  // to the end).
  IndexCursor(TransactionImpl* txn, internal::IndexState* ix, std::string lo,
              std::optional<std::string> hi, bool descending)
      : txn_(txn), ix_(ix), lo_(std::move(lo)), hi_(std::move(hi)), descending_(descending) {}
  absl::Status Start();
  bool Valid() const override { return valid_; }
  absl::Status Next() override;
  RecordId id() const override { return RecordId{rec_}; }
  const Row& row() const override { return row_; }
  // Moves the current row out (the cursor is then done with it): a point lookup returns it
  // without a copy.
  Row TakeRow() { return std::move(row_); }

 private:
  absl::Status Settle();  // advances the tree cursor to the next entry with a visible match
  bool InRange(std::string_view key) const;

  TransactionImpl* txn_;
  internal::IndexState* ix_;
  index::BTree* tree_ = nullptr;  // the index's tree when the cursor started
  std::string lo_;
  std::optional<std::string> hi_;
  bool descending_;
  std::optional<index::BTree::Cursor> it_;
  bool valid_ = false;
  uint64_t rec_ = 0;
  Row row_;
};

}  // namespace ember::db
