// UndoLog (see undo_log.h).
#include "engine/txn/undo_log.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ember::txn {

UndoLog::UndoLog(io::TempSpace* temp, uint64_t memory_limit)
    : temp_(temp), memory_limit_(memory_limit) {}

UndoLog::~UndoLog() { ArenaTruncate(0); }

uint64_t UndoLog::Reset() {
  while (!levels_.empty()) {
    Level l = std::move(levels_.back());
    levels_.pop_back();
    Recycle(std::move(l));
  }
  ArenaTruncate(0);
  lost_ = absl::OkStatus();
  const uint64_t held = stats().memory_bytes;
  peak_arena_ = 0;
  peak_memory_ = held;
  peak_spilled_ = 0;
  return held;
}

UndoLog::Chunk* UndoLog::Level::Find(const RecKey& k) {
  const ChunkKey ck = KeyOf(k);
  if (ck == last_key) return last;
  auto it = chunks.find(ck);
  if (it == chunks.end()) return nullptr;
  last_key = ck;
  last = &it->second;
  return last;
}

UndoLog::Chunk& UndoLog::Level::Get(const RecKey& k) {
  const ChunkKey ck = KeyOf(k);
  if (ck == last_key) return *last;
  last_key = ck;
  last = &chunks[ck];  // an insert may move the others, but `last` is the only pointer kept
  return *last;
}

void UndoLog::Level::Clear() {
  name.clear();
  chunks.clear();
  images.clear();
  records = 0;
  arena_mark = 0;
  ResetCache();
}

void UndoLog::Push(std::string name) {
  // A level with its capacity kept from an earlier one: a statement over the same rows as the
  // last one does not grow (rehash, reallocate) its chunk map and image vector again.
  Level l;
  if (!spare_.empty()) {
    l = std::move(spare_.back());
    spare_.pop_back();
  }
  l.name = std::move(name);
  l.arena_mark = spilling_ ? spill_base_ + spill_size_ : mem_.size();
  levels_.push_back(std::move(l));
  for (Level& x : levels_) x.ResetCache();  // the push may have moved them all
}

void UndoLog::GrowForStatement(Level& top, size_t image_len) {
  // A statement that has taken many images over a parent with many entries is most likely
  // going over the same rows again (VAL = VAL + 0 once more): grow the image vector and the
  // arena towards the parent's size in one or two steps instead of doubling from nothing.
  // Doubling a vector and a string of tens of MB copies each several times and faults in
  // twice the memory; update/2 of a million rows spent about a fifth of its time on that.
  // Small statements (under kGrowAfter images) keep the plain doubling and reserve nothing.
  constexpr size_t kGrowAfter = 1024;
  if (levels_.size() < 2 || top.images.size() < kGrowAfter) return;
  const uint64_t parent = levels_[levels_.size() - 2].records;
  const size_t have = top.images.size();
  if (parent <= have) return;  // past the parent's size: plain doubling
  const size_t want = static_cast<size_t>(std::min<uint64_t>(parent, uint64_t{64} * have));
  top.images.reserve(want);
  if (!spilling_) {
    // The arena by the average image so far (a quarter over), within the memory limit (past it the
    // arena spills to temp space and the reservation would be wasted).
    const uint64_t used = mem_.size() > top.arena_mark ? mem_.size() - top.arena_mark : 0;
    const uint64_t avg = used / have * 5 / 4 + 1;  // some room for longer images
    uint64_t target = mem_.size() + (want - have) * std::max<uint64_t>(avg, image_len);
    if (temp_ != nullptr) target = std::min<uint64_t>(target, memory_limit_);
    if (target > mem_.capacity()) mem_.reserve(target);
  }
}

void UndoLog::Recycle(Level&& l) {
  l.Clear();
  if (spare_.size() < 2) spare_.push_back(std::move(l));
}

