// Merger (see key_sorter.h): splitters from the runs' samples, and k-way merges of ranges
// through a loser tree over run cursors.
#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "engine/sort/key_sorter.h"

namespace ember::sort {

namespace {

// Read buffer of a spilled run's cursor: the builders' memory over the runs being read at once,
// within these bounds (fewer, larger reads against a merge's memory).
constexpr size_t kMinReadBlock = size_t{64} << 10, kMaxReadBlock = size_t{256} << 10;
// Records whose entries are read ahead in a run in memory (the entries are scattered over the
// arena in arrival order: without this, a cache miss each).
constexpr size_t kPrefetchAhead = 16;
// Samples a run in memory gives Splitters per part asked for.
constexpr uint64_t kSamplesPerPart = 256;

inline bool EntryLess(std::string_view ka, uint64_t va, std::string_view kb, uint64_t vb) {
  return CompareEntry(ka, va, kb, vb) < 0;
}
inline bool Below(std::string_view k, uint64_t v, const SplitPoint& p) {
  return EntryLess(k, v, p.key, p.value);
}

// A position in one run, from its first entry >= lo to its last < hi.
class RunCursor {
 public:
  // A run in memory: its sorted records [begin, end).
  RunCursor(const PrefixRec* recs, const char* arena, size_t begin, size_t end)
      : recs_(recs), arena_(arena), i_(begin), end_(end) {
    LoadMemory();
  }
  // A spilled run, read in blocks of `block` bytes from byte `from` (an entry's start at or
  // before lo's place); entries starting at or after `check_from` are compared with hi.
  RunCursor(const io::TempSpace* temp, uint64_t extent, uint64_t bytes, size_t block, uint64_t from,
            uint64_t check_from, const SplitPoint* hi)
      : temp_(temp),
        extent_(extent),
        bytes_(bytes),
        pos_(from),
        check_from_(check_from),
        hi_(hi),
        block_(block),
        buf_(new char[block + kMaxEntryBytes]) {}

