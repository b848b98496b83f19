// The sort of an index build: entries (key bytes in memcmp order, a 64-bit value) gathered by
// several workers, each into its own RunBuilder, and merged by key ranges in parallel.
//
// A RunBuilder keeps entries in an arena with an array of 16-byte records {the key's first 8
// bytes as a big-endian integer, the entry's offset and length}, sorted on the integer first
// and on the rest of the key only for equal prefixes (prefix-normalised keys: no std::string
// is compared or moved). When its memory (arena plus record array, counted as the sort holds
// it) would pass its limit, it sorts what it has and writes it to temp space as a run, so a
// build's memory stays within sort_memory_limit and the RAM-disk/disk switch of the temp space
// applies to sorts. Keys are unique within a build (an index entry carries its record number).
//
// A Merger merges every run of every builder: Splitters cuts the key space into ranges holding
// about equal numbers of entries (from samples of each run), and MergeRange streams one range
// in order; calls for different ranges may run at once (each reads the runs on its own,
// spilled runs in blocks).
#pragma once
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "engine/io/temp_space.h"
#include "engine/util/large_alloc.h"

namespace ember::sort {

struct SortStats {
  uint64_t entries = 0;
  uint64_t runs = 0;          // sorted runs, in memory and spilled
  uint64_t spilled_runs = 0;
  uint64_t spill_bytes = 0;   // bytes of runs written to temp space
  uint64_t peak_memory = 0;   // the builders' peaks, added up
};

class RunBuilder {
 public:
  // `temp` null: never spills (the limit is not enforced).
  RunBuilder(io::TempSpace* temp, uint64_t memory_limit);
  ~RunBuilder();  // gives its temp space back
  RunBuilder(const RunBuilder&) = delete;
  RunBuilder& operator=(const RunBuilder&) = delete;

  // Adds an entry (key at most 64 KB). May sort and spill a run first.
  absl::Status Add(std::string_view key, uint64_t value);
  // Sorts what is still in memory (it stays there as the last run). Call once, after the Adds.
  absl::Status Finish();
  SortStats stats() const;

  // The run kept in memory once Finished, in order (for the merge).
  size_t memory_entries() const { return recs_.size(); }
  std::string_view key_at(size_t i) const { return KeyOf(recs_[i]); }
  uint64_t value_at(size_t i) const { return ValueOf(recs_[i]); }

 private:
  friend class Merger;
  struct Rec {
    uint64_t prefix;  // the key's first 8 bytes, big-endian, zero-padded
    uint32_t off;     // in arena_: u16 key length, key, u64 value
    uint32_t len;     // key length
  };
  struct SpilledRun {
    uint64_t extent = 0;  // TempSpace offset
    uint64_t bytes = 0;
    uint64_t entries = 0;
    // Every sample_every-th entry: its key and byte offset in the run (seeks and splitters).
    uint64_t sample_every = 1;
    std::vector<std::pair<std::string, uint64_t>> samples;
  };
  void SortRecs();
  absl::Status Spill();
  uint64_t Memory() const;
  std::string_view KeyOf(const Rec& r) const {
    return std::string_view(arena_.data() + r.off + 2, r.len);
  }
  uint64_t ValueOf(const Rec& r) const {
    uint64_t v;
    std::memcpy(&v, arena_.data() + r.off + 2 + r.len, 8);
    return v;
  }

  io::TempSpace* temp_;
  const uint64_t limit_;
  // Huge-page mappings (util/large_alloc.h): filled once, fast, by a build.
  std::vector<char, util::LargeAllocator<char>> arena_;
  std::vector<Rec, util::LargeAllocator<Rec>> recs_;
  std::vector<SpilledRun> spilled_;
  SortStats stats_;
  bool finished_ = false;
};

class Merger {
 public:
  // Over the runs of `builders` (each Finished), which must outlive the Merger.
  explicit Merger(std::vector<RunBuilder*> builders);
  // Up to parts - 1 increasing keys cutting the entries into ranges of about equal size.
  std::vector<std::string> Splitters(int parts) const;
  using EmitFn = std::function<absl::Status(std::string_view key, uint64_t value)>;
  // Streams the entries with lo <= key < hi in key order (lo empty: from the first; hi empty:
  // to the last); stops at emit's first error, which it returns.
  absl::Status MergeRange(std::string_view lo, std::string_view hi, const EmitFn& emit) const;
  SortStats stats() const;

 private:
  std::vector<RunBuilder*> builders_;
};

}  // namespace ember::sort
