// RunBuilder and Merger (see key_sorter.h).
#include "engine/sort/key_sorter.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ember::sort {

namespace {

constexpr size_t kEntryOverhead = 2 + 8;        // u16 key length, u64 value
// Entries between samples of a spilled run: at most 256, and at least 64 samples a run.
constexpr uint64_t kMaxSampleEvery = 256, kMinSamples = 64;
constexpr size_t kWriteBlock = size_t{1} << 20;  // bytes per TempSpace write of a spill
constexpr size_t kReadBlock = size_t{256} << 10;  // bytes per TempSpace read of a merge

uint64_t PrefixOf(std::string_view key) {
  uint8_t b[8] = {};
  std::memcpy(b, key.data(), std::min<size_t>(8, key.size()));
  uint64_t p = 0;
  for (uint8_t x : b) p = p << 8 | x;
  return p;
}

void PutEntry(char* at, std::string_view key, uint64_t value) {
  const uint16_t len = static_cast<uint16_t>(key.size());
  std::memcpy(at, &len, 2);
  std::memcpy(at + 2, key.data(), key.size());
  std::memcpy(at + 2 + key.size(), &value, 8);
}

}  // namespace

RunBuilder::RunBuilder(io::TempSpace* temp, uint64_t memory_limit)
    : temp_(temp), limit_(memory_limit) {
  if (temp_ != nullptr) {
    // Address space only: pages are touched as entries arrive, so the peak is what is used.
    arena_.reserve(static_cast<size_t>(limit_));
    recs_.reserve(static_cast<size_t>(limit_ / sizeof(Rec)));
  }
}

RunBuilder::~RunBuilder() {
  for (const SpilledRun& r : spilled_) {
    if (r.bytes > 0) temp_->Release(r.extent, r.bytes);
  }
}

uint64_t RunBuilder::Memory() const { return arena_.size() + recs_.size() * sizeof(Rec); }

absl::Status RunBuilder::Add(std::string_view key, uint64_t value) {
  if (key.size() > 0xFFFF) {
    return absl::InvalidArgumentError(absl::StrCat("sort: key of ", key.size(), " bytes"));
  }
  const size_t bytes = kEntryOverhead + key.size();
  if (temp_ != nullptr && !recs_.empty() && Memory() + bytes + sizeof(Rec) > limit_) {
    if (absl::Status s = Spill(); !s.ok()) return s;
  }
  if (arena_.size() + bytes > UINT32_MAX) {
    return absl::ResourceExhaustedError("sort: more than 4 GB of entries in memory");
  }
  const size_t off = arena_.size();
  arena_.resize(off + bytes);
  PutEntry(arena_.data() + off, key, value);
  recs_.push_back(Rec{PrefixOf(key), static_cast<uint32_t>(off), static_cast<uint32_t>(key.size())});
  ++stats_.entries;
  stats_.peak_memory = std::max(stats_.peak_memory, Memory());
  return absl::OkStatus();
}

void RunBuilder::SortRecs() {
  // The 8-byte prefixes decide almost every comparison; only equal ones look at the rest.
  std::sort(recs_.begin(), recs_.end(), [this](const Rec& a, const Rec& b) {
    if (a.prefix != b.prefix) return a.prefix < b.prefix;
    const std::string_view ka = KeyOf(a), kb = KeyOf(b);
    if (ka.size() <= 8 || kb.size() <= 8) return ka < kb;
    return ka.substr(8) < kb.substr(8);
  });
}

absl::Status RunBuilder::Spill() {
  SortRecs();
  SpilledRun run;
  run.entries = recs_.size();
  run.sample_every = std::clamp<uint64_t>(run.entries / kMinSamples, 1, kMaxSampleEvery);
  for (const Rec& r : recs_) run.bytes += kEntryOverhead + r.len;
  absl::StatusOr<uint64_t> ext = temp_->Allocate(run.bytes);
  if (!ext.ok()) return ext.status();
  run.extent = *ext;
  std::vector<char> buf;
  buf.reserve(kWriteBlock + kEntryOverhead + 0xFFFF);
  uint64_t written = 0;
  auto write = [&]() -> absl::Status {
    if (absl::Status s = temp_->Write(run.extent + written, buf.data(), buf.size()); !s.ok()) {
      return s;
    }
    written += buf.size();
    buf.clear();
    return absl::OkStatus();
  };
  for (size_t i = 0; i < recs_.size(); ++i) {
    const Rec& r = recs_[i];
    if (i % run.sample_every == 0) run.samples.emplace_back(std::string(KeyOf(r)), written + buf.size());
    const size_t at = buf.size();
    buf.resize(at + kEntryOverhead + r.len);
    std::memcpy(buf.data() + at, arena_.data() + r.off, kEntryOverhead + r.len);
    if (buf.size() >= kWriteBlock) {
      if (absl::Status s = write(); !s.ok()) {
        temp_->Release(run.extent, run.bytes);
        return s;
      }
    }
  }
  if (!buf.empty()) {
    if (absl::Status s = write(); !s.ok()) {
      temp_->Release(run.extent, run.bytes);
      return s;
    }
  }
  ++stats_.runs;
  ++stats_.spilled_runs;
  stats_.spill_bytes += run.bytes;
  spilled_.push_back(std::move(run));
  arena_.clear();
  recs_.clear();
  return absl::OkStatus();
}

