// TransactionImpl's end: Commit and Rollback, and what only they do - freeing the stored BLOBs
// the transaction's versions stopped naming (FreeDroppedBlobs) and handing the pages where it
// left garbage to the background collector (HandPagesToCollector). Statements, savepoints and
// the undo log's rollback are in transaction_savepoints.cc.
#include <algorithm>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "engine/db/garbage_collector.h"
#include "engine/db/transaction_impl.h"

namespace ember::db {

using internal::TableState;

absl::Status TransactionImpl::FreeDroppedBlobs() {
  if (dropped_blobs_.empty()) return absl::OkStatus();
  std::vector<DroppedBlob> dropped = std::move(dropped_blobs_);
  dropped_blobs_.clear();
  std::sort(dropped.begin(), dropped.end());  // by table, then record
  dropped.erase(std::unique(dropped.begin(), dropped.end()), dropped.end());
  util::ReaderLock cat(db_->catalog_mu_);
  absl::Status result;
  TableState* t = nullptr;
  std::vector<record::Unlinked> unlinked;  // of table t
  auto flush = [&] {
    if (t && !unlinked.empty()) result.Update(t->relation->FreeUnlinked(&unlinked, id_));
    unlinked.clear();
  };
  for (size_t i = 0, next; i < dropped.size(); i = next) {
    const uint32_t table = dropped[i].table;
    const uint64_t rec = dropped[i].rec;
    next = i;
    while (next < dropped.size() && dropped[next].table == table && dropped[next].rec == rec) {
      ++next;
    }
    if (!t || t->id != table) {
      flush();
      t = db_->TableByIdLocked(table);
    }
    if (!t) continue;
    // Every version still in the chain keeps its BLOBs (the collector or an undo frees those
    // with the version); ours still head the chain, or the chain is back to what the
    // transaction found, whose versions our horizon keeps from the collector.
    absl::flat_hash_set<uint64_t> named;
    std::lock_guard<std::mutex> g(db_->RecordMutex(table, rec));
    absl::Status bad;
    std::pair<page::PageNo, uint16_t> at;
    absl::Status s = t->relation->ForEachVersion(
        rec,
        [&](uint64_t, bool deleted, std::string_view raw) {
          if (!deleted) bad = t->AddBlobIds(raw, &named);
          return bad.ok();
        },
        &at);
    absl::StatusOr<page::PageNo> page = t->relation->RecordPage(rec);
    if (!bad.ok()) {  // which BLOBs the chain still names is unknown: free none of them
      result.Update(internal::UndecodableVersion(*t, rec, at, bad));
      continue;
    }
    if (!s.ok() && !absl::IsNotFound(s)) {
      result.Update(s);
      continue;
    }
    if (!page.ok()) {
      if (!absl::IsNotFound(page.status())) result.Update(page.status());
      continue;
    }
    for (size_t k = i; k < next; ++k) {
      const uint64_t id = dropped[k].blob;
      if (named.contains(id) || undone_blobs_.contains(id)) continue;
      record::Unlinked u;
      u.from = *page;  // the record's page on disk must stop naming it first
      u.blob = id;
      unlinked.push_back(u);
    }
  }
  flush();
  undone_blobs_.clear();
  return result;
}

void TransactionImpl::HandPagesToCollector(uint64_t cn, bool dead) {
  if (dead) {
    pages_.insert(insert_pages_.begin(), insert_pages_.end());
  }
  insert_pages_.clear();
  if (pages_.empty() || !db_->gc()) return;
  std::vector<std::pair<uint32_t, uint32_t>> pages(pages_.begin(), pages_.end());
  db_->gc()->Notify(pages, cn);
  pages_.clear();
}

absl::Status TransactionImpl::Commit() {
  Statement stmt(this);
  if (absl::Status s = CheckActive(); !s.ok()) return s;
  // The cleanup runs before the commit point (FreeDroppedBlobs needs our versions to still
  // hold their records). Its failure leaves only unreferenced pages behind, so the commit goes
  // ahead; a committed transaction must not look like a failed one (transaction.h).
  absl::Status cleanup = EndBlobs();
  cleanup.Update(FreeDroppedBlobs());
  absl::Status s = wrote_ ? db_->txns_->Commit(id_) : db_->txns_->CommitNoWrites(id_);
  state_ = s.ok() ? State::kCommitted : State::kFailed;
  db_->ReturnUndoLog(std::move(undo_));
  if (!s.ok()) {
    if (cleanup.ok()) return s;
    return absl::Status(s.code(), absl::StrCat(s.message(), " (its cleanup before the commit ",
                                               "failed too: ", cleanup.message(), ")"));
  }
  HandPagesToCollector(db_->txns_->StateOf(id_), /*dead=*/false);
  ReleaseTables();
  // The commit wrote every page that pointed at the deferred lines: no write is forced here.
  cleanup.Update(FreeDeferred(cache::kNoOwnerMark));
  db_->AfterTransactionEnd();
  if (!cleanup.ok()) {
    db_->background_errors()->Add(absl::Status(
        cleanup.code(),
        absl::StrCat("transaction ", id_, " committed, but its cleanup failed ",
                     "(pages it could not free stay allocated): ", cleanup.message())));
  }
  return absl::OkStatus();
}

absl::Status TransactionImpl::Rollback() {
  Statement stmt(this);
  if (state_ != State::kActive && state_ != State::kFailed) {
    return absl::FailedPreconditionError(absl::StrCat("transaction ", id_, " is not active"));
  }
  const bool failed = state_ == State::kFailed;
  state_ = State::kRolledBack;
  // Whatever the outcome, nothing of ours is left for a drop of these tables to wait for.
  absl::Cleanup release = [this] {
    ReleaseTables();
    if (db_->open_.load()) db_->AfterTransactionEnd();
  };
  if (!db_->open_.load()) return absl::OkStatus();  // dead after the next open anyway
  absl::Status cleanup = EndBlobs();
  // The rollback's own outcome `s`, then the cleanup's error, which does not undo it.
  auto result = [&](absl::Status s) {
    if (!s.ok() || cleanup.ok()) return s;
    return absl::Status(
        cleanup.code(),
        absl::StrCat("rollback of transaction ", id_, " is done, but its cleanup ",
                     "failed (pages it could not free stay allocated): ", cleanup.message()));
  };
  if (!wrote_) {  // nothing to undo
    db_->ReturnUndoLog(std::move(undo_));
    return result(db_->txns_->CommitNoWrites(id_, false));
  }
  absl::Status undo_error;
  if (undo_ && !failed) {
    // Undo everything; then nothing of ours is left, and the transaction can count as
    // committed (empty), so it does not stay "interesting" (OIT) until a sweep.
    absl::Status s;
    ending_ = true;
    while (s.ok() && undo_->depth() > 0) s = RollbackTop();
    db_->ReturnUndoLog(std::move(undo_));
    if (s.ok()) {
      cleanup.Update(FreeDroppedBlobs());  // as in Commit
      s = db_->txns_->Commit(id_, /*counted=*/false);
    }
    if (s.ok()) {
      cleanup.Update(FreeDeferred(cache::kNoOwnerMark));
      return result(s);
    }
    undo_error = std::move(s);
  }
  db_->ReturnUndoLog(std::move(undo_));
  cleanup.Update(FreeDroppedBlobs());  // our dead versions still head their chains
  absl::Status s = db_->txns_->MarkDead(id_);
  HandPagesToCollector(0, /*dead=*/true);  // dead versions are garbage at once
  // The pages that stopped naming the deferred lines were not written (no commit): freeing
  // the lines here would force them out. The collection of our dead versions frees them.
  FreeDeferredLater();
  if (undo_error.ok()) return result(s);
  // The rollback's outcome holds (a dead transaction's versions are invisible) but the caller
  // must hear why the undo failed: it is an I/O error or damage the database has.
  return absl::Status(
      undo_error.code(),
      absl::StrCat(
          "rollback of transaction ", id_, ": undoing its changes failed (", undo_error.message(),
          "); ",
          s.ok() ? "it was marked dead instead, so none of its changes are visible"
                 : absl::StrCat("marking it dead failed too: ", s.message()),
          cleanup.ok() ? "" : absl::StrCat("; its cleanup failed too: ", cleanup.message())));
}

}  // namespace ember::db
