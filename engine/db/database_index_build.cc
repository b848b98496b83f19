// DatabaseImpl::BuildIndex: the bulk build of an index over a populated table, every stage on
// the database's workers (engine/worker):
// - scan: the table's data page sequences, cut into chunks many more than the workers and
//   claimed as they go, each worker extracting (entry, flag) for every key of every non-dead
//   version (exactly what the incremental path inserts) into its own sorter (engine/sort),
//   which spills sorted runs to temp space past its share of sort_memory_limit;
// - sort: each worker sorts what it holds;
// - merge: the entries are cut into as many key ranges as workers by splitters sampled from the
//   runs, and each worker merges its range from every run, writing the range's leaves as the
//   entries come (index::BulkBuild);
// - finish: the ranges are stitched together and the levels above built.
// A unique index is checked on the merged stream: two records whose newest live versions have
// the same key (no column NULL). The caller holds the table's rows lock exclusively (no change
// of the table runs meanwhile) and publishes the index when this returns OK; on an error
// nothing of the build is left (its pages are freed).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "engine/db/database_impl.h"
#include "engine/index/btree_build.h"
#include "engine/record/record_format.h"
#include "engine/sort/key_sorter.h"
#include "engine/worker/worker_pool.h"

namespace ember::db {

using internal::IndexState;
using internal::TableState;

namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The sort's value of an entry: bit 0 set for the key of a record's newest live version when
// no key column is NULL (the key a unique index must not see twice), and from bit 1 on the
// length of the key part (the entry without its record number), which the merge needs.
constexpr uint64_t kUniqueKey = 1;
// The least sort memory a build's worker gets (Options::sort_memory_limit's minimum, too):
// less would spill runs of a few hundred entries each.
constexpr uint64_t kMinSortShare = uint64_t{64} << 10;
constexpr int kKeyLenShift = 1;

// What the merge of one key range saw, for the checks across ranges.
struct RangeSummary {
  uint64_t entries = 0;
  uint64_t distinct = 0;     // key changes within the range (its first key counts)
  std::string first_key;     // key part of its first entry
  std::string last_key;      // and of its last
  std::string first_unique;  // key part of its first kUniqueKey entry (with has_unique)
  std::string last_unique;
  bool has_unique = false;
};

// A version whose key the tree cannot take (Database::max_key_size): rows written before the
// index existed were not checked against it. Only a rolled-back version may be left out of the
// index; any other could be read through it by some snapshot, so the build is refused.
absl::Status KeyTooLong(const IndexState& ix, uint64_t rec, uint32_t max) {
  return absl::InvalidArgumentError(
      absl::StrCat("index ", ix.schema.name, ": record ", rec, " of table ", ix.table->schema.name,
                   " has a key longer than the maximum of ", max,
                   " bytes (Database::max_key_size; versions not collected yet count too)"));
}

// Whether the key of stored row `row` is over `max` bytes (`key` its encoding). A string or
// bytes value stored out of line decodes as the id of its BLOB, which would encode short; it
// is longer than record::SpillThreshold, itself above every page size's longest key.
bool KeyOverMax(const IndexState& ix, const Row& row, const std::string& key, uint32_t max) {
  if (key.size() > max) return true;
  for (size_t c : ix.key_columns) {
    const ColumnType type = ix.table->schema.columns[c].type;
    if ((type == ColumnType::kString || type == ColumnType::kBytes) &&
        std::holds_alternative<BlobId>(row[c])) {
      return true;
    }
  }
  return false;
}

// One work item of the scan: every key of every non-dead version of the records on data page
// sequences [first, end) into the worker's sorter, as (entry, flag) with kUniqueKey and the key
// length (exactly what the incremental path inserts).
class KeyScanner {
 public:
  KeyScanner(const IndexState& ix, txn::TxnManager* txns, uint32_t max_key, sort::RunBuilder* out)
      : ix_(ix),
        t_(*ix.table),
        txns_(txns),
        max_key_(max_key),
        out_(out),
        ncols_(ix.table->schema.columns.size()) {}

