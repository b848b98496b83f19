// Internals of the B+tree shared by btree.cc (insert, remove, splits), btree_cursor.cc (seek
// and scans) and btree_check.cc (Check). Not part of the index layer's interface; the latching
// protocol is described at the top of btree.cc.
#pragma once
#include <cstdint>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/cache/buffer_cache.h"
#include "engine/cache/page_space.h"
#include "engine/index/btree.h"
#include "engine/page/btree_page.h"

namespace ember::index {

// Where a descent is heading. For internal pages the child taken is the last one whose separator
// is below `key` (or equal to it when `inclusive`), so a descent for an ascending scan or for a
// point operation uses inclusive bounds, and "the last key < x" uses an exclusive one.
struct Bound {
  std::string_view key;
  bool inclusive = true;
  bool infinite = false;  // above every key: the rightmost leaf
};

using CursorEntries = std::vector<std::pair<std::string, uint64_t>>;

struct BTree::Impl {
  Impl(cache::BufferCache* c, cache::PageSpace* s, page::PageNo r)
      : cache(c), space(s), root(r), page_size(c->page_size()),
        max_key(page::BtreeMaxKeySize(c->page_size())) {}

  // Fetches page `no` latched in `mode` and checks its B-tree header; `expected_level` < 0
  // accepts any level. DataLoss naming the page when it is not the node the caller expected.
  absl::StatusOr<cache::PageRef> FetchNode(page::PageNo no, cache::LatchMode mode,
                                           int expected_level, page::BtreeHeader* h) const;

  // The child of the internal page `data` (page `no`, header `h`) to follow for `b`. When
  // `lower` is given it receives the separator of the chosen child (its lower bound), and
  // `*has_lower` whether there is one (false for low_page: the bound is inherited).
  absl::Status PickChild(const uint8_t* data, page::PageNo no, const page::BtreeHeader& h,
                         const Bound& b, page::PageNo* child, std::string* lower,
                         bool* has_lower) const;

  // Latch-couples from the root to the leaf for `b`: shared latches on internal pages, `mode`
  // on the leaf, a parent released only once its child is latched. `lower`/`has_lower` as in
  // PickChild for the leaf as a whole (optional).
  absl::StatusOr<cache::PageRef> DescendToLeaf(const Bound& b, cache::LatchMode mode,
                                               std::string* lower, bool* has_lower) const;

  // Cursor support (btree_cursor.cc): replaces `out` with the entries of one leaf that are at or
  // after `key` (after it when !inclusive) in ascending order, moving right past leaves with none;
  // empty at the end of the tree.
  absl::Status FillAscending(std::string_view key, bool inclusive, CursorEntries* out) const;
  // Same for descending scans: entries at or before `b` (before it when !b.inclusive) of one leaf,
  // in descending order, re-seeking from the root for earlier leaves.
  absl::Status FillDescending(Bound b, CursorEntries* out) const;

  // Insert under tree_mu exclusive, splitting as needed (btree.cc).
  absl::Status InsertSplitting(std::string_view key, uint64_t value, uint64_t txn);

  class Splitter;  // btree.cc: one insert that splits
  class Checker;   // btree_check.cc: one Check walk

  cache::BufferCache* const cache;
  cache::PageSpace* const space;
  const page::PageNo root;
  const uint32_t page_size;
  const uint32_t max_key;
  // Shared: operations that change one leaf's entries (no structural change). Exclusive:
  // splits and Check. Readers never take it.
  mutable std::shared_mutex tree_mu;
};

}  // namespace ember::index
