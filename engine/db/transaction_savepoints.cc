// TransactionImpl: statements, savepoints and rolling back through the undo log (see
// transaction_impl.h and engine/txn/undo_log.h); the end of a transaction is in
// commit_rollback.cc.
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "engine/db/transaction_impl.h"
#include "engine/page/data_page.h"
#include "engine/record/record_format.h"

namespace ember::db {

using internal::IndexState;
using internal::TableState;

absl::Status TransactionImpl::Doom(const absl::Status& cause) {
  if (state_ == State::kActive) state_ = State::kFailed;
  if (doomed_.empty()) doomed_ = cause.ToString();
  return absl::FailedPreconditionError(
      absl::StrCat("transaction ", id_, " is doomed and can only be rolled back: ", doomed_));
}

absl::Status TransactionImpl::ApplyUndo(TableState* t, uint64_t rec, txn::UndoKind kind,
                                        const std::string& before,
                                        std::vector<record::Unlinked>* unlinked) {
  std::string removed;
  if (kind == txn::UndoKind::kRemoveHead) {
    if (absl::Status s = t->relation->Backout(rec, id_, id_, unlinked, &removed); !s.ok()) {
      return s;
    }
  } else {
    absl::StatusOr<record::WriteOutcome> w =
        t->relation->Write(rec, id_, View(), /*read_committed=*/true, &before, {}, /*undo=*/true);
    if (!w.ok()) return w.status();
    if (w->code != record::WriteOutcome::kDone || !w->old_was_own) {
      return absl::InternalError(absl::StrCat("undo: table ", t->schema.name, " record ", rec,
                                              " is not this transaction's any more"));
    }
    removed = std::move(w->old_body);
    if (w->unlinked_fragments) unlinked->push_back(*w->unlinked_fragments);
    // The restored version's keys may have lost their entries when it was overwritten.
    Row row;
    if (!t->indexes.empty() && record::DecodeRow(before, t->schema.columns.size(), &row).ok()) {
      bool changed;
      absl::StatusOr<std::vector<IndexState*>> u = AddKeys(t, rec, row, &removed, &changed);
      if (!u.ok()) return u.status();
    }
  }
  if (removed.empty()) return absl::OkStatus();
  if (t->names_blobs()) {
    if (absl::Status s = QueueUndoneBlobs(t, rec, removed, unlinked); !s.ok()) {
      return s;
    }
  }
  if (t->indexes.empty()) return absl::OkStatus();
  return db_->DropKeys(t, rec, {removed}, nullptr, id_);
}

absl::Status TransactionImpl::QueueUndoneBlobs(TableState* t, uint64_t rec,
                                               const std::string& removed,
                                               std::vector<record::Unlinked>* unlinked) {
  // BLOBs only the removed version named go once the record's page is written. What stays:
  // every version left in the chain (the restored one included), not just the newest: a
  // read-committed writer that waited may have kept a BLOB of a version under a newer one.
  std::vector<std::string> staying;
  absl::Status s =
      t->relation->ForEachVersion(rec, [&](uint64_t, bool deleted, std::string_view raw) {
        if (!deleted) staying.emplace_back(raw);
        return true;
      });
  if (!s.ok() && !absl::IsNotFound(s)) return s;
  absl::StatusOr<page::PageNo> p = t->relation->RecordPage(rec);
  if (!p.ok()) return absl::OkStatus();
  const size_t first = unlinked->size();
  s = db_->QueueBlobFrees(t, rec, {removed}, staying, *p, page::kNoPage, unlinked);
  if (!s.ok()) return s;
  if (!dropped_blobs_.empty()) {  // FreeDroppedBlobs must not free these a second time
    for (size_t i = first; i < unlinked->size(); ++i) undone_blobs_.insert((*unlinked)[i].blob);
  }
  return absl::OkStatus();
}

void TransactionImpl::NoteDroppedBlobs(TableState* t, uint64_t rec, const std::string& gone,
                                       const std::string* replacing) {
  if (gone.empty() || !t->names_blobs()) return;
  absl::flat_hash_set<uint64_t> ids;
  // `gone` was the record's version a moment ago and `replacing` was just encoded: if one does
  // not decode, FreeDroppedBlobs's walk of the chain reports it at the transaction's end.
  if (!t->AddBlobIds(gone, &ids).ok() || ids.empty()) return;
  absl::flat_hash_set<uint64_t> kept;
  if (replacing && !t->AddBlobIds(*replacing, &kept).ok()) return;
  for (uint64_t id : ids) {
    if (!kept.contains(id)) dropped_blobs_.push_back({t->id, rec, id});
  }
}

absl::Status TransactionImpl::RollbackTop() {
  absl::StatusOr<txn::UndoActions> acts = undo_->PopForRollback();
  if (!acts.ok()) return acts.status();
  util::ReaderLock cat(db_->catalog_mu_);
  std::vector<record::Unlinked> unlinked;
  // The actions come in two sweeps in record order (removals, then restores), so the data pages
  // they touch ascend within a sweep: read them ahead as a scan does, a run per read. Without
  // it, undoing a mass update reads its pages one miss at a time.
  uint32_t ahead_until = 0, last_seq = 0;
  // By runs of actions on one table, under that table's rows lock: one table's rows lock at a
  // time (no order between tables to keep).
  for (size_t i = 0; i < acts->size();) {
    const uint32_t table = (*acts)[i].key.table;
    TableState* cur = db_->TableByIdLocked(table);
    if (cur == nullptr) return absl::InternalError(absl::StrCat("undo: no table with id ", table));
    util::ReaderLock rows(cur->rows_mu);
    ahead_until = 0;
    for (; i < acts->size() && (*acts)[i].key.table == table; ++i) {
      const txn::UndoAction& a = (*acts)[i];
      const uint32_t seq = page::RecordDpSequence(a.key.rec);
      if (seq < last_seq) ahead_until = 0;  // the next sweep
      last_seq = seq;
      if (seq >= ahead_until) {
        cur->relation->PrefetchPages(seq, internal::kReadAhead);
        ahead_until = seq + internal::kReadAhead;
      }
      std::lock_guard<std::mutex> g(db_->RecordMutex(a.key.table, a.key.rec));
      if (absl::Status s = ApplyUndo(cur, a.key.rec, a.kind, a.before, &unlinked); !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = DeferFrees(cur, &unlinked); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status TransactionImpl::DeferFrees(TableState* t, std::vector<record::Unlinked>* unlinked) {
  std::vector<record::Unlinked> blobs;
  for (const record::Unlinked& u : *unlinked) {
    if (u.blob != 0) {
      blobs.push_back(u);
    } else {
      deferred_frees_.emplace_back(t, u);
    }
  }
  unlinked->clear();
  absl::Status s;
  if (!blobs.empty()) s = t->relation->FreeUnlinked(&blobs, id_);
  if (deferred_frees_.size() >= kMaxDeferredFrees && !ending_) s.Update(FreeDeferred(id_));
  return s;
}

absl::Status TransactionImpl::FreeDeferred(uint64_t mark_txn) {
  if (deferred_frees_.empty()) return absl::OkStatus();
  std::vector<std::pair<TableState*, record::Unlinked>> all = std::move(deferred_frees_);
  deferred_frees_.clear();
  std::stable_sort(all.begin(), all.end(),
                   [](const auto& a, const auto& b) { return a.first->id < b.first->id; });
  absl::Status result;
  for (size_t i = 0, next; i < all.size(); i = next) {
    std::vector<record::Unlinked> group;
    for (next = i; next < all.size() && all[next].first == all[i].first; ++next) {
      group.push_back(all[next].second);
    }
    // A line not freed stays unreachable: room lost, nothing wrong (Validate ignores it).
    result.Update(all[i].first->relation->FreeUnlinked(&group, mark_txn));
  }
  return result;
}

void TransactionImpl::FreeDeferredLater() {
  std::map<TableState*, std::vector<record::Unlinked>> by_table;
  for (const auto& [t, u] : deferred_frees_) by_table[t].push_back(u);
  deferred_frees_.clear();
  for (auto& [t, lines] : by_table) t->relation->FreeLater(&lines);
}

absl::Status TransactionImpl::RunStatement(const std::function<absl::Status()>& body) {
  if (absl::Status s = CheckActive(); !s.ok()) return s;
  Statement stmt(this);
  if (!undo_) {
    const uint64_t before = changes_;
    absl::Status s = body();
    if (!s.ok() && changes_ != before && state_ == State::kActive) {
      return Doom(absl::Status(s.code(), absl::StrCat("a statement failed after changing rows "
                                                      "without an undo log (no_savepoint): ",
                                                      s.message())));
    }
    return s;
  }
  undo_->Push(std::string());
  const size_t depth = undo_->depth();
  absl::Status s = body();
  if (state_ != State::kActive) {
    return s.ok() ? absl::FailedPreconditionError(
                        absl::StrCat("transaction ", id_, " ended inside its statement"))
                  : s;
  }
  if (undo_->depth() < depth) {
    return Doom(absl::FailedPreconditionError(
        "a savepoint made before the statement was released or rolled back inside it"));
  }
  // Savepoints the body made and left open belong to the statement.
  while (undo_->depth() > depth) undo_->ReleaseTop();
  if (s.ok()) {
    undo_->ReleaseTop();
    return absl::OkStatus();
  }
  if (absl::Status u = RollbackTop(); !u.ok()) return Doom(u);
  return s;
}

absl::Status TransactionImpl::Savepoint(std::string_view name) {
  if (absl::Status s = CheckActive(); !s.ok()) return s;
  if (!undo_) return absl::FailedPreconditionError("savepoints need an undo log (no_savepoint)");
  if (name.empty()) return absl::InvalidArgumentError("a savepoint needs a name");
  // An older savepoint of the same name stops being addressable: it is as if released, and its
  // changes stay with whatever encloses it, which is what an unnamed level gives.
  if (int old = undo_->Find(name); old >= 0) undo_->Rename(static_cast<size_t>(old), std::string());
  undo_->Push(std::string(name));
  return absl::OkStatus();
}

absl::Status TransactionImpl::ReleaseSavepoint(std::string_view name) {
  if (absl::Status s = CheckActive(); !s.ok()) return s;
  if (!undo_) return absl::FailedPreconditionError("savepoints need an undo log (no_savepoint)");
  const int level = undo_->Find(name);
  if (level < 0) return absl::NotFoundError(absl::StrCat("no savepoint named ", std::string(name)));
  while (undo_->depth() > static_cast<size_t>(level)) undo_->ReleaseTop();
  return absl::OkStatus();
}

absl::Status TransactionImpl::RollbackToSavepoint(std::string_view name) {
  Statement stmt(this);
  if (absl::Status s = CheckActive(); !s.ok()) return s;
  if (!undo_) return absl::FailedPreconditionError("savepoints need an undo log (no_savepoint)");
  const int level = undo_->Find(name);
  if (level < 0) return absl::NotFoundError(absl::StrCat("no savepoint named ", std::string(name)));
  while (undo_->depth() > static_cast<size_t>(level)) {
    if (absl::Status s = RollbackTop(); !s.ok()) return Doom(s);
  }
  undo_->Push(std::string(name));  // the savepoint stays, empty
  return absl::OkStatus();
}

UndoLogStats TransactionImpl::undo_stats() const { return undo_ ? undo_->stats() : UndoLogStats{}; }

}  // namespace ember::db
