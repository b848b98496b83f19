// DatabaseImpl's DDL: CreateTable, CreateIndex (built, or defined inactive), DropTable,
// DropIndex, SetIndexActive, and the deferred freeing
// of the pages they leave (ReapDropped). Each change is a system transaction on the catalog,
// committed before the call returns; the pages a drop leaves are freed only once no snapshot
// can still read them (architecture.md, "Dropping tables and indexes").
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/blob/blob_format.h"
#include "engine/blob/stored_blobs.h"
#include "engine/db/catalog_rows.h"
#include "engine/db/database_impl.h"

namespace ember::db {

using internal::IndexState;
using internal::TableState;

absl::StatusOr<TableState*> DatabaseImpl::AddTableState(uint32_t id, const TableSchema& schema,
                                                        page::PageNo first_pp,
                                                        uint64_t catalog_rec) {
  auto t = std::make_unique<TableState>();
  t->id = id;
  t->catalog_rec = catalog_rec;
  t->schema = schema;
  t->relation =
      std::make_unique<record::Relation>(cache_.get(), space_.get(), txns_.get(), id, first_pp);
  // A damaged pointer-page chain makes only this table unusable: the relation keeps the
  // DataLoss (Relation::damage) for every call that needs its pages, and the rest of the
  // database opens. Errors of other codes still fail the open.
  if (absl::Status s = t->relation->Load(); !s.ok() && !absl::IsDataLoss(s)) return s;
  record::Relation* rel = t->relation.get();
  rel->SetBlobFreer([this, rel](std::span<const uint64_t> ids, uint64_t mark_txn) {
    return blob::FreeStoredBlobs(cache_.get(), space_.get(), rel, ids, mark_txn);
  });
  TableState* raw = t.get();
  table_by_name_[schema.name] = raw;
  tables_.push_back(std::move(t));
  next_relation_id_ = std::max(next_relation_id_, id + 1);
  return raw;
}

absl::StatusOr<IndexState*> DatabaseImpl::AddIndexState(uint32_t id, const IndexSchema& schema,
                                                        page::PageNo root, uint64_t catalog_rec) {
  auto it = table_by_name_.find(schema.table);
  if (it == table_by_name_.end()) {
    return absl::NotFoundError(absl::StrCat("index ", schema.name, ": no table ", schema.table));
  }
  auto ix = std::make_unique<IndexState>();
  ix->id = id;
  ix->catalog_rec = catalog_rec;
  ix->schema = schema;
  ix->table = it->second;
  for (const std::string& col : schema.columns) {
    size_t pos = 0;
    const auto& cols = ix->table->schema.columns;
    while (pos < cols.size() && cols[pos].name != col) ++pos;
    if (pos == cols.size()) {
      return absl::NotFoundError(
          absl::StrCat("index ", schema.name, ": table ", schema.table, " has no column ", col));
    }
    ix->key_columns.push_back(pos);
  }
  if (ix->key_columns.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("index ", schema.name, " has no columns"));
  }
  if (root != 0) {
    ix->SetTree(std::make_unique<index::BTree>(cache_.get(), space_.get(), root));
  } else {
    ix->active.store(false);
  }
  IndexState* raw = ix.get();
  index_by_name_[schema.name] = raw;
  indexes_.push_back(std::move(ix));
  next_relation_id_ = std::max(next_relation_id_, id + 1);
  return raw;
}

