// RunBuilder (see key_sorter.h): gathering a worker's entries, sorting them into runs and
// spilling runs to temp space past the memory limit.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/sort/key_sorter.h"
#include "engine/util/large_alloc.h"

namespace ember::sort {

namespace {

// A spilled run keeps a sample every 256 entries at most, and at least 64 samples, so that
// small runs still give balanced splitters.
constexpr uint64_t kMaxSampleEvery = 256, kMinSamples = 64;
constexpr size_t kWriteBlock = size_t{1} << 20;  // bytes per TempSpace write of a spill
// Entries whose reads are started ahead while entries are gathered in sorted order (they are
// scattered over the arena in arrival order).
constexpr size_t kPrefetchAhead = 16;
// Record offsets are 32-bit: a run in memory spills before its arena passes this.
constexpr uint64_t kMaxArena = UINT32_MAX;

// The arena's alignment, the same at every LargeAlloc and LargeFree of it (a mismatch is
// undefined behaviour for the buffers operator new serves).
constexpr size_t kArenaAlign = alignof(std::max_align_t);

template <typename T>
T* Reallocate(T* old, size_t old_cap, size_t used, size_t new_cap, size_t align) {
  T* p = static_cast<T*>(util::LargeAlloc(new_cap * sizeof(T), align));
  if (used > 0) std::memcpy(p, old, used * sizeof(T));
  if (old != nullptr) util::LargeFree(old, old_cap * sizeof(T), align);
  return p;
}

}  // namespace

RunBuilder::RunBuilder(io::TempSpace* temp, uint64_t memory_limit)
    : temp_(temp), limit_(memory_limit) {
  if (temp_ != nullptr) {
    // A run never holds more than the limit (or one entry larger than it: Grow).
    arena_cap_ =
        static_cast<size_t>(std::min(std::max<uint64_t>(limit_, kMaxEntryBytes), kMaxArena));
    recs_cap_ = static_cast<size_t>(std::max<uint64_t>(limit_ / sizeof(PrefixRec), 1));
    arena_ = static_cast<char*>(util::LargeAlloc(arena_cap_, kArenaAlign));
    recs_ = static_cast<PrefixRec*>(
        util::LargeAlloc(recs_cap_ * sizeof(PrefixRec), alignof(PrefixRec)));
  }
}

RunBuilder::~RunBuilder() {
  for (const SpilledRun& r : spilled_) temp_->Release(r.extent, r.bytes);
  if (arena_ != nullptr) util::LargeFree(arena_, arena_cap_, kArenaAlign);
  if (recs_ != nullptr) util::LargeFree(recs_, recs_cap_ * sizeof(PrefixRec), alignof(PrefixRec));
}

void RunBuilder::Grow(size_t bytes) {
  if (arena_size_ + bytes > arena_cap_) {
    const size_t cap = std::max({arena_cap_ * 2, arena_size_ + bytes, size_t{64} << 10});
    arena_ = Reallocate(arena_, arena_cap_, arena_size_, cap, kArenaAlign);
    arena_cap_ = cap;
  }
  if (recs_size_ == recs_cap_) {
    const size_t cap = std::max(recs_cap_ * 2, size_t{4096});
    recs_ = Reallocate(recs_, recs_cap_, recs_size_, cap, alignof(PrefixRec));
    recs_cap_ = cap;
  }
}

absl::Status RunBuilder::Add(std::string_view key, uint64_t value) {
  if (key.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat("sort: key of ", key.size(), " bytes"));
  }
  const size_t bytes = EntryBytes(key.size());
  if (temp_ != nullptr && recs_size_ > 0 &&
      (Memory() + bytes + sizeof(PrefixRec) > limit_ || arena_size_ + bytes > kMaxArena)) {
    if (absl::Status s = Spill(); !s.ok()) return s;
  }
  if (arena_size_ + bytes > arena_cap_ || recs_size_ == recs_cap_) {
    if (arena_size_ + bytes > kMaxArena) {
      return absl::ResourceExhaustedError("sort: more than 4 GB of entries in memory");
    }
    Grow(bytes);
  }
  char* at = arena_ + arena_size_;
  PutEntry(at, key, value);
  recs_[recs_size_++] = PrefixRec{EntryPrefix(at, key.size()), static_cast<uint32_t>(arena_size_),
                                  static_cast<uint32_t>(key.size())};
  arena_size_ += bytes;
  ++stats_.entries;
  stats_.peak_memory = std::max(stats_.peak_memory, Memory());
  return absl::OkStatus();
}

