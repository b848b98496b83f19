// DDL that removes or rebuilds: DropTable, DropIndex, SetIndexActive, and the deferred freeing
// of the pages they leave (ReapDropped). Each change is a system transaction on the catalog,
// committed before the call returns; the pages a drop leaves are freed only once no snapshot
// can still read them (architecture.md, "Dropping tables and indexes").
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/blob/blob_format.h"
#include "engine/blob/stored_blobs.h"
#include "engine/db/db_state.h"

namespace ember::db {

using internal::IndexState;
using internal::TableState;

absl::Status DatabaseImpl::CheckTableVisible(const TableState& t, uint64_t cn) const {
  const uint64_t d = t.drop_txn.load(std::memory_order_acquire);
  if (d == 0) return absl::OkStatus();
  const uint64_t state = txns_->StateOf(d);
  if (txn::IsCommittedCn(state) && state <= cn) {
    return absl::NotFoundError(absl::StrCat("table ", t.schema.name, " was dropped"));
  }
  return absl::OkStatus();
}

absl::Status DatabaseImpl::CheckIndexUsable(const IndexState& ix) const {
  if (ix.drop_txn.load(std::memory_order_acquire) != 0) {
    return absl::NotFoundError(absl::StrCat("index ", ix.schema.name, " was dropped"));
  }
  if (!ix.active.load(std::memory_order_acquire)) {
    return absl::FailedPreconditionError(absl::StrCat("index ", ix.schema.name, " is inactive"));
  }
  // An index read returns rows: over a damaged table it would return some or none of them.
  return ix.table->relation->damage();
}

absl::Status DatabaseImpl::WriteCatalogRow(uint64_t txn, uint64_t rec, const std::string* raw) {
  const record::ReadView view{txn, txns_->CurrentCn(), txns_.get()};
  absl::StatusOr<record::WriteOutcome> w =
      catalog_->Write(rec, txn, view, /*read_committed=*/true, raw);
  if (!w.ok()) return w.status();
  if (w->code != record::WriteOutcome::kDone) {
    // DDL runs one at a time and nothing else writes the catalog.
    return absl::InternalError(absl::StrCat("catalog record ", rec, ": write refused (",
                                            static_cast<int>(w->code), ", transaction ",
                                            w->other_txn, ")"));
  }
  if (w->unlinked_fragments) {
    std::vector<record::Unlinked> later{std::move(*w->unlinked_fragments)};
    catalog_->FreeLater(&later);
  }
  return absl::OkStatus();
}

absl::StatusOr<IndexState*> DatabaseImpl::IndexForDdl(std::string_view name) {
  std::shared_lock<std::shared_mutex> g(catalog_mu_);
  auto it = index_by_name_.find(absl::string_view(name.data(), name.size()));
  if (it == index_by_name_.end() || !it->second->ready.load()) {
    return absl::NotFoundError(absl::StrCat("no index ", std::string(name)));
  }
  return it->second;
}

absl::Status DatabaseImpl::DropTable(std::string_view name) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  {
    std::lock_guard<std::mutex> ddl(ddl_mu_);
    TableState* t = nullptr;
    std::vector<IndexState*> ixs;
    absl::StatusOr<txn::TxnManager::Started> txn = txns_->Begin();
    if (!txn.ok()) return txn.status();
    {
      // No write of the table is in flight (writers hold catalog_mu_ shared) and none starts
      // once drop_txn is set.
      std::unique_lock<std::shared_mutex> g(catalog_mu_);
      auto it = table_by_name_.find(absl::string_view(name.data(), name.size()));
      absl::Status s;
      if (it == table_by_name_.end()) {
        s = absl::NotFoundError(absl::StrCat("no table ", std::string(name)));
      } else if (const int w = it->second->writers.load(); w > 0) {
        s = absl::FailedPreconditionError(absl::StrCat(
            "table ", std::string(name), " has uncommitted changes of ", w,
            " active transaction(s): commit or roll them back before dropping it"));
      }
      if (!s.ok()) {
        // It wrote nothing: ended as an empty commit, it holds back no one (a dead one would
        // stay interesting until a sweep).
        (void)txns_->CommitNoWrites(txn->id, /*counted=*/false);
        return s;
      }
      t = it->second;
      std::unique_lock<std::shared_mutex> rows(t->rows_mu);
      t->drop_txn.store(txn->id, std::memory_order_release);
      for (const auto& ix : indexes_) {
        if (ix->table == t && ix->ready.load()) {
          ix->drop_txn.store(txn->id, std::memory_order_release);
          ixs.push_back(ix.get());
        }
      }
    }
    absl::Status s = WriteCatalogRow(txn->id, t->catalog_rec, nullptr);
    for (IndexState* ix : ixs) {
      if (s.ok()) s = WriteCatalogRow(txn->id, ix->catalog_rec, nullptr);
    }
    if (s.ok()) s = txns_->Commit(txn->id);
    if (!s.ok()) {
      (void)txns_->MarkDead(txn->id);
      std::unique_lock<std::shared_mutex> g(catalog_mu_);
      t->drop_txn.store(0);
      for (IndexState* ix : ixs) ix->drop_txn.store(0);
      return s;
    }
    PendingDrop d;
    d.cn = txns_->StateOf(txn->id);
    d.table = t;
    d.what = absl::StrCat("table ", t->schema.name);
    std::unique_lock<std::shared_mutex> g(catalog_mu_);
    table_by_name_.erase(t->schema.name);
    for (IndexState* ix : ixs) {
      index_by_name_.erase(ix->schema.name);
      if (index::BTree* tree = ix->btree()) d.trees.push_back(tree);
      auto it = std::find_if(indexes_.begin(), indexes_.end(),
                             [&](const auto& p) { return p.get() == ix; });
      dropped_indexes_.push_back(std::move(*it));
      indexes_.erase(it);
    }
    auto it = std::find_if(tables_.begin(), tables_.end(),
                           [&](const auto& p) { return p.get() == t; });
    dropped_tables_.push_back(std::move(*it));
    tables_.erase(it);
    pending_drops_.push_back(std::move(d));
    pending_drop_count_.fetch_add(1, std::memory_order_release);
  }
  ReapDropped(false);
  return absl::OkStatus();
}