absl::StatusOr<Table> DatabaseImpl::CreateTable(const TableSchema& schema) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  if (schema.name.empty() || schema.columns.empty()) {
    return absl::InvalidArgumentError("a table needs a name and at least one column");
  }
  for (size_t i = 0; i < schema.columns.size(); ++i) {
    const Column& c = schema.columns[i];
    if (c.zstd_level < 0 || c.zstd_level > blob::kMaxZstdLevel) {
      return absl::InvalidArgumentError(
          absl::StrCat("table ", schema.name, ": column ", c.name, ": zstd_level ", c.zstd_level,
                       " is not 0 (off) or 1..", blob::kMaxZstdLevel));
    }
    if (c.zstd_level > 0 && c.type != ColumnType::kBlob && c.type != ColumnType::kBytes &&
        c.type != ColumnType::kString) {
      return absl::InvalidArgumentError(
          absl::StrCat("table ", schema.name, ": column ", c.name,
                       ": only BLOB, string and bytes columns can be compressed (zstd_level)"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (schema.columns[i].name == schema.columns[j].name) {
        return absl::InvalidArgumentError(absl::StrCat("table ", schema.name, ": column ",
                                                       schema.columns[i].name, " given twice"));
      }
    }
  }
  util::MutexLock ddl(ddl_mu_);
  uint32_t id;
  {
    util::ReaderLock g(catalog_mu_);
    if (table_by_name_.contains(schema.name)) {
      return absl::AlreadyExistsError(absl::StrCat("table ", schema.name, " already exists"));
    }
    id = next_relation_id_;
  }
  absl::StatusOr<txn::TxnManager::Started> t = txns_->Begin();
  if (!t.ok()) return t.status();
  absl::StatusOr<page::PageNo> pp = record::Relation::Create(cache_.get(), space_.get(), t->id, id);
  absl::Status s = pp.status();
  uint64_t rec = 0;
  if (s.ok()) {
    Row row{int64_t{kKindTable},
            int64_t{id},
            schema.name,
            int64_t{*pp},
            std::string(),
            int64_t{0},
            EncodeColumns(schema.columns)};
    std::string raw;
    record::EncodeRow(row, &raw);
    absl::StatusOr<uint64_t> r = catalog_->Insert(t->id, raw);
    s = r.status();
    if (r.ok()) rec = *r;
  }
  if (s.ok()) s = txns_->Commit(t->id);
  if (!s.ok()) {
    (void)txns_->MarkDead(t->id);
    return s;
  }
  util::WriterLock g(catalog_mu_);
  absl::StatusOr<TableState*> ts = AddTableState(id, schema, *pp, rec);
  if (!ts.ok()) return ts.status();
  // (Committed: the table exists, damaged from the start, as a reopen would find it.)
  if (const absl::Status& d = (*ts)->relation->damage(); !d.ok()) return d;
  return (*ts)->handle();
}

absl::StatusOr<Index> DatabaseImpl::CreateIndex(const IndexSchema& schema,
                                                const IndexBuildOptions& build) {
  return DefineIndex(schema, build, /*active=*/true);
}

absl::StatusOr<Index> DatabaseImpl::CreateInactiveIndex(const IndexSchema& schema) {
  return DefineIndex(schema, IndexBuildOptions{}, /*active=*/false);
}

absl::StatusOr<Index> DatabaseImpl::DefineIndex(const IndexSchema& schema,
                                                const IndexBuildOptions& build, bool active) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  if (build.workers < 0 || build.fill_percent < 10 || build.fill_percent > 100) {
    return absl::InvalidArgumentError(absl::StrCat("index ", schema.name, ": build workers ",
                                                   build.workers, " (0 or more), ", "fill_percent ",
                                                   build.fill_percent, " (10..100)"));
  }
  util::MutexLock ddl(ddl_mu_);
  absl::StatusOr<txn::TxnManager::Started> t = txns_->Begin();
  if (!t.ok()) return t.status();
  IndexState* ix = nullptr;
  {
    util::WriterLock g(catalog_mu_);
    absl::Status s;
    if (index_by_name_.contains(schema.name)) {
      s = absl::AlreadyExistsError(absl::StrCat("index ", schema.name, " already exists"));
    }
    const uint32_t id = next_relation_id_;
    absl::StatusOr<page::PageNo> root =
        !s.ok() ? absl::StatusOr<page::PageNo>(s)
        : !active
            ? absl::StatusOr<page::PageNo>(0)  // no tree: AddIndexState makes it inactive
            : index::BTree::Create(cache_.get(), space_.get(), t->id, 0, static_cast<uint16_t>(id));
    absl::StatusOr<IndexState*> added = root.ok() ? AddIndexState(id, schema, *root, 0)
                                                  : absl::StatusOr<IndexState*>(root.status());
    if (!added.ok()) {
      (void)txns_->MarkDead(t->id);
      return added.status();
    }
    ix = *added;
    ix->ready.store(false);  // GetIndex does not find it until it is built
  }
  TableState* table = ix->table;
  IndexStats stats;
  // The catalog row, committed: the index exists from then on.
  auto record = [&]() -> absl::Status {
    absl::StatusOr<uint64_t> r = catalog_->Insert(t->id, IndexCatalogRow(*ix));
    if (!r.ok()) return r.status();
    ix->catalog_rec = *r;
    return txns_->Commit(t->id);
  };
  absl::Status s;
  if (!active) {
    // Writers of the table do not maintain an inactive index: no rows lock, no build.
    s = record();
    if (s.ok()) {
      ix->ready.store(true);
      return ix->handle();
    }
  } else {
    // Built under the table's rows lock: writers of the table wait (each change of its rows
    // updates its indexes, and the new one is not there yet); readers and other tables do not.
    util::WriterLock rows(table->rows_mu);
    s = BuildIndex(table, ix, t->id, build, &stats);
    if (s.ok()) s = record();
    if (s.ok()) {
      table->indexes.push_back(ix);
      {
        util::MutexLock sg(ix->stats_mu);
        ix->stats = stats;
      }
      ix->ready.store(true);
      return ix->handle();
    }
  }
  // (The rows lock is let go first: writers take the catalog lock before it.) Nothing on disk
  // links to the root (the catalog row, if written, is the dead transaction's).
  (void)txns_->MarkDead(t->id);
  if (active) (void)space_->Free(ix->btree()->root(), t->id);
  util::WriterLock g(catalog_mu_);
  index_by_name_.erase(schema.name);
  auto it =
      std::find_if(indexes_.begin(), indexes_.end(), [&](const auto& p) { return p.get() == ix; });
  if (it != indexes_.end()) indexes_.erase(it);
  return s;
}

