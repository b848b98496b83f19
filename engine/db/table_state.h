// The state behind the public Table and Index handles: a table's relation, schema, rows lock and
// indexes; an index's tree and schema. Owned by DatabaseImpl's catalog (database_impl.h).
#pragma once
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "ember/database.h"
#include "engine/index/btree.h"
#include "engine/page/page.h"
#include "engine/record/relation.h"
#include "engine/util/mutex.h"

namespace ember {
namespace internal {

struct TableState {
  uint32_t id = 0;
  uint64_t catalog_rec = 0;  // its row in the catalog (relation 0)
  TableSchema schema;
  // The DDL transaction dropping the table (0: none). Set before that transaction commits,
  // under catalog_mu_ and rows_mu held exclusively: no write starts afterwards, and a
  // snapshot sees the table gone once it sees that transaction committed (DropTable).
  std::atomic<uint64_t> drop_txn{0};
  // Active transactions that have changed rows of the table (a drop waits for none).
  std::atomic<int> writers{0};
  std::unique_ptr<record::Relation> relation;
  // Held shared by every change of the table's rows together with their index entries (a
  // write with its keys, an undo, a collection of its records) and exclusively by a build of
  // one of its indexes: no change misses an index being built, and readers never wait for it.
  // Taken after DatabaseImpl::catalog_mu_ (shared) where both are held.
  mutable util::SharedMutex rows_mu;
  std::vector<IndexState*> indexes ABSL_GUARDED_BY(rows_mu);  // changed only under ddl_mu_ too
  Table handle() { return Table(this); }
  static TableState* From(const Table& t) { return t.state_; }
  // Whether a row can name a stored BLOB: a BLOB column, or a string/bytes value stored out of
  // line. Tables without such columns skip all BLOB bookkeeping when versions go.
  bool names_blobs() const {
    for (const Column& c : schema.columns) {
      if (c.type == ColumnType::kBlob || c.type == ColumnType::kString ||
          c.type == ColumnType::kBytes) {
        return true;
      }
    }
    return false;
  }
  // The zstd level of column `i` for values it stores out of line (0: uncompressed).
  int zstd_level(size_t i) const {
    return i < schema.columns.size() ? schema.columns[i].zstd_level : 0;
  }
  // Adds the stored BLOBs of this table that raw row `raw` names (BLOB fields and values kept
  // out of line) to `ids`. The error of a row that does not decode (see UndecodableVersion).
  absl::Status AddBlobIds(std::string_view raw, absl::flat_hash_set<uint64_t>* ids) const;
  // The relation's damage (Relation::damage) as the error of `what` ("sweep", "backup") of
  // this table, for the calls that do every other table first; OK when undamaged.
  absl::Status DamageFor(absl::string_view what) const;
};

// DataLoss for a version of record `rec` of table `t` that does not decode as a row (`cause`):
// names the table, the record, and the page and line of the version (`at`; when unknown, those
// of the record's primary version). Every reader that needs a version's columns (index build
// and maintenance, unique checks, garbage collection, Validate) reports such damage this way
// rather than skipping the version.
absl::Status UndecodableVersion(const TableState& t, uint64_t rec,
                                std::optional<std::pair<page::PageNo, uint16_t>> at,
                                const absl::Status& cause);

struct IndexState {
  uint32_t id = 0;
  uint64_t catalog_rec = 0;  // its row in the catalog
  IndexSchema schema;
  TableState* table = nullptr;
  std::vector<size_t> key_columns;  // positions in the table's columns
  // The tree, or null while the index is inactive. Trees of earlier activations stay in
  // `trees` until Close (a reader that started before a deactivation may still hold one; its
  // pages are freed once no snapshot that could read it is left, see DatabaseImpl::ReapDropped).
  index::BTree* btree() const { return tree_.load(std::memory_order_acquire); }
  // REQUIRES: DatabaseImpl::ddl_mu_ held (an annotation here cannot name the database's member).
  void SetTree(std::unique_ptr<index::BTree> t) {
    tree_.store(t.get(), std::memory_order_release);
    if (t) trees.push_back(std::move(t));
  }
  std::atomic<index::BTree*> tree_{nullptr};
  std::vector<std::unique_ptr<index::BTree>> trees;
  // False while the index is being built: GetIndex does not find it yet.
  std::atomic<bool> ready{true};
  // Inactive (SetIndexActive false): no tree, not maintained, not usable for reads.
  std::atomic<bool> active{true};
  // The DDL transaction dropping the index (0: none); set as TableState::drop_txn is.
  std::atomic<uint64_t> drop_txn{0};
  util::Mutex stats_mu;
  IndexStats stats ABSL_GUARDED_BY(stats_mu);  // its last build's
  Index handle() { return Index(this); }
  static IndexState* From(const Index& ix) { return ix.state_; }
};

// Data pages read ahead at a time by a scan and by a rollback's sweep over its records in
// record order (one read per run of consecutive pages: a whole extent).
constexpr uint32_t kReadAhead = 32;

}  // namespace internal
}  // namespace ember
