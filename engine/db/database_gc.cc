// DatabaseImpl's garbage collection (database_impl.h): a record's versions no snapshot sees
// (CollectRecords) with their index entries (DropKeys) and BLOBs (QueueBlobFrees),
// CollectGarbage over every table, and GetTableStats.
#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "engine/blob/blob_format.h"
#include "engine/db/database_impl.h"
#include "engine/db/garbage_collector.h"
#include "engine/record/record_format.h"

namespace ember::db {

using internal::IndexState;
using internal::TableState;

absl::Status DatabaseImpl::DropKeys(TableState* t, uint64_t rec,
                                    const std::vector<std::string>& going,
                                    const std::vector<std::string>* staying, uint64_t mark_txn,
                                    uint64_t* removed) {
  if (t->indexes.empty() || going.empty()) return absl::OkStatus();
  const size_t ncols = t->schema.columns.size();
  // Keys (per index) of the rows that go. A row that does not decode is damage: its keys are
  // unknown, so the entries could not be kept right (a silent skip would leave them forever).
  std::vector<absl::flat_hash_set<std::string>> drop(t->indexes.size());
  std::string key;
  Row row;
  for (const std::string& raw : going) {
    if (absl::Status s = record::DecodeRow(raw, ncols, &row); !s.ok()) {
      return internal::UndecodableVersion(*t, rec, std::nullopt, s);
    }
    for (size_t i = 0; i < t->indexes.size(); ++i) {
      internal::EncodeIndexKey(*t->indexes[i], row, &key);
      drop[i].insert(key);
    }
  }
  size_t left = 0;
  for (const auto& d : drop) left += d.size();
  auto keep = [&](std::string_view raw) ABSL_SHARED_LOCKS_REQUIRED(t->rows_mu) -> absl::Status {
    if (absl::Status s = record::DecodeRow(raw, ncols, &row); !s.ok()) return s;
    for (size_t i = 0; i < t->indexes.size(); ++i) {
      internal::EncodeIndexKey(*t->indexes[i], row, &key);
      left -= drop[i].erase(key);
    }
    return absl::OkStatus();
  };
  if (staying) {
    for (const std::string& raw : *staying) {
      if (absl::Status s = keep(raw); !s.ok()) {
        return internal::UndecodableVersion(*t, rec, std::nullopt, s);
      }
    }
  } else {
    absl::Status bad;
    std::pair<page::PageNo, uint16_t> at;
    absl::Status s = t->relation->ForEachVersion(
        rec,
        [&](uint64_t writer, bool deleted, std::string_view raw)
            ABSL_SHARED_LOCKS_REQUIRED(t->rows_mu) {
              if (!deleted && txns_->StateOf(writer) != txn::kCnDead) bad = keep(raw);
              return bad.ok() && left > 0;
            },
        &at);
    if (!bad.ok()) return internal::UndecodableVersion(*t, rec, at, bad);
    if (!s.ok() && !absl::IsNotFound(s)) return s;
  }
  for (size_t i = 0; i < t->indexes.size(); ++i) {
    for (const std::string& k : drop[i]) {
      absl::Status s = t->indexes[i]->btree()->Remove(internal::IndexEntry(k, rec), mark_txn);
      if (s.ok() && removed != nullptr) ++*removed;
      if (!s.ok() && !absl::IsNotFound(s)) return s;
    }
  }
  return absl::OkStatus();
}

absl::Status DatabaseImpl::QueueBlobFrees(const TableState* t, uint64_t rec,
                                          const std::vector<std::string>& going,
                                          const std::vector<std::string>& staying,
                                          page::PageNo from, page::PageNo from2,
                                          std::vector<record::Unlinked>* unlinked) {
  if (!t->names_blobs()) return absl::OkStatus();
  absl::flat_hash_set<uint64_t> gone;
  for (const std::string& raw : going) {
    if (absl::Status s = t->AddBlobIds(raw, &gone); !s.ok()) {
      return internal::UndecodableVersion(*t, rec, std::nullopt, s);
    }
  }
  if (gone.empty()) return absl::OkStatus();
  absl::flat_hash_set<uint64_t> kept;
  for (const std::string& raw : staying) {
    if (absl::Status s = t->AddBlobIds(raw, &kept); !s.ok()) {
      return internal::UndecodableVersion(*t, rec, std::nullopt, s);
    }
  }
  for (uint64_t id : gone) {
    if (kept.contains(id)) continue;
    record::Unlinked u;
    u.from = from;
    u.from2 = from2;
    u.blob = id;
    unlinked->push_back(u);
  }
  return absl::OkStatus();
}

absl::Status DatabaseImpl::FreeCollected(TableState* t, std::vector<record::Unlinked>* unlinked,
                                         bool when_written) {
  if (unlinked->empty()) return absl::OkStatus();
  // Shared: DropTable sets drop_txn, and FreeDropped frees the pages, under it exclusively.
  util::ReaderLock cat(catalog_mu_);
  if (t->drop_txn.load(std::memory_order_acquire) != 0) {
    t->relation->FreeLater(unlinked);
    return absl::OkStatus();
  }
  return t->relation->FreeUnlinked(unlinked, cache::kNoOwnerMark, when_written);
}

absl::Status DatabaseImpl::CollectRecords(TableState* t, std::span<const uint64_t> recs,
                                          std::vector<record::Unlinked>* unlinked, bool* pending,
                                          bool* busy, CollectTally* tally) {
  const uint64_t horizon = GcHorizon();
  util::ReaderLock cat(catalog_mu_);
  // The index list must not change, and an index build of the table must see the records as
  // they are: a collector that can come back later does not wait for a build.
  util::ReaderLock rows(t->rows_mu, std::defer_lock);
  if (busy == nullptr) {
    rows.Lock();
  } else if (!rows.TryLock()) {
    *busy = true;
    return absl::OkStatus();
  }
  // A dropped table's pages all go at once when no snapshot can read them (ReapDropped).
  if (t->drop_txn.load(std::memory_order_acquire) != 0) return absl::OkStatus();
  // The versions that go or stay are decoded below (index keys, BLOBs): one that does not
  // decode must stop the collection before the chain is cut, so the record stays as it is and
  // the collection can be retried once the damage is dealt with.
  const bool decodes = !t->indexes.empty() || t->names_blobs();
  const size_t ncols = t->schema.columns.size();
  Row scratch;
  uint64_t rec = 0;
  const record::Relation::VersionCheck check = [&](std::string_view raw, page::PageNo p,
                                                   uint16_t line) {
    absl::Status s = record::DecodeRow(raw, ncols, &scratch);
    return s.ok() ? s : internal::UndecodableVersion(*t, rec, std::make_pair(p, line), s);
  };
  for (uint64_t r : recs) {
    rec = r;
    std::lock_guard<std::mutex> g(RecordMutex(t->id, rec));
    absl::StatusOr<record::Collected> c =
        t->relation->Collect(rec, horizon, cache::kNoOwnerMark, unlinked,
                             decodes ? check : record::Relation::VersionCheck());
    if (!c.ok()) return c.status();
    if (pending && c->pending) *pending = true;
    if (tally && c->pending) ++tally->kept;
    if (!c->changed) continue;
    gc_versions_.fetch_add(c->versions, std::memory_order_relaxed);
    if (c->record_gone) gc_records_.fetch_add(1, std::memory_order_relaxed);
    uint64_t keys = 0;
    absl::Status ks = DropKeys(t, rec, c->going, &c->staying, cache::kNoOwnerMark, &keys);
    gc_keys_.fetch_add(keys, std::memory_order_relaxed);
    if (!ks.ok()) return ks;
    const size_t queued = unlinked->size();
    if (absl::Status s =
            QueueBlobFrees(t, rec, c->going, c->staying, c->backout_page, c->cut_page, unlinked);
        !s.ok()) {
      return s;
    }
    if (tally) {
      tally->versions += c->versions;
      tally->records += c->record_gone ? 1 : 0;
      tally->index_entries += keys;
      tally->blobs += unlinked->size() - queued;
    }
    if (absl::Status s = t->relation->NoteSpaceFreed(rec, cache::kNoOwnerMark); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status DatabaseImpl::CollectGarbage() {
  ReapDropped(false);
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  if (absl::Status s = CollectAll(); !s.ok()) return s;
  return bg_errors_.Take();  // what the background collector (or a cleanup) hit since
}

absl::Status DatabaseImpl::CollectAll() {
  std::unique_lock<std::mutex> pause;
  if (gc_) pause = gc_->Pause();
  std::vector<TableState*> tables;
  {
    util::ReaderLock g(catalog_mu_);
    for (const auto& t : tables_) tables.push_back(t.get());
  }
  std::vector<uint64_t> recs;
  std::vector<record::Unlinked> unlinked;
  // A table whose pages are unknown (a damaged pointer-page chain) is not collected: the others
  // are, and the call then fails with its DataLoss (as Sweep does), never as if it were empty.
  absl::Status damaged;
  for (TableState* t : tables) {
    if (absl::Status d = t->DamageFor("garbage collection"); !d.ok()) {
      if (damaged.ok()) damaged = std::move(d);
      continue;
    }
    // Lines unlinked but not freed are handed to the background collector to retry.
    auto free_unlinked = [&]() {
      absl::Status s = FreeCollected(t, &unlinked);
      if (!s.ok() && gc_) gc_->KeepUnfreed(t->id, &unlinked);
      return s;
    };
    const uint32_t n = t->relation->PageSequences();
    for (uint32_t seq = 0; seq < n; ++seq) {
      recs.clear();
      absl::Status s = t->relation->ListCollectable(seq, &recs);
      if (s.ok()) s = CollectRecords(t, recs, &unlinked);
      if (s.ok() && unlinked.size() >= 4096) s = free_unlinked();
      if (!s.ok()) {
        bg_errors_.Add(free_unlinked());  // what was unlinked already still goes (or is kept)
        return absl::Status(s.code(), absl::StrCat("garbage collection of table ", t->schema.name,
                                                   " data page ", seq, ": ", s.message()));
      }
    }
    t->relation->TakeLater(&unlinked);
    if (absl::Status s = free_unlinked(); !s.ok()) return s;
  }
  return damaged;
}

absl::StatusOr<TableStats> DatabaseImpl::GetTableStats(const Table& table) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  if (!table) return absl::InvalidArgumentError("invalid table handle");
  // Shared: a dropped table's pages are not freed during the walk.
  util::ReaderLock g(catalog_mu_);
  const TableState* t = TableState::From(table);
  if (absl::Status s = CheckTableVisible(*t, txns_->CurrentCn()); !s.ok()) return s;
  record::VersionStats v;
  if (absl::Status s = t->relation->GetVersionStats(&v); !s.ok()) return s;
  TableStats out;
  out.records = v.records;
  out.back_versions = v.back_versions;
  out.back_version_bytes = v.back_version_bytes;
  out.delete_stubs = v.delete_stubs;
  out.dead_versions = v.dead_heads;
  out.data_pages = v.data_pages;
  out.pages_with_garbage = v.garbage_pages;
  out.swept_pages = v.swept_pages;
  return out;
}

}  // namespace ember::db
