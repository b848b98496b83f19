// UndoLog (see undo_log.h).
#include "engine/txn/undo_log.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ember::txn {

UndoLog::UndoLog(io::TempSpace* temp, uint64_t memory_limit)
    : temp_(temp), memory_limit_(memory_limit) {}

UndoLog::~UndoLog() { ArenaTruncate(0); }

void UndoLog::Push(std::string name) {
  Level l{std::move(name), {}, spilling_ ? spill_base_ + spill_size_ : mem_.size()};
  // A map with its capacity kept from an earlier level: a statement over the same rows as the
  // last one does not grow (rehash) its map again.
  if (!spare_.empty()) {
    l.entries = std::move(spare_.back());
    spare_.pop_back();
  }
  levels_.push_back(std::move(l));
}

void UndoLog::Recycle(absl::flat_hash_map<RecKey, Entry>&& m) {
  m.clear();
  if (spare_.size() < 2) spare_.push_back(std::move(m));
}

int UndoLog::Find(std::string_view name) const {
  for (int i = static_cast<int>(levels_.size()) - 1; i >= 0; --i) {
    if (!levels_[i].name.empty() && levels_[i].name == name) return i;
  }
  return -1;
}

bool UndoLog::TopHas(const RecKey& k) const {
  return !levels_.empty() && levels_.back().entries.contains(k);
}

absl::StatusOr<bool> UndoLog::Record(const RecKey& k, UndoKind kind, std::string_view before) {
  if (!lost_.ok()) return lost_;
  auto& top = levels_.back().entries;
  auto [it, added] = top.try_emplace(k, Entry{kind, static_cast<uint32_t>(before.size()), 0});
  if (!added) return false;
  if (!before.empty()) {
    absl::StatusOr<uint64_t> loc = ArenaAppend(before);
    if (!loc.ok()) {
      top.erase(it);
      return loc.status();
    }
    it->second.loc = *loc;
  }
  Account();
  return true;
}

void UndoLog::Forget(const RecKey& k) {
  // (The arena bytes of a forgotten entry stay until the level ends.)
  if (!levels_.empty()) levels_.back().entries.erase(k);
}

void UndoLog::ReleaseTop() {
  Level top = std::move(levels_.back());
  levels_.pop_back();
  Level& parent = levels_.back();
  Account();  // the peak is reached just before a merge
  // The arena above the top's mark can be given back when no entry that moves down uses it.
  bool arena_used = false;
  if (top.entries.size() > parent.entries.size()) {
    // Merge the smaller map into the larger: the parent's entries win (their before-images are
    // older), so they overwrite the top's; the top's map then becomes the parent's.
    for (auto& [k, e] : parent.entries) top.entries.insert_or_assign(k, e);
    for (auto& [k, e] : top.entries) {
      if (e.len > 0 && e.loc >= top.arena_mark) arena_used = true;
    }
    std::swap(parent.entries, top.entries);
  } else {
    for (auto& [k, e] : top.entries) {
      if (parent.entries.emplace(k, e).second && e.len > 0) arena_used = true;
    }
  }
  if (!arena_used) {
    ArenaTruncate(top.arena_mark);
  } else {
    // Some images moved down: copy just those to the mark and give the rest back, so dropped
    // images of repeated statements do not pile up.
    std::vector<std::pair<Entry*, std::string>> moved;
    for (auto& [k, e] : parent.entries) {
      if (e.len > 0 && e.loc >= top.arena_mark) {
        std::string bytes;
        if (!ArenaRead(e.loc, e.len, &bytes).ok()) return;  // keep everything (still valid)
        moved.emplace_back(&e, std::move(bytes));
      }
    }
    ArenaTruncate(top.arena_mark);
    for (auto& [e, bytes] : moved) {
      absl::StatusOr<uint64_t> loc = ArenaAppend(bytes);
      if (!loc.ok()) {
        lost_ = loc.status();  // reported by the next Record / PopForRollback
        e->len = 0;
        continue;
      }
      e->loc = *loc;
    }
  }
  Recycle(std::move(top.entries));
}

