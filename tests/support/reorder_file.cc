// ReorderFile and TearWrite (reorder_file.h): power loss with unsynced writes reordered and torn.
#include "tests/support/reorder_file.h"

#include <algorithm>
#include <cerrno>
#include <iterator>

#include "absl/strings/str_cat.h"

namespace ember::testing {

std::string TearWrite(const std::string& before, const std::string& after, size_t unit,
                      std::mt19937_64& rng) {
  const size_t units = (after.size() + unit - 1) / unit;
  if (units < 2 || before.size() != after.size()) return after;
  std::vector<bool> fresh(units);
  const size_t k = 1 + rng() % (units - 1);  // new units in a prefix or suffix
  switch (rng() % 3) {
    case 0:
      for (size_t i = 0; i < k; ++i) fresh[i] = true;
      break;
    case 1:
      for (size_t i = units - k; i < units; ++i) fresh[i] = true;
      break;
    default:
      for (size_t i = 0; i < units; ++i) fresh[i] = rng() % 2;
      fresh[rng() % units] = true;
      if (std::all_of(fresh.begin(), fresh.end(), [](bool b) { return b; })) {
        fresh[rng() % units] = false;
      }
  }
  std::string out = before;
  for (size_t i = 0; i < units; ++i) {
    if (fresh[i])
      out.replace(i * unit, std::min(unit, out.size() - i * unit), after, i * unit, unit);
  }
  return out;
}

ReorderFile::ReorderFile(std::unique_ptr<io::File> base) : base_(std::move(base)) {
  absl::StatusOr<uint64_t> size = base_->Size();
  synced_size_ = size.ok() ? *size : 0;
  hooked_ = base_->SetWriteHook(this);
}

ReorderFile::~ReorderFile() {
  if (hooked_) base_->SetWriteHook(nullptr);
}

absl::Status ReorderFile::Sync() {
  std::lock_guard<std::mutex> g(mu_);
  if (powered_off_) return io::ErrnoStatus(EIO, "fdatasync", base_->path());
  if (absl::Status s = base_->Sync(); !s.ok()) return s;
  absl::StatusOr<uint64_t> size = base_->Size();
  if (!size.ok()) return size.status();
  // What was written before the sync is durable; a write still in flight may not be.
  for (auto it = ranges_.begin(); it != ranges_.end();) {
    Range& r = it->second;
    auto done = std::find_if(r.versions.rbegin(), r.versions.rend(),
                             [](const Version& v) { return !v.in_flight; });
    if (done != r.versions.rend()) {
      r.synced = std::move(done->bytes);
      r.versions.erase(r.versions.begin(), done.base());
    }
    it = r.versions.empty() ? ranges_.erase(it) : std::next(it);
  }
  partial_overlap_ = partial_overlap_ && !ranges_.empty();
  synced_size_ = *size;
  ++syncs_;
  return absl::OkStatus();
}

absl::Status ReorderFile::Truncate(uint64_t size) {
  std::lock_guard<std::mutex> g(mu_);
  absl::Status s = base_->Truncate(size);
  if (s.ok()) synced_size_ = std::min(synced_size_, size);
  return s;
}

void ReorderFile::CutPowerAtWrite(uint64_t n) {
  std::lock_guard<std::mutex> g(mu_);
  cut_at_ = n;
  writes_since_cut_set_ = 0;
}

bool ReorderFile::powered_off() {
  std::lock_guard<std::mutex> g(mu_);
  return powered_off_;
}

void ReorderFile::set_tear_percent(unsigned percent) {
  std::lock_guard<std::mutex> g(mu_);
  tear_percent_ = percent;
}

absl::StatusOr<size_t> ReorderFile::PowerLoss(std::mt19937_64& rng) {
  std::lock_guard<std::mutex> g(mu_);
  size_t reverted = 0;
  uint64_t end = synced_size_;
  base_->SetWriteHook(nullptr);  // the disk's own doing, not the engine's writes
  if (!partial_overlap_) {
    for (auto& [offset, r] : ranges_) {
      const size_t pick = rng() % (r.versions.size() + 1);  // 0: the synced contents
      std::string bytes = pick == 0 ? r.synced : r.versions[pick - 1].bytes;
      if (pick != 0 && rng() % 100 < tear_percent_) {
        const std::string& before = pick == 1 ? r.synced : r.versions[pick - 2].bytes;
        bytes = TearWrite(before, bytes, kTearUnits[rng() % 2], rng);
        ++torn_;
      }
      if (pick != r.versions.size() || bytes != r.versions.back().bytes) ++reverted;
      if (pick != 0) end = std::max<uint64_t>(end, offset + r.len);
      if (absl::Status s = base_->Write(offset, bytes.data(), bytes.size()); !s.ok()) return s;
    }
  }
  if (hooked_) base_->SetWriteHook(this);
  ranges_.clear();
  partial_overlap_ = false;
  cut_at_ = 0;
  powered_off_ = false;
  absl::StatusOr<uint64_t> size = base_->Size();
  if (!size.ok()) return size.status();
  if (*size > end) {
    if (absl::Status s = base_->Truncate(end); !s.ok()) return s;
  }
  if (absl::Status s = base_->Sync(); !s.ok()) return s;
  return reverted;
}

io::WriteVerdict ReorderFile::BeforeWrite(uint64_t offset, const void* data, size_t len,
                                          io::WritePath) {
  std::lock_guard<std::mutex> g(mu_);
  if (cut_at_ != 0 && ++writes_since_cut_set_ >= cut_at_) powered_off_ = true;
  if (powered_off_) return io::WriteVerdict{EIO};
  Range& r = ranges_[offset];
  if (r.versions.empty()) {
    // First write since the last sync: remember what the disk durably holds (zeros past the
    // synced end of the file).
    r.len = len;
    r.synced.assign(len, '\0');
    if (offset < synced_size_) {
      const size_t have = std::min<uint64_t>(len, synced_size_ - offset);
      if (!base_->Read(offset, r.synced.data(), have).ok()) return io::WriteVerdict{EIO};
    }
  } else if (r.len != len) {
    partial_overlap_ = true;
  }
  r.versions.push_back({std::string(static_cast<const char*>(data), len), true});
  return {};
}

void ReorderFile::AfterWrite(uint64_t offset) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = ranges_.find(offset);
  if (it == ranges_.end()) return;
  for (auto v = it->second.versions.rbegin(); v != it->second.versions.rend(); ++v) {
    if (v->in_flight) {
      v->in_flight = false;
      return;
    }
  }
}

absl::Status ReorderFile::NotHooked() const {
  return absl::FailedPreconditionError(
      absl::StrCat("ReorderFile over ", base_->path(), ": the wrapped file takes no write hook"));
}

}  // namespace ember::testing
