// The undo log of a transaction's savepoints (architecture.md, "Savepoints").
//
// A stack of savepoints: the transaction-level one at the bottom, then user savepoints and
// statement savepoints as they nest. Each savepoint maps a record (table, record number) to what
// undoes every change the savepoint made to it: either "remove the head version" (the record's
// newest version before the savepoint was not ours, or the record is new) or "put back our own
// earlier version" (its raw row, the before-image). A record gets one entry per savepoint however
// often it changes, so releasing a savepoint (merging it into its parent) and rolling one back
// both cost O(records touched), which is what Firebird 1.0 / InterBase 7.1 lacked in the
// 2004 mass-update experiment.
//
// Layout of a savepoint, chosen so a statement over a million rows stays in the CPU caches:
// which records have an entry, and which of those carry a before-image, are two bitmaps in
// chunks of 64 consecutive record numbers (a hash map keyed by chunk, so a data page's records
// share one or two chunks and a scan looks up a chunk once per 64 records, not per record);
// the before-images themselves are a vector in the order they were taken. A "remove the head"
// entry thus costs a bit, not a hash slot. Forget clears the bits and leaves the image in the
// vector: of several images of one record only the last one taken counts, and only while the
// record's image bit is set (release and rollback walk the vector backwards).
//
// Before-images live in an arena: in memory up to `memory_limit` bytes, then in TempSpace
// extents (the same TempSpace as temporary BLOBs). A savepoint that is released with nothing of
// its arena still referenced, or rolled back, gives its arena bytes back (the arena is a stack
// too), so repeated statements over the same rows do not grow it.
//
// Not thread-safe: a transaction is used by one thread at a time.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ember/stats.h"
#include "engine/io/temp_space.h"
#include "engine/util/large_alloc.h"

namespace ember::txn {

struct RecKey {
  uint32_t table = 0;
  uint64_t rec = 0;
  bool operator==(const RecKey& o) const { return table == o.table && rec == o.rec; }
  template <typename H>
  friend H AbslHashValue(H h, const RecKey& k) {
    return H::combine(std::move(h), k.table, k.rec);
  }
};

enum class UndoKind : uint8_t {
  kRemoveHead,  // drop the head version (ours); the version below, if any, is the record again
  kRestoreOwn,  // overwrite our head with the before-image (an earlier version of ours)
};

// One action of a rollback, in the order to apply.
struct UndoAction {
  RecKey key;
  UndoKind kind = UndoKind::kRemoveHead;
  std::string before;  // kRestoreOwn: the raw row to put back
};
// A rollback's actions: a million-row rollback makes ~56 MB of them at once, in huge pages
// (util/large_alloc.h) rather than 14K fresh 4 KB pages at ~10 us each.
using UndoActions = std::vector<UndoAction, util::LargeAllocator<UndoAction>>;

// Size of the log (the public ember::UndoLogStats).
using UndoStats = ember::UndoLogStats;

class UndoLog {
 public:
  // `temp` may be null (then the arena never spills and memory_limit is ignored).
  UndoLog(io::TempSpace* temp, uint64_t memory_limit);
  ~UndoLog();
  UndoLog(const UndoLog&) = delete;
  UndoLog& operator=(const UndoLog&) = delete;

  // Empties the log for another transaction (no levels, no temp space, peaks from now), keeping
  // the memory it holds. Returns the bytes kept.
  uint64_t Reset();

  size_t depth() const { return levels_.size(); }
  // Pushes a savepoint; `name` empty for statement and transaction-level savepoints.
  void Push(std::string name);
  void Rename(size_t level, std::string name) { levels_[level].name = std::move(name); }
  // The innermost level named `name`, or -1.
  int Find(std::string_view name) const;

  // Whether the top savepoint already has an entry for `k` (then a further change to the record
  // needs no before-image). Not const: it moves the top level's one-chunk lookup cache.
  bool TopHas(const RecKey& k);
  // Adds the entry for `k` to the top savepoint unless it has one; true if added.
  // REQUIRES: depth() > 0. ResourceExhausted if the temp space is full.
  absl::StatusOr<bool> Record(const RecKey& k, UndoKind kind, std::string_view before = {});
  // Drops the top savepoint's entry for `k` (the change it recorded was undone at once).
  void Forget(const RecKey& k);