std::string DatabaseImpl::IndexCatalogRow(const IndexState& ix) const {
  const index::BTree* tree = ix.btree();
  const bool inactive = tree == nullptr;
  Row row{int64_t{kKindIndex},
          int64_t{ix.id},
          ix.schema.name,
          int64_t{inactive ? 0 : tree->root()},
          ix.schema.table,
          int64_t{(ix.schema.unique ? kIndexUnique : 0) | (inactive ? kIndexInactive : 0)},
          EncodeNames(ix.schema.columns)};
  std::string raw;
  record::EncodeRow(row, &raw);
  return raw;
}

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
  util::ReaderLock g(catalog_mu_);
  auto it = index_by_name_.find(absl::string_view(name.data(), name.size()));
  if (it == index_by_name_.end() || !it->second->ready.load()) {
    return absl::NotFoundError(absl::StrCat("no index ", std::string(name)));
  }
  return it->second;
}

absl::Status DatabaseImpl::DropTable(std::string_view name) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  {
    util::MutexLock ddl(ddl_mu_);
    TableState* t = nullptr;
    std::vector<IndexState*> ixs;
    absl::StatusOr<txn::TxnManager::Started> txn = txns_->Begin();
    if (!txn.ok()) return txn.status();
    {
      // No write of the table is in flight (writers hold catalog_mu_ shared) and none starts
      // once drop_txn is set.
      util::WriterLock g(catalog_mu_);
      auto it = table_by_name_.find(absl::string_view(name.data(), name.size()));
      absl::Status s;
      if (it == table_by_name_.end()) {
        s = absl::NotFoundError(absl::StrCat("no table ", std::string(name)));
      } else if (const int w = it->second->writers.load(); w > 0) {
        s = absl::FailedPreconditionError(
            absl::StrCat("table ", std::string(name), " has uncommitted changes of ", w,
                         " active transaction(s): commit or roll them back before dropping it"));
      }
      if (!s.ok()) {
        // It wrote nothing: ended as an empty commit, it holds back no one (a dead one would
        // stay interesting until a sweep).
        (void)txns_->CommitNoWrites(txn->id, /*counted=*/false);
        return s;
      }
      t = it->second;
      util::WriterLock rows(t->rows_mu);
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
      util::WriterLock g(catalog_mu_);
      t->drop_txn.store(0);
      for (IndexState* ix : ixs) ix->drop_txn.store(0);
      return s;
    }
    PendingDrop d;
    d.cn = txns_->StateOf(txn->id);
    d.table = t;
    d.what = absl::StrCat("table ", t->schema.name);
    util::WriterLock g(catalog_mu_);
    table_by_name_.erase(t->schema.name);
    for (IndexState* ix : ixs) {
      index_by_name_.erase(ix->schema.name);
      if (index::BTree* tree = ix->btree()) d.trees.push_back(tree);
      auto it = std::find_if(indexes_.begin(), indexes_.end(),
                             [&](const auto& p) { return p.get() == ix; });
      dropped_indexes_.push_back(std::move(*it));
      indexes_.erase(it);
    }
    auto it =
        std::find_if(tables_.begin(), tables_.end(), [&](const auto& p) { return p.get() == t; });
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
    util::MutexLock ddl(ddl_mu_);
    absl::StatusOr<IndexState*> found = IndexForDdl(name);
    if (!found.ok()) return found.status();
    IndexState* ix = *found;
    TableState* t = ix->table;
    absl::StatusOr<txn::TxnManager::Started> txn = txns_->Begin();
    if (!txn.ok()) return txn.status();
    {
      // Writers stop maintaining the index: none is in flight (they hold both locks shared).
      util::WriterLock g(catalog_mu_);
      util::WriterLock rows(t->rows_mu);
      ix->drop_txn.store(txn->id, std::memory_order_release);
      std::erase(t->indexes, ix);
    }
    absl::Status s = WriteCatalogRow(txn->id, ix->catalog_rec, nullptr);
    if (s.ok()) s = txns_->Commit(txn->id);
    if (!s.ok()) {
      (void)txns_->MarkDead(txn->id);
      util::WriterLock g(catalog_mu_);
      util::WriterLock rows(t->rows_mu);
      ix->drop_txn.store(0);
      if (ix->active.load()) t->indexes.push_back(ix);
      return s;
    }
    PendingDrop d;
    d.cn = txns_->StateOf(txn->id);
    d.what = absl::StrCat("index ", ix->schema.name);
    if (index::BTree* tree = ix->btree()) d.trees.push_back(tree);
    util::WriterLock g(catalog_mu_);
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
    return absl::InvalidArgumentError(absl::StrCat("index ", std::string(name), ": build workers ",
                                                   build.workers, " (0 or more), fill_percent ",
                                                   build.fill_percent, " (10..100)"));
  }
  {
    util::MutexLock ddl(ddl_mu_);
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
        util::WriterLock g(catalog_mu_);
        util::WriterLock rows(t->rows_mu);
        ix->active.store(false, std::memory_order_release);
        ix->tree_.store(nullptr, std::memory_order_release);
        std::erase(t->indexes, ix);
      }
      const std::string raw = IndexCatalogRow(*ix);
      absl::Status s = WriteCatalogRow(txn->id, ix->catalog_rec, &raw);
      if (s.ok()) s = txns_->Commit(txn->id);
      if (!s.ok()) {
        (void)txns_->MarkDead(txn->id);
        util::WriterLock g(catalog_mu_);
        util::WriterLock rows(t->rows_mu);
        ix->tree_.store(old, std::memory_order_release);
        ix->active.store(true, std::memory_order_release);
        t->indexes.push_back(ix);
        return s;
      }
      PendingDrop d;
      d.cn = txns_->StateOf(txn->id);
      d.what = absl::StrCat("index ", ix->schema.name, " (deactivated)");
      d.trees.push_back(old);
      util::WriterLock g(catalog_mu_);
      pending_drops_.push_back(std::move(d));
      pending_drop_count_.fetch_add(1, std::memory_order_release);
    } else {
      // A new tree, built as CreateIndex builds one, under the table's rows lock.
      absl::StatusOr<page::PageNo> root = index::BTree::Create(cache_.get(), space_.get(), txn->id,
                                                               0, static_cast<uint16_t>(ix->id));
      if (!root.ok()) {
        (void)txns_->MarkDead(txn->id);
        return root.status();
      }
      IndexStats stats;
      absl::Status s;
      {
        util::WriterLock rows(t->rows_mu);
        // Readers do not use the tree before `active` is set; writers wait for the rows lock.
        ix->SetTree(std::make_unique<index::BTree>(cache_.get(), space_.get(), *root));
        s = BuildIndex(t, ix, txn->id, build, &stats);
        const std::string raw = IndexCatalogRow(*ix);
        if (s.ok()) s = WriteCatalogRow(txn->id, ix->catalog_rec, &raw);
        if (s.ok()) s = txns_->Commit(txn->id);
        if (s.ok()) {
          {
            util::MutexLock sg(ix->stats_mu);
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
      if (absl::Status s = rel->FreeUnlinked(&later, cache::kNoOwnerMark); !s.ok()) return s;
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
    absl::Status s = tree->Check(
        &errors, [](std::string_view, uint64_t) {}, &pages);
    if (!s.ok()) return s;
  }
  if (!errors.empty()) {
    // A damaged page may name pages that are not ours: free nothing; Validate lists the
    // pages as unreachable once the drop is reaped.
    return absl::DataLossError(absl::StrCat(d.what, " was dropped, but its pages were not ",
                                            "freed: ", errors.size(),
                                            " problem(s), the first: ", errors[0]));
  }
  std::sort(pages.begin(), pages.end());
  pages.erase(std::unique(pages.begin(), pages.end()), pages.end());
  // Nothing on disk links to these pages: the catalog rows that led to them were deleted by
  // a committed transaction, whose pages were written by its commit.
  util::WriterLock g(catalog_mu_);
  for (page::PageNo p : pages) {
    if (absl::Status s = space_->Free(p, cache::kNoOwnerMark); !s.ok()) return s;
  }
  return absl::OkStatus();
}

void DatabaseImpl::ReapDropped(bool force) {
  util::MutexLock ddl(ddl_mu_, std::defer_lock);
  if (force) {
    ddl.Lock();
  } else if (!ddl.TryLock()) {
    return;  // the DDL running now reaps when it ends
  }
  const uint64_t horizon = GcHorizon();
  std::vector<PendingDrop> ready;
  {
    util::ReaderLock g(catalog_mu_);
    for (const PendingDrop& d : pending_drops_) {
      if (force || d.cn <= horizon) ready.push_back(d);
    }
  }
  for (const PendingDrop& d : ready) {
    absl::Status s = FreeDropped(d);
    // Done either way: a failed free leaves pages Validate(free_unreachable) can reclaim.
    if (!s.ok()) bg_errors_.Add(s);
    util::WriterLock g(catalog_mu_);
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