int UndoLog::Find(std::string_view name) const {
  for (int i = static_cast<int>(levels_.size()) - 1; i >= 0; --i) {
    if (!levels_[i].name.empty() && levels_[i].name == name) return i;
  }
  return -1;
}

bool UndoLog::TopHas(const RecKey& k) {
  if (levels_.empty()) return false;
  const Chunk* c = levels_.back().Find(k);
  return c != nullptr && (c->has & BitOf(k)) != 0;
}

absl::StatusOr<bool> UndoLog::Record(const RecKey& k, UndoKind kind, std::string_view before) {
  if (!lost_.ok()) return lost_;
  Level& top = levels_.back();
  Chunk& c = top.Get(k);
  const uint64_t bit = BitOf(k);
  if (c.has & bit) return false;
  if (kind == UndoKind::kRestoreOwn) {
    if (top.images.size() == top.images.capacity()) GrowForStatement(top, before.size());
    uint64_t loc = 0;
    if (!before.empty()) {
      absl::StatusOr<uint64_t> l = ArenaAppend(before);
      if (!l.ok()) return l.status();
      loc = *l;
    }
    top.images.push_back(Image{k.table, static_cast<uint32_t>(before.size()), k.rec, loc});
    c.img |= bit;
  }
  c.has |= bit;
  ++top.records;
  Account();
  return true;
}

void UndoLog::Forget(const RecKey& k) {
  // (The arena bytes and the vector slot of a forgotten image stay until the level ends; the
  // cleared image bit makes the slot stale.)
  if (levels_.empty()) return;
  Level& top = levels_.back();
  Chunk* c = top.Find(k);
  const uint64_t bit = BitOf(k);
  if (c == nullptr || (c->has & bit) == 0) return;
  c->has &= ~bit;
  c->img &= ~bit;
  --top.records;
}

void UndoLog::ReleaseTop() {
  Level top = std::move(levels_.back());
  levels_.pop_back();
  top.ResetCache();
  Level& parent = levels_.back();
  Account();  // the peak is reached just before a merge
  // Entries for records the parent has no entry for move down; the others are dropped (the
  // parent's before-image is older). Per chunk that is a few word operations; afterwards the
  // top's image bits mark exactly the images that move.
  for (auto& [ck, c] : top.chunks) {
    if (c.has == 0) continue;
    Chunk& pc = parent.chunks[ck];
    const uint64_t moved = c.has & ~pc.has;
    pc.has |= moved;
    pc.img |= c.img & moved;
    parent.records += static_cast<uint64_t>(std::popcount(moved));
    c.img &= moved;
  }
  parent.ResetCache();  // the inserts may have moved its chunks
  // The images that move, newest first (an older image of the same record is stale): each one
  // clears its bit so that earlier ones for the record are skipped.
  const size_t first = parent.images.size();
  for (auto it = top.images.rbegin(); it != top.images.rend(); ++it) {
    Chunk* c = top.Find(it->key());
    const uint64_t bit = BitOf(it->key());
    if (c == nullptr || (c->img & bit) == 0) continue;
    c->img &= ~bit;
    parent.images.push_back(*it);
  }
  std::reverse(parent.images.begin() + static_cast<std::ptrdiff_t>(first), parent.images.end());
  CompactMoved(std::span<Image>(parent.images).subspan(first), top.arena_mark);
  Recycle(std::move(top));
}