absl::Status RunBuilder::Finish() {
  if (finished_) return absl::OkStatus();
  finished_ = true;
  if (recs_.empty()) return absl::OkStatus();
  // The last run stays in memory, its entries copied into key order so that the merge reads
  // them sequentially (in arrival order they are scattered over the arena: a cache miss per
  // entry). The copy needs the arena's size again; without that room, the run is spilled.
  if (temp_ != nullptr && Memory() + arena_.size() > limit_) return Spill();
  SortRecs();
  std::vector<char, util::LargeAllocator<char>> ordered;
  ordered.resize(arena_.size());
  size_t at = 0;
  constexpr size_t kAhead = 16;  // entries whose reads are started ahead
  for (size_t i = 0; i < recs_.size(); ++i) {
    if (i + kAhead < recs_.size()) __builtin_prefetch(arena_.data() + recs_[i + kAhead].off);
    Rec& r = recs_[i];
    const size_t n = kEntryOverhead + r.len;
    std::memcpy(ordered.data() + at, arena_.data() + r.off, n);
    r.off = static_cast<uint32_t>(at);
    at += n;
  }
  stats_.peak_memory = std::max(stats_.peak_memory, Memory() + ordered.size());
  arena_.swap(ordered);
  ++stats_.runs;
  return absl::OkStatus();
}

SortStats RunBuilder::stats() const { return stats_; }

// ---------------------------------------------------------------- merging

namespace {

// A position in one run: the builder's sorted records, or a spilled run read in blocks.
class Cursor {
 public:
  explicit Cursor(const RunBuilder* b) : mem_(b) {}
  Cursor(io::TempSpace* temp, uint64_t extent, uint64_t bytes)
      : temp_(temp), extent_(extent), bytes_(bytes) {}