absl::Status DatabaseImpl::DropIndex(std::string_view name) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  {
    std::lock_guard<std::mutex> ddl(ddl_mu_);
    absl::StatusOr<IndexState*> found = IndexForDdl(name);
    if (!found.ok()) return found.status();
    IndexState* ix = *found;
    TableState* t = ix->table;
    absl::StatusOr<txn::TxnManager::Started> txn = txns_->Begin();
    if (!txn.ok()) return txn.status();
    {
      // Writers stop maintaining the index: none is in flight (they hold both locks shared).
      std::unique_lock<std::shared_mutex> g(catalog_mu_);
      std::unique_lock<std::shared_mutex> rows(t->rows_mu);
      ix->drop_txn.store(txn->id, std::memory_order_release);
      std::erase(t->indexes, ix);
    }
    absl::Status s = WriteCatalogRow(txn->id, ix->catalog_rec, nullptr);
    if (s.ok()) s = txns_->Commit(txn->id);
    if (!s.ok()) {
      (void)txns_->MarkDead(txn->id);
      std::unique_lock<std::shared_mutex> g(catalog_mu_);
      std::unique_lock<std::shared_mutex> rows(t->rows_mu);
      ix->drop_txn.store(0);
      if (ix->active.load()) t->indexes.push_back(ix);
      return s;
    }
    PendingDrop d;
    d.cn = txns_->StateOf(txn->id);
    d.what = absl::StrCat("index ", ix->schema.name);
    if (index::BTree* tree = ix->btree()) d.trees.push_back(tree);
    std::unique_lock<std::shared_mutex> g(catalog_mu_);
    index_by_name_.erase(ix->schema.name);
    auto it = std::find_if(indexes_.begin(), indexes_.end(),
                           [&](const auto& p) { return p.get() == ix; });
    dropped_indexes_.push_back(std::move(*it));
    indexes_.erase(it);
    if (!d.trees.empty()) {
      pending_drops_.push_back(std::move(d));
      pending_drop_count_.fetch_add(1, std::memory_order_release);
    }
  }
  ReapDropped(false);
  return absl::OkStatus();
}

