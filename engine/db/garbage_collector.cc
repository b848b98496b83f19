// The background garbage collector's thread (GarbageCollector): it collects the pages
// committed transactions changed, through DatabaseImpl::CollectRecords (database_gc.cc).
#include "engine/db/garbage_collector.h"

#include <algorithm>
#include <chrono>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "engine/blob/blob_format.h"
#include "engine/db/database_impl.h"
#include "engine/record/record_format.h"

namespace ember::db {

using internal::IndexState;
using internal::TableState;

GarbageCollector::GarbageCollector(DatabaseImpl* db) : db_(db) {
  thread_ = std::thread([this] { Loop(); });
}

GarbageCollector::~GarbageCollector() { Stop(); }

void GarbageCollector::Stop() {
  {
    util::MutexLock g(mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void GarbageCollector::Notify(const std::vector<std::pair<uint32_t, uint32_t>>& pages,
                              uint64_t cn) {
  if (pages.empty()) return;
  {
    util::MutexLock g(mu_);
    for (const auto& p : pages) {
      uint64_t& at = queue_[p];
      at = std::max(at, cn);
    }
  }
  cv_.NotifyOne();
}

size_t GarbageCollector::queued() const {
  util::MutexLock g(mu_);
  return queue_.size() + in_round_;
}

void GarbageCollector::KeepUnfreed(uint32_t table, std::vector<record::Unlinked>* unlinked) {
  if (unlinked->empty()) return;
  util::MutexLock g(mu_);
  auto& left = unfreed_[table];
  left.insert(left.end(), unlinked->begin(), unlinked->end());
  unlinked->clear();
}

absl::Status GarbageCollector::RunOnce() {
  std::lock_guard<std::mutex> run(run_mu_);
  const uint64_t horizon = db_->GcHorizon();
  std::vector<std::pair<std::pair<uint32_t, uint32_t>, uint64_t>> ready;  // (page, its CN)
  std::map<uint32_t, std::vector<record::Unlinked>> unfreed;
  {
    util::MutexLock g(mu_);
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (it->second <= horizon) {
        ready.emplace_back(*it);
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    unfreed.swap(unfreed_);
    in_round_ = ready.size();
  }
  absl::Status first;
  // A page (or a batch of lines) that failed goes back to be retried by a later round: its
  // garbage is still there (or still to free), and nothing else would find it again.
  std::vector<std::pair<std::pair<uint32_t, uint32_t>, uint64_t>> retry;
  auto failed = [&](const absl::Status& s) {
    db_->background_errors()->Add(s);
    if (first.ok()) first = s;
  };
  // Lines an earlier round unlinked but could not free.
  for (auto& [table, lines] : unfreed) {
    TableState* t = db_->TableById(table);
    if (t == nullptr) continue;  // dropped meanwhile
    if (absl::Status s = db_->FreeCollected(t, &lines, /*when_written=*/true); !s.ok()) {
      failed(s);
      KeepUnfreed(table, &lines);
    }
  }
  std::vector<record::Unlinked> unlinked;
  TableState* cur = nullptr;
  auto flush = [&]() {
    // With what earlier rounds left waiting: each line goes once the pages that pointed at it
    // are on disk without the pointer, which no write of this round forces.
    if (cur) cur->relation->TakeLater(&unlinked);
    if (cur && !unlinked.empty()) {
      if (absl::Status s = db_->FreeCollected(cur, &unlinked, /*when_written=*/true); !s.ok()) {
        failed(s);
        KeepUnfreed(cur->id, &unlinked);
      }
      unlinked.clear();
    }
  };
  std::vector<uint64_t> recs;
  for (const auto& entry : ready) {
    const auto [table, seq] = entry.first;
    TableState* t = db_->TableById(table);
    if (t == nullptr) continue;  // dropped meanwhile
    if (t != cur) {
      flush();
      cur = t;
    }
    recs.clear();
    absl::Status s = t->relation->ListCollectable(seq, &recs);
    bool busy = false;
    if (s.ok()) s = db_->CollectRecords(t, recs, &unlinked, nullptr, &busy);
    if (busy) retry.push_back(entry);  // an index of the table is being built
    if (!s.ok()) {
      failed(absl::Status(s.code(), absl::StrCat("garbage collection of table ", t->schema.name,
                                                 " data page ", seq, ": ", s.message())));
      retry.push_back(entry);
    }
    if (unlinked.size() >= 4096) flush();
  }
  flush();
  util::MutexLock g(mu_);
  for (const auto& [page, cn] : retry) {
    uint64_t& at = queue_[page];
    at = std::max(at, cn);
  }
  in_round_ = 0;
  return first;
}

void GarbageCollector::Loop() {
  util::MutexLock g(mu_);
  while (!stop_) {
    // Wake on notification, and now and then for pages waiting for the horizon to move (and
    // for pages and lines a failed round left to retry).
    cv_.WaitFor(g, std::chrono::milliseconds(200));
    if (stop_ || (queue_.empty() && unfreed_.empty())) continue;
    g.Unlock();
    (void)RunOnce();  // its errors went to the database's BackgroundErrors
    g.Lock();
  }
}

// ---------------------------------------------------------------- DatabaseImpl

}  // namespace ember::db