  // Memory run: the first entry >= lo.
  void SeekMemory(std::string_view lo) {
    size_t a = 0, b = mem_->memory_entries();
    while (a < b) {
      const size_t m = (a + b) / 2;
      if (mem_->key_at(m) < lo) a = m + 1;
      else b = m;
    }
    i_ = a;
    LoadMemory();
  }
  // Spilled run: from byte `from` (an entry start at or before lo's place) to the first >= lo.
  absl::Status SeekSpilled(uint64_t from, std::string_view lo) {
    pos_ = from;
    buf_.clear();
    off_ = 0;
    if (absl::Status s = LoadSpilled(); !s.ok()) return s;
    while (valid_ && key_ < lo) {
      if (absl::Status s = Next(); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  bool valid() const { return valid_; }
  std::string_view key() const { return key_; }
  uint64_t value() const { return value_; }
  absl::Status Next() {
    if (mem_ != nullptr) {
      ++i_;
      LoadMemory();
      return absl::OkStatus();
    }
    return LoadSpilled();
  }

 private:
  void LoadMemory() {
    valid_ = i_ < mem_->memory_entries();
    if (valid_) {
      key_ = mem_->key_at(i_);
      value_ = mem_->value_at(i_);
    }
  }
  // Parses the entry at pos_ (reading more of the run when the buffer does not hold it whole).
  absl::Status LoadSpilled() {
    if (pos_ >= bytes_) {
      valid_ = false;
      return absl::OkStatus();
    }
    auto need = [&](size_t n) -> absl::Status {
      if (buf_.size() - off_ >= n) return absl::OkStatus();
      buf_.erase(0, off_);  // keeps the part not parsed yet
      off_ = 0;
      const uint64_t have_to = pos_ + buf_.size();
      const size_t more =
          static_cast<size_t>(std::min<uint64_t>(std::max(kReadBlock, n), bytes_ - have_to));
      const size_t at = buf_.size();
      buf_.resize(at + more);
      if (more > 0) {
        if (absl::Status s = temp_->Read(extent_ + have_to, buf_.data() + at, more); !s.ok()) {
          return s;
        }
      }
      if (buf_.size() < n) return absl::DataLossError("sort: a spilled run ends mid-entry");
      return absl::OkStatus();
    };
    if (absl::Status s = need(2); !s.ok()) return s;
    uint16_t len;
    std::memcpy(&len, buf_.data() + off_, 2);
    if (absl::Status s = need(kEntryOverhead + len); !s.ok()) return s;
    key_ = std::string_view(buf_.data() + off_ + 2, len);
    std::memcpy(&value_, buf_.data() + off_ + 2 + len, 8);
    off_ += kEntryOverhead + len;
    pos_ += kEntryOverhead + len;
    valid_ = true;
    return absl::OkStatus();
  }

  // Memory run.
  const RunBuilder* mem_ = nullptr;
  size_t i_ = 0;
  // Spilled run: pos_ is the run offset of the next entry to parse, at buf_[off_].
  io::TempSpace* temp_ = nullptr;
  uint64_t extent_ = 0, bytes_ = 0, pos_ = 0;
  std::string buf_;
  size_t off_ = 0;
  bool valid_ = false;
  std::string_view key_;
  uint64_t value_ = 0;
};

}  // namespace

Merger::Merger(std::vector<RunBuilder*> builders) : builders_(std::move(builders)) {}

std::vector<std::string> Merger::Splitters(int parts) const {
  if (parts <= 1) return {};
  // Weighted samples of every run: each stands for the entries up to the next one.
  uint64_t total = 0;
  for (const RunBuilder* b : builders_) total += b->stats_.entries;
  const uint64_t stride = std::max<uint64_t>(1, total / (static_cast<uint64_t>(parts) * 256));
  std::vector<std::pair<std::string_view, uint64_t>> samples;
  for (const RunBuilder* b : builders_) {
    for (size_t i = 0; i < b->recs_.size(); i += stride) {
      samples.emplace_back(b->KeyOf(b->recs_[i]), std::min<uint64_t>(stride, b->recs_.size() - i));
    }
    for (const RunBuilder::SpilledRun& r : b->spilled_) {
      for (size_t i = 0; i < r.samples.size(); ++i) {
        samples.emplace_back(r.samples[i].first,
                             std::min<uint64_t>(r.sample_every, r.entries - i * r.sample_every));
      }
    }
  }
  std::sort(samples.begin(), samples.end());
  std::vector<std::string> out;
  uint64_t seen = 0;
  int next = 1;
  for (const auto& [key, weight] : samples) {
    if (next >= parts) break;
    if (seen >= total * static_cast<uint64_t>(next) / static_cast<uint64_t>(parts)) {
      if (out.empty() || key > out.back()) out.emplace_back(key);
      ++next;
    }
    seen += weight;
  }
  return out;
}

absl::Status Merger::MergeRange(std::string_view lo, std::string_view hi,
                                const EmitFn& emit) const {
  std::vector<std::unique_ptr<Cursor>> cursors;
  for (const RunBuilder* b : builders_) {
    if (!b->recs_.empty()) {
      auto c = std::make_unique<Cursor>(b);
      c->SeekMemory(lo);
      if (c->valid()) cursors.push_back(std::move(c));
    }
    for (const RunBuilder::SpilledRun& r : b->spilled_) {
      // From the last sample at or below lo (its byte offset starts an entry).
      auto it = std::upper_bound(
          r.samples.begin(), r.samples.end(), lo,
          [](std::string_view k, const std::pair<std::string, uint64_t>& s) { return k < s.first; });
      const uint64_t from = it == r.samples.begin() ? 0 : std::prev(it)->second;
      auto c = std::make_unique<Cursor>(b->temp_, r.extent, r.bytes);
      if (absl::Status s = c->SeekSpilled(from, lo); !s.ok()) return s;
      if (c->valid()) cursors.push_back(std::move(c));
    }
  }
  // A min-heap of the cursors on their current keys.
  std::vector<Cursor*> heap;
  for (auto& c : cursors) heap.push_back(c.get());
  auto greater = [](const Cursor* a, const Cursor* b) { return a->key() > b->key(); };
  std::make_heap(heap.begin(), heap.end(), greater);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), greater);
    Cursor* c = heap.back();
    if (!hi.empty() && c->key() >= hi) {
      heap.pop_back();  // this run is past the range
      continue;
    }
    if (absl::Status s = emit(c->key(), c->value()); !s.ok()) return s;
    if (absl::Status s = c->Next(); !s.ok()) return s;
    if (c->valid()) {
      std::push_heap(heap.begin(), heap.end(), greater);
    } else {
      heap.pop_back();
    }
  }
  return absl::OkStatus();
}

SortStats Merger::stats() const {
  SortStats s;
  for (const RunBuilder* b : builders_) {
    const SortStats x = b->stats();
    s.entries += x.entries;
    s.runs += x.runs;
    s.spilled_runs += x.spilled_runs;
    s.spill_bytes += x.spill_bytes;
    s.peak_memory += x.peak_memory;
  }
  return s;
}

}  // namespace ember::sort