absl::Status DatabaseImpl::SetIndexActive(std::string_view name, bool active,
                                          const IndexBuildOptions& build) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  if (build.workers < 0 || build.fill_percent < 10 || build.fill_percent > 100) {
    return absl::InvalidArgumentError(
        absl::StrCat("index ", std::string(name), ": build workers ", build.workers,
                     " (0 or more), fill_percent ", build.fill_percent, " (10..100)"));
  }
  {
    std::lock_guard<std::mutex> ddl(ddl_mu_);
    absl::StatusOr<IndexState*> found = IndexForDdl(name);
    if (!found.ok()) return found.status();
    IndexState* ix = *found;
    TableState* t = ix->table;
    if (ix->active.load() == active) return absl::OkStatus();
    absl::StatusOr<txn::TxnManager::Started> txn = txns_->Begin();
    if (!txn.ok()) return txn.status();
    if (!active) {
      index::BTree* old = ix->btree();
      {
        std::unique_lock<std::shared_mutex> g(catalog_mu_);
        std::unique_lock<std::shared_mutex> rows(t->rows_mu);
        ix->active.store(false, std::memory_order_release);
        ix->tree_.store(nullptr, std::memory_order_release);
        std::erase(t->indexes, ix);
      }
      const std::string raw = IndexCatalogRow(*ix);
      absl::Status s = WriteCatalogRow(txn->id, ix->catalog_rec, &raw);
      if (s.ok()) s = txns_->Commit(txn->id);
      if (!s.ok()) {
        (void)txns_->MarkDead(txn->id);
        std::unique_lock<std::shared_mutex> g(catalog_mu_);
        std::unique_lock<std::shared_mutex> rows(t->rows_mu);
        ix->tree_.store(old, std::memory_order_release);
        ix->active.store(true, std::memory_order_release);
        t->indexes.push_back(ix);
        return s;
      }
      PendingDrop d;
      d.cn = txns_->StateOf(txn->id);
      d.what = absl::StrCat("index ", ix->schema.name, " (deactivated)");
      d.trees.push_back(old);
      std::unique_lock<std::shared_mutex> g(catalog_mu_);
      pending_drops_.push_back(std::move(d));
      pending_drop_count_.fetch_add(1, std::memory_order_release);
    } else {
      // A new tree, built as CreateIndex builds one, under the table's rows lock.
      absl::StatusOr<page::PageNo> root =
          index::BTree::Create(cache_.get(), space_.get(), txn->id, 0,
                               static_cast<uint16_t>(ix->id));
      if (!root.ok()) {
        (void)txns_->MarkDead(txn->id);
        return root.status();
      }
      IndexStats stats;
      absl::Status s;
      {
        std::unique_lock<std::shared_mutex> rows(t->rows_mu);
        // Readers do not use the tree before `active` is set; writers wait for the rows lock.
        ix->SetTree(std::make_unique<index::BTree>(cache_.get(), space_.get(), *root));
        s = BuildIndex(ix, txn->id, build, &stats);
        const std::string raw = IndexCatalogRow(*ix);
        if (s.ok()) s = WriteCatalogRow(txn->id, ix->catalog_rec, &raw);
        if (s.ok()) s = txns_->Commit(txn->id);
        if (s.ok()) {
          {
            std::lock_guard<std::mutex> sg(ix->stats_mu);
            ix->stats = stats;
          }
          t->indexes.push_back(ix);
          ix->active.store(true, std::memory_order_release);
        } else {
          ix->tree_.store(nullptr, std::memory_order_release);
        }
      }
      if (!s.ok()) {
        (void)txns_->MarkDead(txn->id);
        (void)space_->Free(*root, txn->id);
        return s;
      }
    }
  }
  ReapDropped(false);
  return absl::OkStatus();
}