absl::StatusOr<std::vector<UndoAction>> UndoLog::PopForRollback() {
  if (!lost_.ok()) return lost_;
  Account();
  Level top = std::move(levels_.back());
  levels_.pop_back();
  std::vector<UndoAction> out;
  out.reserve(top.entries.size());
  for (auto& [k, e] : top.entries) {
    UndoAction a{k, e.kind, {}};
    if (e.len > 0) {
      if (absl::Status s = ArenaRead(e.loc, e.len, &a.before); !s.ok()) return s;
    }
    out.push_back(std::move(a));
  }
  // Removals first: they give back the room that restoring a larger earlier version may need on
  // the same page (rows this level inserted took it). Within each kind, record order makes the
  // page accesses sequential.
  std::sort(out.begin(), out.end(), [](const UndoAction& a, const UndoAction& b) {
    if (a.kind != b.kind) return a.kind == UndoKind::kRemoveHead;
    return a.key.table != b.key.table ? a.key.table < b.key.table : a.key.rec < b.key.rec;
  });
  ArenaTruncate(top.arena_mark);
  Recycle(std::move(top.entries));
  return out;
}

absl::StatusOr<uint64_t> UndoLog::ArenaAppend(std::string_view bytes) {
  if (!spilling_) {
    if (temp_ == nullptr || mem_.size() + bytes.size() <= memory_limit_) {
      const uint64_t loc = mem_.size();
      mem_.append(bytes);
      return loc;
    }
    spilling_ = true;
    spill_base_ = mem_.size();
    spill_size_ = 0;
  }
  const uint64_t loc = spill_base_ + spill_size_;
  size_t done = 0;
  while (done < bytes.size()) {
    const uint64_t ext = spill_size_ / kTempExtent, off = spill_size_ % kTempExtent;
    if (ext >= temp_extents_.size()) {
      absl::StatusOr<uint64_t> a = temp_->Allocate(kTempExtent);
      if (!a.ok()) {
        return absl::ResourceExhaustedError(
            absl::StrCat("undo log: temp space full: ", a.status().message()));
      }
      temp_extents_.push_back(*a);
    }
    const size_t n = std::min<uint64_t>(bytes.size() - done, kTempExtent - off);
    if (absl::Status s = temp_->Write(temp_extents_[ext] + off, bytes.data() + done, n); !s.ok()) {
      return s;
    }
    done += n;
    spill_size_ += n;
  }
  return loc;
}

absl::Status UndoLog::ArenaRead(uint64_t loc, uint32_t len, std::string* out) const {
  out->resize(len);
  if (!spilling_ || loc + len <= spill_base_) {
    std::memcpy(out->data(), mem_.data() + loc, len);
    return absl::OkStatus();
  }
  uint64_t pos = loc - spill_base_;
  size_t done = 0;
  while (done < len) {
    const uint64_t ext = pos / kTempExtent, off = pos % kTempExtent;
    const size_t n = std::min<uint64_t>(len - done, kTempExtent - off);
    if (absl::Status s = temp_->Read(temp_extents_[ext] + off, out->data() + done, n); !s.ok()) {
      return s;
    }
    done += n;
    pos += n;
  }
  return absl::OkStatus();
}

void UndoLog::ArenaTruncate(uint64_t size) {
  if (spilling_ && size <= spill_base_) {
    for (uint64_t off : temp_extents_) temp_->Release(off, kTempExtent);
    temp_extents_.clear();
    spilling_ = false;
    spill_size_ = 0;
  }
  if (spilling_) {
    spill_size_ = size - spill_base_;
    const size_t keep = (spill_size_ + kTempExtent - 1) / kTempExtent;
    while (temp_extents_.size() > keep) {
      temp_->Release(temp_extents_.back(), kTempExtent);
      temp_extents_.pop_back();
    }
  } else if (size < mem_.size()) {
    mem_.resize(size);
  }
}

void UndoLog::Account() {
  peak_arena_ = std::max<uint64_t>(peak_arena_, mem_.size());
  const UndoStats s = stats();
  peak_memory_ = std::max(peak_memory_, s.memory_bytes);
  peak_spilled_ = std::max(peak_spilled_, s.spilled_bytes);
}

UndoStats UndoLog::stats() const {
  UndoStats s;
  constexpr uint64_t kSlot = sizeof(std::pair<const RecKey, Entry>) + 1;  // + control byte
  for (const Level& l : levels_) {
    s.memory_bytes += l.entries.capacity() * kSlot;
    s.records += l.entries.size();
  }
  for (const auto& m : spare_) s.memory_bytes += m.capacity() * kSlot;
  s.memory_bytes += mem_.capacity();
  s.spilled_bytes = temp_extents_.size() * kTempExtent;
  s.peak_memory_bytes = std::max(peak_memory_, s.memory_bytes);
  s.peak_spilled_bytes = std::max(peak_spilled_, s.spilled_bytes);
  return s;
}

}  // namespace ember::txn