void UndoLog::CompactMoved(std::span<Image> moved, uint64_t mark) {
  // Every moved image lies at or above `mark` (the arena is a stack), in arena order.
  uint64_t end = mark;
  for (const Image& m : moved) {
    if (m.len > 0) end = std::max(end, m.loc + m.len);
  }
  if (!spilling_ || end <= spill_base_) {
    // All in memory: slide each image down over the dropped ones.
    uint64_t to = mark;
    for (Image& m : moved) {
      if (m.len == 0) continue;
      if (m.loc != to) std::memmove(mem_.data() + to, mem_.data() + m.loc, m.len);
      m.loc = to;
      to += m.len;
    }
    ArenaTruncate(to);
    return;
  }
  // Some in temp space: read them out, give the level's arena back and append them again.
  std::vector<std::string> bytes(moved.size());
  for (size_t i = 0; i < moved.size(); ++i) {
    if (moved[i].len == 0) continue;
    if (!ArenaRead(moved[i].loc, moved[i].len, &bytes[i]).ok()) return;  // keep all (valid)
  }
  ArenaTruncate(mark);
  for (size_t i = 0; i < moved.size(); ++i) {
    if (moved[i].len == 0) continue;
    absl::StatusOr<uint64_t> loc = ArenaAppend(bytes[i]);
    if (!loc.ok()) {
      lost_ = loc.status();  // reported by the next Record / PopForRollback
      moved[i].len = 0;
      continue;
    }
    moved[i].loc = *loc;
  }
}

absl::StatusOr<UndoActions> UndoLog::PopForRollback() {
  if (!lost_.ok()) return lost_;
  Account();
  Level top = std::move(levels_.back());
  levels_.pop_back();
  top.ResetCache();
  UndoActions out;
  out.reserve(top.records);
  // Removals first: they give back the room that restoring a larger earlier version may need on
  // the same page (rows this level inserted took it). Within each kind, record order makes the
  // page accesses sequential.
  std::vector<std::pair<ChunkKey, Chunk>> chunks(top.chunks.begin(), top.chunks.end());
  std::sort(chunks.begin(), chunks.end(), [](const auto& a, const auto& b) {
    return a.first.table != b.first.table ? a.first.table < b.first.table : a.first.hi < b.first.hi;
  });
  for (const auto& [ck, c] : chunks) {
    for (uint64_t bits = c.has & ~c.img; bits != 0; bits &= bits - 1) {
      const uint64_t rec = (ck.hi << 6) | static_cast<uint64_t>(std::countr_zero(bits));
      out.push_back(UndoAction{RecKey{ck.table, rec}, UndoKind::kRemoveHead, {}});
    }
  }
  const size_t first_restore = out.size();
  for (auto it = top.images.rbegin(); it != top.images.rend(); ++it) {
    Chunk* c = top.Find(it->key());
    const uint64_t bit = BitOf(it->key());
    if (c == nullptr || (c->img & bit) == 0) continue;  // stale
    c->img &= ~bit;
    UndoAction a{it->key(), UndoKind::kRestoreOwn, {}};
    if (it->len > 0) {
      if (absl::Status s = ArenaRead(it->loc, it->len, &a.before); !s.ok()) return s;
    }
    out.push_back(std::move(a));
  }
  std::sort(out.begin() + static_cast<std::ptrdiff_t>(first_restore), out.end(),
            [](const UndoAction& a, const UndoAction& b) {
              return a.key.table != b.key.table ? a.key.table < b.key.table : a.key.rec < b.key.rec;
            });
  ArenaTruncate(top.arena_mark);
  Recycle(std::move(top));
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
  constexpr uint64_t kSlot = sizeof(std::pair<const ChunkKey, Chunk>) + 1;  // + control byte
  auto level_bytes = [](const Level& l) {
    return l.chunks.capacity() * kSlot + l.images.capacity() * sizeof(Image);
  };
  for (const Level& l : levels_) {
    s.memory_bytes += level_bytes(l);
    s.records += l.records;
  }
  for (const Level& l : spare_) s.memory_bytes += level_bytes(l);
  s.memory_bytes += mem_.capacity();
  s.spilled_bytes = temp_extents_.size() * kTempExtent;
  s.peak_memory_bytes = std::max(peak_memory_, s.memory_bytes);
  s.peak_spilled_bytes = std::max(peak_spilled_, s.spilled_bytes);
  return s;
}

}  // namespace ember::txn
