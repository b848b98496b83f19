// B-tree pages: one node of a B-link tree (engine/index/btree.h). Keys are byte strings in
// memcmp order, prefix compressed against the previous key of the same page except at restart
// entries, which are stored whole and listed in a restart array so that a search can binary
// search them and walk only one group; values are record numbers in leaves and child page
// numbers in internal nodes. Nothing here does I/O.
//
//   offset    size field
//   0         16   page header (type kBtree)
//   16        4    relation_id
//   20        2    index_id
//   22        1    level          0 = leaf
//   23        1    flags          bit 0 kBtreeHasFence; other bits 0
//   24        4    left_sibling   a page to the left on the same level (0 = leftmost); a hint
//   28        4    right_sibling  0 = rightmost of its level
//   32        2    count          number of entries
//   34        2    data_end       offset one past the last entry
//   36        4    low_page       internal: child for keys below the first separator; leaf: 0
//   40        2    restart_count  R: entries in the restart array (0 exactly when count is 0)
//   42        ...  entries, each {varint prefix_len, varint size (suffix_len << 3 | value bytes -
//   1),
//                  suffix bytes, value (1-8 bytes, little-endian)}
//   ...            zeros
//   L-2R      2R   restarts       u16 offsets of the restart entries, increasing; the first is 42
//   L=ps-2-F  F    fence          only with kBtreeHasFence: the node's high key (L = ps without)
//   ps-2      2    fence_len F    only with kBtreeHasFence; 1 <= F <= BtreeMaxKeySize
//
// An entry's key is the first prefix_len bytes of the previous entry's key followed by the
// suffix. A restart entry has prefix_len 0 (the first entry is one); every other entry stores the
// longest common prefix with the previous key (searches rely on that). Internal entry i is
// (separator_i, child_i): child_i holds the keys k with separator_i <= k < separator_{i+1};
// low_page holds keys below separator_0. The fence (Lehman and Yao's high key) is above every key
// of the node and of its subtree, and at or below every key of its right sibling; a node has one
// exactly when it has a right sibling.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/page/page.h"