  absl::Status Scan(uint32_t first, uint32_t end, const worker::TaskContext& ctx) {
    record::Relation* rel = t_.relation.get();
    rel->PrefetchPages(first, end - first);
    for (uint32_t seq = first; seq < end && !ctx.cancelled(); ++seq) {
      absl::Status vs = rel->ForEachVersionOnPage(
          seq,
          [this](uint64_t rec, uint64_t writer, bool deleted, std::string_view raw) {
            return Version(rec, writer, deleted, raw);
          },
          &at_);
      if (!bad_.ok()) return bad_;
      if (!vs.ok()) return vs;
    }
    return Flush();
  }

 private:
  // False (bad_ set) to stop the walk.
  bool Version(uint64_t rec, uint64_t writer, bool deleted, std::string_view raw) {
    if (rec != cur_) {
      if (bad_ = Flush(); !bad_.ok()) return false;
      cur_ = rec;
      newest_seen_ = false;
    }
    const bool live = txns_->StateOf(writer) != txn::kCnDead;
    if (!deleted) {
      // An index without this version's key would be silently incomplete: refuse.
      if (absl::Status ds = record::DecodeRow(raw, ncols_, &row_); !ds.ok()) {
        bad_ = internal::UndecodableVersion(t_, rec, at_, ds);
        return false;
      }
      if (nkeys_ == keys_.size()) keys_.emplace_back();
      std::string& entry = keys_[nkeys_].first;
      const bool has_null = internal::EncodeIndexKey(ix_, row_, &entry);
      const uint64_t key_len = entry.size();
      if (KeyOverMax(ix_, row_, entry, max_key_)) {
        if (!live) return true;  // rolled back: nobody reads it, so it needs no entry
        bad_ = KeyTooLong(ix_, rec, max_key_);
        return false;
      }
      internal::AppendRecordNumber(rec, &entry);
      keys_[nkeys_].second =
          key_len << kKeyLenShift | (live && !newest_seen_ && !has_null ? kUniqueKey : 0);
      ++nkeys_;
    }
    if (live) newest_seen_ = true;
    return true;
  }

  // The record's entries to the sorter; versions with the same key make one entry (with the
  // flag of any).
  absl::Status Flush() {
    if (nkeys_ > 1) std::sort(keys_.begin(), keys_.begin() + static_cast<ptrdiff_t>(nkeys_));
    for (size_t i = 0; i < nkeys_; ++i) {
      uint64_t v = keys_[i].second;
      while (i + 1 < nkeys_ && keys_[i + 1].first == keys_[i].first) v |= keys_[++i].second;
      if (absl::Status as = out_->Add(keys_[i].first, v); !as.ok()) return as;
    }
    nkeys_ = 0;
    return absl::OkStatus();
  }