  // A spilled run: to its first entry >= lo.
  absl::Status SeekSpilled(const SplitPoint* lo) {
    if (absl::Status s = LoadSpilled(); !s.ok()) return s;
    while (lo != nullptr && valid_ && Below(key_, value_, *lo)) {
      if (absl::Status s = LoadSpilled(); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  bool valid() const { return valid_; }
  uint64_t prefix() const { return prefix_; }  // KeyPrefix(key())
  std::string_view key() const { return key_; }
  uint64_t value() const { return value_; }

  absl::Status Next() {
    if (recs_ != nullptr) {
      ++i_;
      LoadMemory();
      return absl::OkStatus();
    }
    return LoadSpilled();
  }

 private:
  void LoadMemory() {
    valid_ = i_ < end_;
    if (!valid_) return;
    if (i_ + kPrefetchAhead < end_) __builtin_prefetch(arena_ + recs_[i_ + kPrefetchAhead].off);
    const PrefixRec& r = recs_[i_];
    prefix_ = r.prefix;
    key_ = std::string_view(arena_ + r.off + 2, r.len);
    value_ = EntryValue(arena_ + r.off, r.len);
  }

  // Makes buf_[off_, len_) hold at least n bytes (or the rest of the run).
  absl::Status Fill(size_t n) {
    if (len_ - off_ >= n) return absl::OkStatus();
    std::memmove(buf_.get(), buf_.get() + off_, len_ - off_);  // the part not parsed yet
    len_ -= off_;
    off_ = 0;
    const uint64_t read_at = pos_ + len_;
    // An entry longer than a block is read whole (the buffer has room for one).
    const size_t more =
        static_cast<size_t>(std::min<uint64_t>(std::max(block_, n - len_), bytes_ - read_at));
    if (more > 0) {
      if (absl::Status s = temp_->Read(extent_ + read_at, buf_.get() + len_, more); !s.ok()) {
        return s;
      }
      len_ += more;
    }
    if (len_ < n) return absl::DataLossError("sort: a spilled run ends inside an entry");
    return absl::OkStatus();
  }

  // Parses the entry at pos_.
  absl::Status LoadSpilled() {
    valid_ = false;
    if (pos_ >= bytes_) return absl::OkStatus();
    if (absl::Status s = Fill(2); !s.ok()) return s;
    const size_t n = EntryBytes(EntryKeyLen(buf_.get() + off_));
    if (absl::Status s = Fill(n); !s.ok()) return s;
    const char* e = buf_.get() + off_;
    key_ = EntryKey(e);
    value_ = EntryValue(e, key_.size());
    prefix_ = EntryPrefix(e, key_.size());
    if (hi_ != nullptr && pos_ >= check_from_ && !Below(key_, value_, *hi_))
      return absl::OkStatus();
    off_ += n;
    pos_ += n;
    valid_ = true;
    return absl::OkStatus();
  }

  // A run in memory.
  const PrefixRec* recs_ = nullptr;
  const char* arena_ = nullptr;
  size_t i_ = 0, end_ = 0;
  // A spilled run: pos_ is the run offset of the entry at buf_[off_]; buf_[0, len_) is read.
  const io::TempSpace* temp_ = nullptr;
  uint64_t extent_ = 0, bytes_ = 0, pos_ = 0, check_from_ = 0;
  const SplitPoint* hi_ = nullptr;
  size_t block_ = 0, off_ = 0, len_ = 0;
  std::unique_ptr<char[]> buf_;

  bool valid_ = false;
  uint64_t prefix_ = 0;
  std::string_view key_;
  uint64_t value_ = 0;
};

// A loser tree over cursors (Knuth 5.4.1): node 0 holds the winner, nodes 1..k-1 the losers
// of their matches, leaf i sits at k + i. After the winner moves on, only its path is
// replayed: log2(k) comparisons per entry.
class LoserTree {
 public:
  explicit LoserTree(std::vector<RunCursor*> c) : c_(std::move(c)), node_(c_.size()) {
    const size_t k = c_.size();
    std::vector<size_t> win(2 * k);
    for (size_t i = 0; i < k; ++i) win[k + i] = i;
    for (size_t n = k - 1; n >= 1; --n) {
      size_t a = win[2 * n], b = win[2 * n + 1];
      if (Beats(b, a)) std::swap(a, b);
      win[n] = a;
      node_[n] = b;
    }
    node_[0] = win[1];
  }
  RunCursor* top() const { return c_[node_[0]]; }  // not valid: every run is done
  // After top() moved on.
  void Replay() {
    size_t w = node_[0];
    for (size_t n = (w + c_.size()) / 2; n >= 1; n /= 2) {
      if (Beats(node_[n], w)) std::swap(node_[n], w);
    }
    node_[0] = w;
  }

 private:
  // Whether cursor a's entry goes before b's (a done cursor goes after everything).
  bool Beats(size_t a, size_t b) const {
    const RunCursor* x = c_[a];
    const RunCursor* y = c_[b];
    if (!x->valid()) return false;
    if (!y->valid()) return true;
    // Most matches are decided by the prefixes, without touching the keys' bytes.
    if (x->prefix() != y->prefix()) return x->prefix() < y->prefix();
    return EntryLess(x->key(), x->value(), y->key(), y->value());
  }
  std::vector<RunCursor*> c_;
  std::vector<size_t> node_;
};

}  // namespace

Merger::Merger(std::vector<RunBuilder*> builders) : builders_(std::move(builders)) {
  uint64_t limits = 0, spilled = 0;
  for (const RunBuilder* b : builders_) {
    limits += b->limit_;
    spilled += b->spilled_.size();
  }
  // Every builder's range is merged at once in a build: builders x spilled runs buffers.
  const uint64_t buffers = std::max<uint64_t>(1, spilled * builders_.size());
  read_block_ =
      static_cast<size_t>(std::clamp<uint64_t>(limits / buffers, kMinReadBlock, kMaxReadBlock));
}

std::vector<SplitPoint> Merger::Splitters(int parts) const {
  if (parts <= 1) return {};
  // Weighted samples of every run: each stands for the entries up to the run's next sample.
  struct Weighted {
    std::string_view key;
    uint64_t value, weight;
  };
  uint64_t total = 0;
  for (const RunBuilder* b : builders_) total += b->stats_.entries;
  const uint64_t stride =
      std::max<uint64_t>(1, total / (static_cast<uint64_t>(parts) * kSamplesPerPart));
  std::vector<Weighted> samples;
  for (const RunBuilder* b : builders_) {
    const size_t n = b->finished_ ? b->recs_size_ : 0;
    for (size_t i = 0; i < n; i += stride) {
      samples.push_back(Weighted{b->KeyAt(i), b->ValueAt(i), std::min<uint64_t>(stride, n - i)});
    }
    for (const RunBuilder::SpilledRun& r : b->spilled_) {
      for (size_t i = 0; i < r.samples.size(); ++i) {
        samples.push_back(
            Weighted{r.samples[i].key, r.samples[i].value,
                     std::min<uint64_t>(r.sample_every, r.entries - i * r.sample_every)});
      }
    }
  }
  std::sort(samples.begin(), samples.end(), [](const Weighted& a, const Weighted& b) {
    return EntryLess(a.key, a.value, b.key, b.value);
  });
  std::vector<SplitPoint> out;
  uint64_t seen = 0;
  int next = 1;
  for (const Weighted& s : samples) {
    if (next >= parts) break;
    if (seen >= total * static_cast<uint64_t>(next) / static_cast<uint64_t>(parts)) {
      if (out.empty() || EntryLess(out.back().key, out.back().value, s.key, s.value)) {
        out.push_back(SplitPoint{std::string(s.key), s.value});
      }
      ++next;
    }
    seen += s.weight;
  }
  return out;
}

absl::Status Merger::MergeRange(const SplitPoint* lo, const SplitPoint* hi,
                                const EmitFn& emit) const {
  std::vector<std::unique_ptr<RunCursor>> cursors;
  for (const RunBuilder* b : builders_) {
    if (b->finished_ && b->recs_size_ > 0) {
      // The records are sorted: the range is found by binary search.
      auto first_not_below = [b](const SplitPoint* p) -> size_t {
        size_t a = 0, z = b->recs_size_;
        if (p == nullptr) return z;
        while (a < z) {
          const size_t m = a + (z - a) / 2;
          if (Below(b->KeyAt(m), b->ValueAt(m), *p)) a = m + 1;
          else z = m;
        }
        return a;
      };
      const size_t begin = lo == nullptr ? 0 : first_not_below(lo);
      const size_t end = first_not_below(hi);
      if (begin < end)
        cursors.push_back(std::make_unique<RunCursor>(b->recs_, b->arena_, begin, end));
    }
    for (const RunBuilder::SpilledRun& r : b->spilled_) {
      // Start at the last sample below lo (an entry at or above lo may have equal ones before
      // it); entries up to the last sample below hi need no comparison with hi.
      auto below = [](const RunBuilder::Sample& s, const SplitPoint* p) {
        return Below(s.key, s.value, *p);
      };
      uint64_t from = 0, check_from = 0;
      if (lo != nullptr) {
        auto it = std::partition_point(r.samples.begin(), r.samples.end(),
                                       [&](const RunBuilder::Sample& s) { return below(s, lo); });
        if (it != r.samples.begin()) from = std::prev(it)->pos;
      }
      if (hi != nullptr) {
        auto it = std::partition_point(r.samples.begin(), r.samples.end(),
                                       [&](const RunBuilder::Sample& s) { return below(s, hi); });
        if (it != r.samples.begin()) check_from = std::prev(it)->pos + 1;
      }
      auto c = std::make_unique<RunCursor>(b->temp_, r.extent, r.bytes, read_block_, from,
                                           check_from, hi);
      if (absl::Status s = c->SeekSpilled(lo); !s.ok()) return s;
      if (c->valid()) cursors.push_back(std::move(c));
    }
  }
  if (cursors.empty()) return absl::OkStatus();
  if (cursors.size() == 1) {
    RunCursor* c = cursors[0].get();
    for (; c->valid();) {
      if (absl::Status s = emit(c->key(), c->value()); !s.ok()) return s;
      if (absl::Status s = c->Next(); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  std::vector<RunCursor*> raw;
  for (auto& c : cursors) raw.push_back(c.get());
  LoserTree tree(std::move(raw));
  for (RunCursor* c = tree.top(); c->valid(); c = tree.top()) {
    if (absl::Status s = emit(c->key(), c->value()); !s.ok()) return s;
    if (absl::Status s = c->Next(); !s.ok()) return s;
    tree.Replay();
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