namespace ember::page {

namespace bt {
constexpr size_t kRelationId = 16, kIndexId = 20, kLevel = 22, kFlags = 23, kLeftSibling = 24,
                 kRightSibling = 28, kCount = 32, kDataEnd = 34, kLowPage = 36, kRestartCount = 40,
                 kEntries = 42;
// The most bytes an entry takes besides its suffix: prefix_len (keys are shorter than 16384
// bytes: two varint bytes), the size word (suffix_len << 3: three) and the value (eight).
constexpr size_t kEntryMaxOverhead = 2 + 3 + 8;
// The fewest bytes an entry takes (an empty suffix and small numbers).
constexpr size_t kEntryMinSize = 3;
// The fence trailer: the key, then its u16 length in the last two bytes of the page.
constexpr size_t kFenceOverhead = 2;
// One restart array slot.
constexpr size_t kRestartSize = 2;
}  // namespace bt
constexpr size_t kBtreeHeaderSize = bt::kEntries;
// `flags` bit: the page ends with a fence (high key).
constexpr uint8_t kBtreeHasFence = 0x01;
// EncodeBtreePage makes every this-many-th entry a restart; an in-place insert starts a new
// restart group once it lands this many entries past its group's restart.
constexpr size_t kBtreeRestartInterval = 16;

// Longest key (and fence) a B-tree page of `page_size` accepts: four entries of this size, each
// a restart, plus a fence of this size always fit, so a split always finds a point where both
// halves, each with its fence, fit (see ChooseSplit in engine/index/btree.cc).
constexpr uint32_t BtreeMaxKeySize(uint32_t page_size) {
  return static_cast<uint32_t>((page_size - kBtreeHeaderSize - bt::kFenceOverhead -
                                4 * (bt::kEntryMaxOverhead + bt::kRestartSize)) /
                               5);
}
// Free bytes a page needs so that an in-place insert of any key (a new restart included) fits.
// (The entry after the new one only ever shrinks: see BtreeInsertAt.)
constexpr size_t BtreeInsertRoom(size_t key_size) {
  return bt::kEntryMaxOverhead + bt::kRestartSize + key_size;
}
// Bytes of an entry with a `prefix`-byte prefix, a `suffix`-byte suffix and `value`.
size_t BtreeEntryBytes(size_t prefix, size_t suffix, uint64_t value);

// The fixed fields after the common page header.
struct BtreeHeader {
  uint32_t relation_id = 0;
  uint16_t index_id = 0;
  uint8_t level = 0;
  uint8_t flags = 0;
  PageNo left_sibling = kNoPage;
  PageNo right_sibling = kNoPage;
  PageNo low_page = kNoPage;
  uint16_t count = 0;          // filled by decoding; ignored by encoding
  uint16_t data_end = 0;       // filled by decoding; ignored by encoding
  uint16_t fence_len = 0;      // filled by decoding (0 without a fence); ignored by encoding
  uint16_t restart_count = 0;  // filled by decoding; ignored by encoding
  bool leaf() const { return level == 0; }
  bool has_fence() const { return (flags & kBtreeHasFence) != 0; }
  // Offset of the restart array (it ends where the fence trailer, or the page, begins).
  size_t restarts_at(uint32_t page_size) const {
    return page_size - (has_fence() ? bt::kFenceOverhead + fence_len : 0) -
           bt::kRestartSize * restart_count;
  }
  // Bytes still free on the page (between data_end and the restart array).
  size_t free_space(uint32_t page_size) const { return restarts_at(page_size) - data_end; }
};

struct BtreeEntry {
  std::string key;
  uint64_t value = 0;
};

// A decoded page: the header plus every entry with its full key, and the fence. Encoding takes
// the presence of the fence from `fence` (setting or clearing kBtreeHasFence in `flags`).
struct BtreeNode : BtreeHeader {
  std::vector<BtreeEntry> entries;
  std::optional<std::string> fence;
};

// The fence of a page whose header `h` ReadBtreeHeader accepted ("" when it has none). The view
// points into the page.
std::string_view BtreeFence(const uint8_t* page, uint32_t page_size, const BtreeHeader& h);

// The first key of a page whose header `h` ReadBtreeHeader accepted (a restart entry: stored
// whole), viewing the page; nullopt when the page has no entry or its first does not parse.
std::optional<std::string_view> BtreeFirstKey(const uint8_t* page, const BtreeHeader& h);

// Bytes an entry for (key, value) takes when it follows `prev` on a page ("" for a restart).
size_t BtreeEntrySize(std::string_view prev, std::string_view key, uint64_t value);
// Bytes `node` takes when encoded, header, restart array and fence included (compare with the
// page size).
size_t BtreeEncodedSize(const BtreeNode& node);

// Reads and checks the fixed fields: the page type, the flags, the offsets, count and restart
// count against the page size, low_page against the level, the fence's length and that a page
// has a fence exactly when it has a right sibling. DataLoss naming page `no` on any
// inconsistency. (The restart offsets themselves are checked where they are used.)
absl::Status ReadBtreeHeader(const uint8_t* page, uint32_t page_size, PageNo no, BtreeHeader* h);

// Decodes the whole page, checking every length (so corrupt bytes give DataLoss naming page
// `no`, never a read outside the page), the restart array against the entries, that prefix
// lengths are the longest common prefixes, that keys are strictly increasing, below the fence and
// no longer than BtreeMaxKeySize, and that internal entries name a page.
absl::Status DecodeBtreePage(const uint8_t* page, uint32_t page_size, PageNo no, BtreeNode* out);

// Writes `node` into the page after its common header (which the caller initialised with
// InitPage(..., PageType::kBtree, no)); zeroes the unused space. Returns false, leaving the page
// untouched, if the node does not fit, a key or the fence is longer than BtreeMaxKeySize, the
// fence is empty or not above the last key, or the node has a fence but no right sibling (or
// the reverse).
bool EncodeBtreePage(const BtreeNode& node, uint8_t* page, uint32_t page_size);

// Where a key falls among the entries of a page, found by BtreeLowerBound without rebuilding any
// key: a binary search over the restart entries picks a group, and within it an entry's prefix
// length against the bytes the search key shares with the previous entry decides most
// comparisons (only entries whose prefix length equals that count need their suffix compared).
// "The slot" is the position of the first entry >= key.
struct BtreeSlot {
  uint16_t offset = 0;       // byte offset of the entry at the slot (data_end when there is none)
  uint16_t prev_offset = 0;  // offset of the entry before it (0 when there is none)
  uint16_t prev_common = 0;  // bytes the key shares with the entry before (0 when none)
  uint16_t next_common = 0;  // bytes the key shares with the entry at the slot (0 when none)
  uint16_t restart = 0;      // the restart group holding the slot: the last restart <= offset
  uint16_t walked = 0;       // entries from that group's restart entry to the slot
  bool equal = false;        // the entry at the slot equals the key
  uint64_t prev_value = 0;   // value of the entry before the slot (when there is one)
  uint64_t value = 0;        // value of the entry at the slot (when there is one)
  bool has_prev() const { return prev_offset != 0; }
  bool at_restart() const { return walked == 0; }
};

// Finds `key` on a page whose header `h` ReadBtreeHeader accepted. Every length is checked
// against the page (corrupt bytes give DataLoss naming page `no`, never a read outside it); the
// order of the keys is not (Validate and DecodeBtreePage check it).
absl::Status BtreeLowerBound(const uint8_t* page, uint32_t page_size, PageNo no,
                             const BtreeHeader& h, std::string_view key, BtreeSlot* slot);

// Inserts (key, value) at `slot` (from BtreeLowerBound for this key on this page, not equal) in
// place: the entry after it loses the bytes it now shares with the new key from its suffix. The
// new entry becomes a restart when it lands on a restart entry's place, or kBtreeRestartInterval
// entries into a group. Returns false, leaving the page untouched, when the entry does not fit
// (it always fits in BtreeInsertRoom(key.size()) free bytes). Updates h's count, data_end and
// restart_count. REQUIRES: key within BtreeMaxKeySize and below the page's fence.
bool BtreeInsertAt(uint8_t* page, uint32_t page_size, BtreeHeader* h, const BtreeSlot& slot,
                   std::string_view key, uint64_t value);

// Removes the entry at `slot` (from BtreeLowerBound for `key`, equal) in place; the entry after it
// takes back the bytes it shared with the removed key (and becomes the restart when the removed
// entry was one). Never grows the page. Updates h. Returns false, leaving the page untouched,
// when the entry or the one after it does not parse (a corrupt page).
bool BtreeRemoveAt(uint8_t* page, uint32_t page_size, BtreeHeader* h, const BtreeSlot& slot,
                   std::string_view key);

// A split of the last node of its level (no right sibling) at its right end, done in place: an
// ascending load splits a leaf every few hundred inserts, and decoding the whole leaf into
// strings and encoding two pages for each split was about a sixth of the load's instructions.
// The page keeps its entries up to `cut` and gains a fence; the entries from `cut` on (part of
// the last restart group, often none) and the new one go to a new right page.
struct BtreeTailSplit {
  uint16_t cut = 0;               // offset of the first entry that moves right
  uint16_t keep_count = 0;        // entries the page keeps
  std::string separator;          // the page's fence, and the separator for the parent
  std::vector<BtreeEntry> right;  // the right page's entries: those moved, then the new one
};

// Plans a tail split of the page (header `h`, accepted by ReadBtreeHeader) for (key, value),
// `key` being above every key of the page: keeps as many entries as fit with the fence, moving
// at most the last restart group but its first entry. Returns false when the page has a right
// sibling, `key` is not above its last key, or no such cut fits both halves; DataLoss naming
// page `no` when the last restart group does not parse. Changes nothing.
absl::StatusOr<bool> BtreePlanTailSplit(const uint8_t* page, uint32_t page_size, PageNo no,
                                        const BtreeHeader& h, std::string_view key, uint64_t value,
                                        BtreeTailSplit* plan);

// Applies a plan of BtreePlanTailSplit to the same page: drops the entries from plan.cut on and
// gives the page the fence plan.separator and `right` as its right sibling. Updates h.
void BtreeApplyTailSplit(uint8_t* page, uint32_t page_size, BtreeHeader* h,
                         const BtreeTailSplit& plan, PageNo right);

// Walks the entries of a page in order without materialising the node, with the same checks as
// DecodeBtreePage. REQUIRES: ReadBtreeHeader succeeded on the page. Usage:
//   BtreeEntryReader r(page, ps, no);
//   while (r.Next()) { use r.key(), r.value(); }
//   if (!r.status().ok()) ...
class BtreeEntryReader {
 public:
  BtreeEntryReader(const uint8_t* page, uint32_t page_size, PageNo no);
  // Starts the walk at `slot` (from BtreeLowerBound for `key` on this page): the next Next()
  // returns the entry at the slot. The order check against the entry before it is skipped.
  void StartAt(const BtreeSlot& slot, std::string_view key);
  // Moves to the next entry. False at the end or on corruption (then status() says why).
  bool Next();
  std::string_view key() const { return key_; }
  uint64_t value() const { return value_; }
  // Offset one past the current entry.
  size_t end_offset() const { return off_; }
  // Index of the current entry (counted from the walk's start after StartAt).
  size_t index() const { return index_ - 1; }
  const absl::Status& status() const { return status_; }

