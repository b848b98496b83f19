// The sort of an index build: entries (key bytes in memcmp order, a 64-bit value) gathered by
// several workers, each into its own RunBuilder, then merged by ranges in parallel.
//
// Order: by key, equal keys by value. The output is a total order and equal keys come out
// next to each other, so a caller finds duplicates by comparing neighbours.
//
// A RunBuilder keeps entries in an arena with an array of 16-byte prefix records, sorted by a
// radix sort on the prefixes (prefix_sort.h): no std::string is compared or moved. Its memory
// (the arena's entries plus the records: what a run holds) stays within its limit; when an
// entry would pass it, the builder sorts what it has and writes it to temp space as a run, so
// the RAM-disk/disk switch of the temp space applies to sorts. An index build gives each of
// its W workers sort_memory_limit / W (W at most the limit / 64 KB). Not counted: a spilled run's
// samples (one key every 64-256 entries), a spill's write buffer (up to 1 MB, while it writes) and
// the merge's read buffers (see Merger).
//
// A Merger merges every run of every builder: Splitters cuts the entries into ranges of about
// equal size (from samples of each run; one key's duplicates may be cut between ranges), and
// MergeRange streams one range in order with a loser tree over the runs. Calls for different
// ranges may run at once: each reads the runs on its own, spilled runs in blocks.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "engine/io/temp_space.h"
#include "engine/sort/prefix_sort.h"
#include "engine/sort/run_format.h"

namespace ember::sort {

struct SortStats {
  uint64_t entries = 0;
  uint64_t runs = 0;  // sorted runs, in memory and spilled
  uint64_t spilled_runs = 0;
  uint64_t spill_bytes = 0;  // bytes of runs written to temp space
  uint64_t peak_memory = 0;  // arena + records at their largest (Merger: the builders' sum)
};

// A place in the (key, value) order: ranges of a merge run from one to the next.
struct SplitPoint {
  std::string key;
  uint64_t value = 0;
};

// One per worker. Not thread-safe.
class RunBuilder {
 public:
  // `temp` null: never spills, and the limit is not enforced (the memory grows with the
  // entries). Otherwise a run in memory holds at most `memory_limit` bytes, or one entry when
  // a single entry is larger.
  RunBuilder(io::TempSpace* temp, uint64_t memory_limit);
  ~RunBuilder();  // gives back its temp space
  RunBuilder(const RunBuilder&) = delete;
  RunBuilder& operator=(const RunBuilder&) = delete;

  // Adds an entry (key at most 65,535 bytes: InvalidArgument). May sort and spill a run
  // first: the temp space's errors (ResourceExhausted when full, I/O errors) come back here,
  // and the entry is then not added.
  [[nodiscard]] absl::Status Add(std::string_view key, uint64_t value);
  // Sorts the entries still in memory; they stay there as the last run. Call once, after the
  // Adds and before a Merger reads the builder.
  [[nodiscard]] absl::Status Finish();
  SortStats stats() const { return stats_; }

 private:
  friend class Merger;
  struct Sample {
    std::string key;
    uint64_t value = 0;
    uint64_t pos = 0;  // the entry's byte offset in the run
  };
  struct SpilledRun {
    uint64_t extent = 0;  // TempSpace offset
    uint64_t bytes = 0;
    uint64_t entries = 0;
    uint64_t sample_every = 1;    // entries per sample
    std::vector<Sample> samples;  // entries 0, sample_every, 2 * sample_every, ...
  };
  [[nodiscard]] absl::Status Spill();
  uint64_t Memory() const { return arena_size_ + recs_size_ * sizeof(PrefixRec); }
  // Room for `bytes` more arena and one more record (only without temp space: it grows).
  void Grow(size_t bytes);
  std::string_view KeyAt(size_t i) const {
    return std::string_view(arena_ + recs_[i].off + 2, recs_[i].len);
  }
  uint64_t ValueAt(size_t i) const { return EntryValue(arena_ + recs_[i].off, recs_[i].len); }

  io::TempSpace* const temp_;
  const uint64_t limit_;
  // Arena and records: util/large_alloc.h buffers, reserved to the limit up front (address
  // space only; pages are touched as entries arrive, so the peak is what is used).
  char* arena_ = nullptr;
  size_t arena_size_ = 0, arena_cap_ = 0;
  PrefixRec* recs_ = nullptr;
  size_t recs_size_ = 0, recs_cap_ = 0;
  std::vector<SpilledRun> spilled_;
  SortStats stats_;
  bool finished_ = false;
};

class Merger {
 public:
  // Over the runs of `builders` (each Finished), which must outlive the Merger; their temp
  // space is released when they are destroyed.
  explicit Merger(std::vector<RunBuilder*> builders);

  // At most parts - 1 increasing split points cutting the entries into ranges of about equal
  // size: [start, s[0]), [s[0], s[1]), ..., [s.back(), end).
  std::vector<SplitPoint> Splitters(int parts) const;

  using EmitFn = std::function<absl::Status(std::string_view key, uint64_t value)>;
  // Streams the entries e with lo <= e < hi in (key, value) order (lo null: from the first;
  // hi null: to the last). Stops at emit's first error and returns it, or at a temp space read
  // error. Thread-safe: calls may run at once (typically for disjoint ranges). Each call holds
  // a read buffer per spilled run (64-256 KB: the builders' limits over their spilled runs and
  // the builders, as the ranges of a build are merged at once).
  [[nodiscard]] absl::Status MergeRange(const SplitPoint* lo, const SplitPoint* hi,
                                        const EmitFn& emit) const;
  SortStats stats() const;

 private:
  std::vector<RunBuilder*> builders_;
  size_t read_block_;  // bytes per TempSpace read of a spilled run
};

}  // namespace ember::sort