absl::Status RunBuilder::Spill() {
  SortPrefixRecs(recs_, recs_size_, arena_);
  SpilledRun run;
  run.entries = recs_size_;
  run.bytes = arena_size_;
  run.sample_every = std::clamp<uint64_t>(run.entries / kMinSamples, 1, kMaxSampleEvery);
  absl::StatusOr<uint64_t> ext = temp_->Allocate(run.bytes);
  if (!ext.ok()) return ext.status();
  run.extent = *ext;
  // Entries are copied in order into a block buffer (their bytes are the run's format already).
  const size_t block = static_cast<size_t>(std::min<uint64_t>(run.bytes, kWriteBlock));
  std::unique_ptr<char[]> buf(new char[block + kMaxEntryBytes]);
  size_t used = 0;
  uint64_t written = 0;
  absl::Status s;
  for (size_t i = 0; i < recs_size_ && s.ok(); ++i) {
    if (i + kPrefetchAhead < recs_size_) __builtin_prefetch(arena_ + recs_[i + kPrefetchAhead].off);
    const PrefixRec& r = recs_[i];
    if (i % run.sample_every == 0) {
      run.samples.push_back(Sample{std::string(KeyAt(i)), ValueAt(i), written + used});
    }
    const size_t n = EntryBytes(r.len);
    std::memcpy(buf.get() + used, arena_ + r.off, n);
    used += n;
    if (used >= kWriteBlock || i + 1 == recs_size_) {
      s = temp_->Write(run.extent + written, buf.get(), used);
      written += used;
      used = 0;
    }
  }
  if (!s.ok()) {
    temp_->Release(run.extent, run.bytes);
    return s;
  }
  ++stats_.runs;
  ++stats_.spilled_runs;
  stats_.spill_bytes += run.bytes;
  spilled_.push_back(std::move(run));
  arena_size_ = 0;
  recs_size_ = 0;
  return absl::OkStatus();
}

absl::Status RunBuilder::Finish() {
  if (finished_) return absl::OkStatus();
  finished_ = true;
  if (recs_size_ == 0) return absl::OkStatus();
  SortPrefixRecs(recs_, recs_size_, arena_);
  ++stats_.runs;
  // The last run stays in memory. Its entries lie in arrival order, so a merge reading them in
  // key order takes a cache miss per entry (4M entries: 0.58 s against 0.15 s). Where the
  // limit has room for a second arena, they are copied into key order first, in a loop that
  // keeps many reads in flight (0.2 s for 4M); otherwise the merge reads them in place.
  if (temp_ != nullptr && Memory() + arena_size_ > limit_) return absl::OkStatus();
  char* sorted =
      static_cast<char*>(util::LargeAlloc(std::max<size_t>(arena_size_, 1), kArenaAlign));
  stats_.peak_memory = std::max(stats_.peak_memory, Memory() + arena_size_);
  size_t at = 0;
  for (size_t i = 0; i < recs_size_; ++i) {
    if (i + kPrefetchAhead < recs_size_) __builtin_prefetch(arena_ + recs_[i + kPrefetchAhead].off);
    PrefixRec& r = recs_[i];
    const size_t n = EntryBytes(r.len);
    std::memcpy(sorted + at, arena_ + r.off, n);
    r.off = static_cast<uint32_t>(at);
    at += n;
  }
  util::LargeFree(arena_, arena_cap_, kArenaAlign);
  arena_ = sorted;
  arena_cap_ = std::max<size_t>(arena_size_, 1);
  return absl::OkStatus();
}

}  // namespace ember::sort