 private:
  bool Fail(const std::string& what);

  const uint8_t* page_;
  PageNo no_;
  std::string_view fence_;  // "" when the page has none
  uint32_t max_key_;
  bool internal_;
  const uint8_t* restarts_ = nullptr;  // the restart array
  uint16_t restart_count_ = 0;
  uint16_t next_restart_ = 0;  // index of the next restart the walk must meet
  size_t off_ = kBtreeHeaderSize;
  size_t end_;
  uint16_t count_;
  uint16_t index_ = 0;
  bool check_order_ = true;  // false for the first entry after StartAt
  bool counting_ = true;     // index_ counts from the first entry (false after StartAt)
  std::string key_;
  uint64_t value_ = 0;
  absl::Status status_;
};

// Fills one B-tree page entry by entry in increasing key order, for a bottom-up (bulk) build:
// the entries are encoded once, into a buffer of the page's size, as EncodeBtreePage lays them
// out (a restart every kBtreeRestartInterval entries), without materialising a BtreeNode; Finish
// adds the header, the restart array and the fence to a page.
class BtreePageBuilder {
 public:
  explicit BtreePageBuilder(uint32_t page_size);
  // Starts an empty node.
  void Reset(uint32_t relation_id, uint16_t index_id, uint8_t level);
  // Bytes the page takes with (key, value) added and a fence of `fence_bytes` bytes (0: none).
  size_t SizeWith(std::string_view key, uint64_t value, size_t fence_bytes) const;
  // The same in two steps for a caller that adds the entry next: the prefix the entry would
  // share (0 at a restart), then the bytes the page takes now and what the entry adds.
  size_t PrefixFor(std::string_view key) const;
  size_t used() const { return end_ + kRestartBytes * restarts_.size(); }
  size_t Growth(std::string_view key, uint64_t value, size_t prefix) const;
  // Appends (key, value). REQUIRES: key above the last key, at most BtreeMaxKeySize, and
  // SizeWith(...) within the page for the fence the page will get.
  void Add(std::string_view key, uint64_t value) { Add(key, value, PrefixFor(key)); }
  void Add(std::string_view key, uint64_t value, size_t prefix);  // prefix from PrefixFor
  size_t count() const { return count_; }
  std::string_view last_key() const { return last_; }
  // Writes the node into `page` (whose common header InitPage set): `fence` empty = none (then
  // `right` must be kNoPage). False, leaving the page untouched, when it does not fit or the
  // fence is not above the last key.
  bool Finish(uint8_t* page, PageNo left, PageNo right, PageNo low_page,
              std::string_view fence) const;

 private:
  static constexpr size_t kRestartBytes = 2;  // bt::kRestartSize
  uint32_t page_size_;
  uint32_t relation_id_ = 0;
  uint16_t index_id_ = 0;
  uint8_t level_ = 0;
  std::vector<uint8_t> buf_;       // page-sized; entries from kBtreeHeaderSize to end_
  size_t end_ = kBtreeHeaderSize;  // one past the last entry
  std::vector<uint16_t> restarts_;
  size_t count_ = 0;
  std::string last_;
};

}  // namespace ember::page