absl::Status DatabaseImpl::FreeDropped(const PendingDrop& d) {
  // The walk: every page the drop left, read while nothing else touches them (no writer, no
  // collection, and no reader: the horizon has passed the drop).
  std::vector<page::PageNo> pages;
  std::vector<std::string> errors;
  if (d.table != nullptr) {
    record::Relation* rel = d.table->relation.get();
    // Lines a collection was still to free: their pages go anyway, but a BLOB they name may
    // have no header record left to find it by.
    std::vector<record::Unlinked> later;
    rel->TakeLater(&later);
    if (!later.empty()) {
      if (absl::Status s = rel->FreeUnlinked(&later, kGcMarkTxn); !s.ok()) return s;
    }
    uint64_t versions = 0;
    absl::Status blob_error;
    std::vector<std::string> bodies;  // BLOB headers: their pages are read after the walk
    absl::Status s = rel->Check(
        &errors, &pages, [](uint64_t) {}, &versions,
        [&](page::PageNo, uint16_t, uint64_t, std::string_view body) {
          bodies.emplace_back(body);
        });
    if (!s.ok()) return s;
    for (const std::string& body : bodies) {
      absl::StatusOr<blob::BlobHeader> h = blob::DecodeBlobHeader(body);
      if (!h.ok()) {
        blob_error.Update(h.status());
        continue;
      }
      std::vector<page::PageNo> data, lists;
      blob_error.Update(blob::DataPagesOf(cache_.get(), *h, &data, &lists));
      pages.insert(pages.end(), data.begin(), data.end());
      pages.insert(pages.end(), lists.begin(), lists.end());
    }
    if (!blob_error.ok()) errors.push_back(std::string(blob_error.message()));
  }
  for (index::BTree* tree : d.trees) {
    absl::Status s = tree->Check(&errors, [](std::string_view, uint64_t) {}, &pages);
    if (!s.ok()) return s;
  }
  if (!errors.empty()) {
    // A damaged page may name pages that are not ours: free nothing; Validate lists the
    // pages as unreachable once the drop is reaped.
    return absl::DataLossError(absl::StrCat(d.what, " was dropped, but its pages were not ",
                                            "freed: ", errors.size(), " problem(s), the first: ",
                                            errors[0]));
  }
  std::sort(pages.begin(), pages.end());
  pages.erase(std::unique(pages.begin(), pages.end()), pages.end());
  // Nothing on disk links to these pages: the catalog rows that led to them were deleted by
  // a committed transaction, whose pages were written by its commit.
  std::unique_lock<std::shared_mutex> g(catalog_mu_);
  for (page::PageNo p : pages) {
    if (absl::Status s = space_->Free(p, kGcMarkTxn); !s.ok()) return s;
  }
  return absl::OkStatus();
}

void DatabaseImpl::ReapDropped(bool force) {
  std::unique_lock<std::mutex> ddl(ddl_mu_, std::defer_lock);
  if (force) {
    ddl.lock();
  } else if (!ddl.try_lock()) {
    return;  // the DDL running now reaps when it ends
  }
  const uint64_t horizon = GcHorizon();
  std::vector<PendingDrop> ready;
  {
    std::shared_lock<std::shared_mutex> g(catalog_mu_);
    for (const PendingDrop& d : pending_drops_) {
      if (force || d.cn <= horizon) ready.push_back(d);
    }
  }
  for (const PendingDrop& d : ready) {
    absl::Status s = FreeDropped(d);
    // Done either way: a failed free leaves pages Validate(free_unreachable) can reclaim.
    if (!s.ok()) bg_errors_.Add(s);
    std::unique_lock<std::shared_mutex> g(catalog_mu_);
    auto it = std::find_if(pending_drops_.begin(), pending_drops_.end(), [&](const PendingDrop& p) {
      return p.cn == d.cn && p.table == d.table && p.trees == d.trees;
    });
    if (it != pending_drops_.end()) {
      pending_drops_.erase(it);
      pending_drop_count_.fetch_sub(1, std::memory_order_release);
    }
  }
}

}  // namespace ember::db