  const IndexState& ix_;
  const TableState& t_;
  txn::TxnManager* txns_;
  const uint32_t max_key_;
  sort::RunBuilder* out_;
  const size_t ncols_;
  // The entries of the record being read: keys_[0, nkeys_), buffers kept from record to record.
  std::vector<std::pair<std::string, uint64_t>> keys_;
  size_t nkeys_ = 0;
  uint64_t cur_ = ~uint64_t{0};  // no record yet
  bool newest_seen_ = false;
  Row row_;
  std::pair<page::PageNo, uint16_t> at_;  // where the version being read is
  absl::Status bad_;
};

// The merge of key range `r` of `ranges` into the range's leaves, summarised for the checks
// across ranges; a unique index's duplicate inside the range fails it.
absl::Status MergeRange(const IndexState& ix, sort::Merger& merger,
                        const std::vector<sort::SplitPoint>& splitters, size_t r,
                        index::BulkBuild& bulk, const worker::TaskContext& ctx, RangeSummary& sum) {
  const sort::SplitPoint* lo = r == 0 ? nullptr : &splitters[r - 1];
  const sort::SplitPoint* hi = r == splitters.size() ? nullptr : &splitters[r];
  return merger.MergeRange(lo, hi, [&](std::string_view entry, uint64_t flag) -> absl::Status {
    if ((sum.entries & 0xFFF) == 0 && ctx.cancelled()) {
      return absl::CancelledError("index build cancelled");
    }
    const std::string_view key = entry.substr(0, flag >> kKeyLenShift);
    if (sum.entries == 0) {
      sum.first_key.assign(key);
      sum.distinct = 1;
    } else if (key != sum.last_key) {
      ++sum.distinct;
    }
    if (flag & kUniqueKey) {
      if (!sum.has_unique) {
        sum.has_unique = true;
        sum.first_unique.assign(key);
      } else if (ix.schema.unique && key == sum.last_unique) {
        return internal::DuplicateKeyError(ix, key);
      }
      sum.last_unique.assign(key);
    }
    sum.last_key.assign(key);
    ++sum.entries;
    return bulk.Add(static_cast<int>(r), entry, 0);
  });
}

// Across ranges: a key can straddle a splitter. The stream is sorted, so two kUniqueKey
// entries with the same key, one on each side, have only that key between them. Counts the
// entries and distinct keys of all ranges.
absl::Status JoinRanges(const IndexState& ix, const std::vector<RangeSummary>& sums,
                        uint64_t* entries, uint64_t* distinct) {
  std::string_view prev_unique, prev_key;
  bool have_unique = false, have_key = false;
  for (const RangeSummary& sum : sums) {
    if (sum.entries == 0) continue;
    *entries += sum.entries;
    *distinct += sum.distinct - (have_key && sum.first_key == prev_key ? 1 : 0);
    if (ix.schema.unique && have_unique && sum.has_unique && sum.first_unique == prev_unique) {
      return internal::DuplicateKeyError(ix, prev_unique);
    }
    if (sum.has_unique) {
      prev_unique = sum.last_unique;
      have_unique = true;
    }
    prev_key = sum.last_key;
    have_key = true;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DatabaseImpl::BuildIndex(TableState* t, IndexState* ix, uint64_t txn,
                                      const IndexBuildOptions& opt, IndexStats* stats) {
  // A table whose pages are unknown (a damaged pointer-page chain) gets no index, not an
  // empty one; an empty table needs no build.
  if (const absl::Status& d = t->relation->damage(); !d.ok()) return d;
  if (t->relation->PageSequences() == 0) return absl::OkStatus();
  if (build_hook_) build_hook_();
  if (opt.method == IndexBuildOptions::Method::kInsert) {
    const Clock::time_point t0 = Clock::now();
    absl::Status s = BuildIndexByInserts(ix, txn, stats);
    stats->scan_seconds = Since(t0);
    stats->workers = 1;
    return s;
  }
  const uint32_t nseq = t->relation->PageSequences();
  worker::WorkerPool* pool = workers();
  // sort_memory_limit holds for the workers together: each sorts in an equal share of it, of
  // at least kMinSortShare, so a limit too small for every worker to have one is sorted by
  // fewer workers (limit / kMinSortShare of them, at least one: the limit is never below it).
  const uint64_t max_sorters = std::max<uint64_t>(1, options_.sort_memory_limit / kMinSortShare);
  const int w = static_cast<int>(std::min<uint64_t>(WorkersFor(opt.workers), max_sorters));
  stats->workers = w;
  const uint64_t share = options_.sort_memory_limit / static_cast<uint64_t>(w);

  // --- scan
  Clock::time_point t0 = Clock::now();
  std::vector<std::unique_ptr<sort::RunBuilder>> sorters;
  for (int i = 0; i < w; ++i) {
    sorters.push_back(std::make_unique<sort::RunBuilder>(temp_.get(), share));
  }
  const std::vector<worker::Chunk> chunks =
      worker::CutChunks(std::span<const uint32_t>(&nseq, 1), internal::kReadAhead);
  const uint32_t max_key = max_key_size();
  absl::Status s = pool->Run(w, chunks.size(), [&](size_t i, const worker::TaskContext& ctx) {
    KeyScanner scan(*ix, txns_.get(), max_key, sorters[static_cast<size_t>(ctx.worker)].get());
    return scan.Scan(chunks[i].first, chunks[i].end, ctx);
  });
  stats->scan_seconds = Since(t0);
  if (!s.ok()) return s;

  // --- sort
  t0 = Clock::now();
  s = pool->Run(w, sorters.size(),
                [&](size_t i, const worker::TaskContext&) { return sorters[i]->Finish(); });
  stats->sort_seconds = Since(t0);
  if (!s.ok()) return s;

  // --- merge, writing each range's leaves
  t0 = Clock::now();
  std::vector<sort::RunBuilder*> runs;
  for (auto& b : sorters) runs.push_back(b.get());
  sort::Merger merger(runs);
  const std::vector<sort::SplitPoint> splitters = merger.Splitters(w);
  const size_t ranges = splitters.size() + 1;
  index::BulkBuild bulk(cache_.get(), space_.get(), 0, static_cast<uint16_t>(ix->id), txn,
                        ix->btree()->root(), static_cast<int>(ranges), opt.fill_percent);
  std::vector<RangeSummary> sums(ranges);
  s = pool->Run(w, ranges, [&](size_t r, const worker::TaskContext& ctx) {
    return MergeRange(*ix, merger, splitters, r, bulk, ctx, sums[r]);
  });
  uint64_t entries = 0, distinct = 0;
  if (s.ok()) s = JoinRanges(*ix, sums, &entries, &distinct);
  stats->merge_seconds = Since(t0);

  // --- finish
  t0 = Clock::now();
  if (s.ok()) s = bulk.Complete();
  stats->finish_seconds = Since(t0);
  if (!s.ok()) {
    bulk.Abandon();
    return s;
  }
  const sort::SortStats ss = merger.stats();
  const index::BulkBuildStats bs = bulk.stats();
  stats->built = true;
  stats->entries = entries;
  stats->distinct_keys = distinct;
  stats->leaf_pages = bs.leaf_pages;
  stats->internal_pages = bs.internal_pages;
  stats->depth = static_cast<uint32_t>(bs.depth);
  stats->sort_runs = ss.runs;
  stats->spill_bytes = ss.spill_bytes;
  stats->sort_peak_memory = ss.peak_memory;
  return absl::OkStatus();
}

// The build one entry at a time through the tree, as writes insert them: the baseline of the
// bulk build (IndexBuildOptions::method kInsert), and what the bulk build must match.
absl::Status DatabaseImpl::BuildIndexByInserts(IndexState* ix, uint64_t txn, IndexStats* stats) {
  // An entry for every key any version of any record has (architecture.md, MVCC).
  record::Relation* rel = ix->table->relation.get();
  const size_t ncols = ix->table->schema.columns.size();
  const uint32_t n = rel->PageSequences();
  std::vector<uint64_t> recs;
  absl::flat_hash_map<std::string, uint64_t> unique_keys;  // newest live key -> record
  std::string dup_key;
  bool dup = false;
  const uint32_t max_key = max_key_size();
  absl::Status too_long;
  for (uint32_t seq = 0; seq < n; ++seq) {
    recs.clear();
    if (absl::Status s = rel->ListRecords(seq, &recs); !s.ok()) return s;
    for (uint64_t rec : recs) {
      std::vector<std::string> keys;
      bool newest_seen = false;
      absl::Status bad;
      std::pair<page::PageNo, uint16_t> at;
      absl::Status s = rel->ForEachVersion(
          rec,
          [&](uint64_t writer, bool deleted, std::string_view raw) {
            const bool live = txns_->StateOf(writer) != txn::kCnDead;
            Row row;
            if (!deleted) {
              // An index without this version's key would be silently incomplete: refuse instead.
              bad = record::DecodeRow(raw, ncols, &row);
              if (!bad.ok()) return false;
              std::string key;
              const bool has_null = internal::EncodeIndexKey(*ix, row, &key);
              if (KeyOverMax(*ix, row, key, max_key)) {
                if (!live) return true;  // rolled back: nobody reads it, so it needs no entry
                too_long = KeyTooLong(*ix, rec, max_key);
                return false;
              }
              if (ix->schema.unique && live && !newest_seen && !has_null) {
                if (!unique_keys.emplace(key, rec).second) {
                  dup = true;
                  dup_key = key;
                }
              }
              keys.push_back(std::move(key));
            }
            if (live) newest_seen = true;
            return true;
          },
          &at);
      if (!bad.ok()) return internal::UndecodableVersion(*ix->table, rec, at, bad);
      if (!s.ok()) return s;
      if (!too_long.ok()) return too_long;
      if (dup) {
        return internal::DuplicateKeyError(*ix, dup_key);
      }
      for (const std::string& key : keys) {
        absl::Status is = ix->btree()->Insert(internal::IndexEntry(key, rec), 0, txn);
        if (is.ok()) ++stats->entries;
        if (!is.ok() && !absl::IsAlreadyExists(is)) return is;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace ember::db