  // Merges the top savepoint into the one below: entries for records the parent has no entry
  // for move down; the others are dropped (the parent's before-image is older).
  // REQUIRES: depth() >= 2.
  void ReleaseTop();
  // Pops the top savepoint and returns the actions that undo it.
  absl::StatusOr<UndoActions> PopForRollback();

  UndoStats stats() const;

 private:
  // 64 consecutive record numbers of one table: bit i is record (hi << 6) + i.
  struct ChunkKey {
    uint32_t table;
    uint64_t hi;
    bool operator==(const ChunkKey& o) const { return table == o.table && hi == o.hi; }
    template <typename H>
    friend H AbslHashValue(H h, const ChunkKey& k) {
      return H::combine(std::move(h), k.table, k.hi);
    }
  };
  struct Chunk {
    uint64_t has = 0;  // records with an entry
    uint64_t img = 0;  // of those, the ones whose entry is kRestoreOwn
  };
  // 24 bytes (a RecKey member would pad it to 32): a million-row statement keeps one each.
  struct Image {
    uint32_t table;
    uint32_t len;  // before-image length
    uint64_t rec;
    uint64_t loc;  // arena offset of the before-image
    RecKey key() const { return RecKey{table, rec}; }
  };
  static_assert(sizeof(Image) == 24);
  struct Level {
    std::string name;
    absl::flat_hash_map<ChunkKey, Chunk, absl::Hash<ChunkKey>, std::equal_to<ChunkKey>,
                        util::LargeAllocator<std::pair<const ChunkKey, Chunk>>>
        chunks;
    // In the order taken; see the file comment for stale ones. Large: huge-page memory.
    std::vector<Image, util::LargeAllocator<Image>> images;
    uint64_t records = 0;     // entries (bits set in `has`)
    uint64_t arena_mark = 0;  // arena size when the level was pushed
    // The chunk last looked up: consecutive records share it. Reset whenever `chunks` changes
    // shape (an insert may move every chunk).
    ChunkKey last_key{~0u, ~0ull};
    Chunk* last = nullptr;

    Chunk* Find(const RecKey& k);
    Chunk& Get(const RecKey& k);  // inserts an empty chunk if there is none
    // After the level moved (a map may keep small tables inline, so `last` may not follow).
    void ResetCache() {
      last_key = ChunkKey{~0u, ~0ull};
      last = nullptr;
    }
    void Clear();
  };
  static ChunkKey KeyOf(const RecKey& k) { return ChunkKey{k.table, k.rec >> 6}; }
  static uint64_t BitOf(const RecKey& k) { return uint64_t{1} << (k.rec & 63); }

  absl::StatusOr<uint64_t> ArenaAppend(std::string_view bytes);
  absl::Status ArenaRead(uint64_t loc, uint32_t len, std::string* out) const;
  void ArenaTruncate(uint64_t size);
  // Moves the images that went down from a released level (all at or above `mark`, in arena
  // order) to `mark`, giving back the bytes of the images that were dropped.
  void CompactMoved(std::span<Image> moved, uint64_t mark);
  void Account();
  void Recycle(Level&& l);
  // Before an image is added to a full vector: grows `top` (and the arena) ahead for a
  // statement that looks like it is going over its parent's records again.
  void GrowForStatement(Level& top, size_t image_len);

  io::TempSpace* temp_;
  const uint64_t memory_limit_;
  std::vector<Level> levels_;

  // The arena: offsets [0, spill_base_) are the memory part `mem_`; from spill_base_ on, the
  // bytes live in TempSpace extents of kTempExtent each (an image may straddle two).
  static constexpr uint64_t kTempExtent = uint64_t{1} << 20;
  std::basic_string<char, std::char_traits<char>, util::LargeAllocator<char>> mem_;
  bool spilling_ = false;
  uint64_t spill_base_ = 0;
  uint64_t spill_size_ = 0;             // bytes used in the temp part
  std::vector<uint64_t> temp_extents_;  // TempSpace offsets
  std::vector<Level> spare_;            // cleared levels kept for reuse (their capacity)
  uint64_t peak_arena_ = 0;
  absl::Status lost_;  // an image could not be kept (temp space full): the log is unusable
  uint64_t peak_memory_ = 0;
  uint64_t peak_spilled_ = 0;
};

}  // namespace ember::txn
