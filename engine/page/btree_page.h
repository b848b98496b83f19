// B-tree pages: one node of a B-link tree (engine/index/btree.h). Keys are byte strings in
// memcmp order, prefix compressed against the previous key of the same page; values are record
// numbers in leaves and child page numbers in internal nodes. Nothing here does I/O.
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
//   40        ...  entries, each {u16 prefix_len, u16 suffix_len, suffix bytes, u64 value}
//   ...            zeros
//   ps-2-F    F    fence          only with kBtreeHasFence: the node's high key
//   ps-2      2    fence_len F    only with kBtreeHasFence; 1 <= F <= BtreeMaxKeySize
//
// An entry's key is the first prefix_len bytes of the previous entry's key followed by the
// suffix (the first entry has prefix_len 0). Internal entry i is (separator_i, child_i): child_i
// holds the keys k with separator_i <= k < separator_{i+1}; low_page holds keys below
// separator_0. The fence (Lehman and Yao's high key) is above every key of the node and of its
// subtree, and at or below every key of its right sibling; a node has one exactly when it has a
// right sibling.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "engine/page/page.h"

namespace ember::page {

namespace bt {
constexpr size_t kRelationId = 16, kIndexId = 20, kLevel = 22, kFlags = 23, kLeftSibling = 24,
                 kRightSibling = 28, kCount = 32, kDataEnd = 34, kLowPage = 36, kEntries = 40;
// prefix_len + suffix_len + value.
constexpr size_t kEntryOverhead = 12;
// The fence trailer: the key, then its u16 length in the last two bytes of the page.
constexpr size_t kFenceOverhead = 2;
}  // namespace bt
constexpr size_t kBtreeHeaderSize = bt::kEntries;
// `flags` bit: the page ends with a fence (high key).
constexpr uint8_t kBtreeHasFence = 0x01;

// Longest key (and fence) a B-tree page of `page_size` accepts: four entries of this size plus a
// fence of this size always fit, so a split always finds a point where both halves, each with its
// fence, fit (see ChooseSplit in engine/index/btree.cc).
constexpr uint32_t BtreeMaxKeySize(uint32_t page_size) {
  return static_cast<uint32_t>(
      (page_size - kBtreeHeaderSize - bt::kFenceOverhead - 4 * bt::kEntryOverhead) / 5);
}

// The fixed fields after the common page header.
struct BtreeHeader {
  uint32_t relation_id = 0;
  uint16_t index_id = 0;
  uint8_t level = 0;
  uint8_t flags = 0;
  PageNo left_sibling = kNoPage;
  PageNo right_sibling = kNoPage;
  PageNo low_page = kNoPage;
  uint16_t count = 0;      // filled by decoding; ignored by encoding
  uint16_t data_end = 0;   // filled by decoding; ignored by encoding
  uint16_t fence_len = 0;  // filled by decoding (0 without a fence); ignored by encoding
  bool leaf() const { return level == 0; }
  bool has_fence() const { return (flags & kBtreeHasFence) != 0; }
  // Bytes still free on the page (between data_end and the fence trailer).
  size_t free_space(uint32_t page_size) const {
    return page_size - data_end - (has_fence() ? bt::kFenceOverhead + fence_len : 0);
  }
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

// Bytes an entry for `key` takes when it follows `prev` on a page ("" for the first entry).
size_t BtreeEntrySize(std::string_view prev, std::string_view key);
// Bytes `node` takes when encoded, header and fence included (compare with the page size).
size_t BtreeEncodedSize(const BtreeNode& node);

// Reads and checks the fixed fields: the page type, the flags, the offsets and count against the
// page size, low_page against the level, the fence's length and that a page has a fence exactly
// when it has a right sibling. DataLoss naming page `no` on any inconsistency.
absl::Status ReadBtreeHeader(const uint8_t* page, uint32_t page_size, PageNo no, BtreeHeader* h);

// Decodes the whole page, checking every length (so corrupt bytes give DataLoss naming page
// `no`, never a read outside the page), that keys are strictly increasing, below the fence and no
// longer than BtreeMaxKeySize, and that internal entries name a page.
absl::Status DecodeBtreePage(const uint8_t* page, uint32_t page_size, PageNo no, BtreeNode* out);

// Writes `node` into the page after its common header (which the caller initialised with
// InitPage(..., PageType::kBtree, no)); zeroes the unused space. Returns false, leaving the page
// untouched, if the node does not fit, a key or the fence is longer than BtreeMaxKeySize, the
// fence is empty or not above the last key, or the node has a fence but no right sibling (or
// the reverse).
bool EncodeBtreePage(const BtreeNode& node, uint8_t* page, uint32_t page_size);

// Walks the entries of a page in order without materialising the node, with the same checks as
// DecodeBtreePage. REQUIRES: ReadBtreeHeader succeeded on the page. Usage:
//   BtreeEntryReader r(page, ps, no);
//   while (r.Next()) { use r.key(), r.value(); }
//   if (!r.status().ok()) ...
class BtreeEntryReader {
 public:
  BtreeEntryReader(const uint8_t* page, uint32_t page_size, PageNo no);
  // Moves to the next entry. False at the end or on corruption (then status() says why).
  bool Next();
  std::string_view key() const { return key_; }
  uint64_t value() const { return value_; }
  // Index of the current entry.
  size_t index() const { return index_ - 1; }
  const absl::Status& status() const { return status_; }

 private:
  bool Fail(const std::string& what);

  const uint8_t* page_;
  PageNo no_;
  std::string_view fence_;  // "" when the page has none
  uint32_t max_key_;
  bool internal_;
  size_t off_ = kBtreeHeaderSize;
  size_t end_;
  uint16_t count_;
  uint16_t index_ = 0;
  std::string key_;
  uint64_t value_ = 0;
  absl::Status status_;
};

}  // namespace ember::page
