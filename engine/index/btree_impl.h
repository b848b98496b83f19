// Internals of the B-link tree shared by btree.cc (descent, insert, remove, splits, repairs),
// btree_cursor.cc (seek and scans) and btree_check.cc (Check). Not part of the index layer's
// interface; the latching protocol is described at the top of btree.cc.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/cache/buffer_cache.h"
#include "engine/cache/page_space.h"
#include "engine/index/btree.h"
#include "engine/page/btree_page.h"
#include "engine/util/mutex.h"

namespace ember::index {

// Where a descent is heading. For internal pages the child taken is the last one whose separator
// is below `key` (or equal to it when `inclusive`), so a descent for an ascending scan or for a
// point operation uses inclusive bounds, and "the last key < x" uses an exclusive one. The same
// rule decides when a node's fence sends the descent to the right sibling: the bound is at or
// past the fence (inclusive), or past it (exclusive).
struct Bound {
  std::string_view key;
  bool inclusive = true;
  bool infinite = false;  // above every key: the rightmost leaf
};

// A right-sibling link some descent had to follow: `right` (level `level`) is reachable from
// `left` only through left's right_sibling, its parent lacking the separator `fence` (left's
// fence). What a crash between writing a split node and writing its parent leaves behind.
struct MissingLink {
  uint8_t level = 0;
  std::string fence;
  page::PageNo left = page::kNoPage;
  page::PageNo right = page::kNoPage;
};

using CursorEntries = std::vector<std::pair<std::string, uint64_t>>;

struct BTree::Impl {
  Impl(cache::BufferCache* c, cache::PageSpace* s, page::PageNo r)
      : cache(c),
        space(s),
        root(r),
        page_size(c->page_size()),
        max_key(page::BtreeMaxKeySize(c->page_size())) {}

  // Fetches page `no` latched in `mode` and checks its B-tree header; `expected_level` < 0
  // accepts any level. DataLoss naming the page when it is not the node the caller expected.
  absl::StatusOr<cache::PageRef> FetchNode(page::PageNo no, cache::LatchMode mode,
                                           int expected_level, page::BtreeHeader* h) const;
  // FetchNode for the root: also checks that it has no sibling (and so no fence).
  absl::StatusOr<cache::PageRef> FetchRoot(cache::LatchMode mode, page::BtreeHeader* h) const;

  // The B-link rule: while `b` lies at or past the fence of `*page` (header `*h`), moves to its
  // right sibling, latched in `mode` before `*page` is released (left to right). Each step
  // checks that the fences increase, so a damaged chain cannot loop. `lower`/`has_lower`, when
  // given, receive the fence passed (the new node's lower bound); `moved`, when given, gets one
  // MissingLink per step.
  absl::Status MoveRight(const Bound& b, cache::LatchMode mode, cache::PageRef* page,
                         page::BtreeHeader* h, std::string* lower, bool* has_lower,
                         std::vector<MissingLink>* moved) const;

  // The child of the internal page `data` (page `no`, header `h`) to follow for `b`. When
  // `lower` is given it receives the separator of the chosen child (its lower bound), and
  // `*has_lower` whether there is one (false for low_page: the bound is inherited).
  absl::Status PickChild(const uint8_t* data, page::PageNo no, const page::BtreeHeader& h,
                         const Bound& b, page::PageNo* child, std::string* lower,
                         bool* has_lower) const;

  // Latch-couples from the root to the leaf for `b`: shared latches on internal pages, `mode`
  // on the leaf, a parent released only once its child is latched, moving right at any level
  // where `b` is past a fence. `lower`/`has_lower` as in PickChild for the leaf as a whole, and
  // `moved` as in MoveRight (all optional).
  absl::StatusOr<cache::PageRef> DescendToLeaf(const Bound& b, cache::LatchMode mode,
                                               std::string* lower, bool* has_lower,
                                               std::vector<MissingLink>* moved) const;

  // Cursor support (btree_cursor.cc): replaces `out` with the entries of one leaf that are at or
  // after `key` (after it when !inclusive) in ascending order, moving right past leaves with none;
  // empty at the end of the tree.
  // At most `limit` entries (0: no limit).
  absl::Status FillAscending(std::string_view key, bool inclusive, size_t limit,
                             CursorEntries* out) const;
  // Same for descending scans: entries at or before `b` (before it when !b.inclusive) of one leaf,
  // in descending order, re-seeking from the root for earlier leaves.
  absl::Status FillDescending(Bound b, CursorEntries* out) const;

  // The leaf for `key` latched exclusively (btree.cc), its header, and where `key` falls on it.
  absl::Status FindInLeaf(std::string_view key, std::vector<MissingLink>* moved,
                          cache::PageRef* leaf, page::BtreeHeader* h, page::BtreeSlot* slot) const
      ABSL_SHARED_LOCKS_REQUIRED(tree_mu);
  // FindInLeaf's shortcut for ascending inserts: when `key` lies above the first key of the
  // rightmost leaf (rightmost_hint), that leaf is the one for it, whatever the levels above say.
  // False (nothing latched) when the hint is unset or does not apply.
  bool FindInRightmost(std::string_view key, cache::PageRef* leaf, page::BtreeHeader* h,
                       page::BtreeSlot* slot) const;
  // Insert, splitting as needed (btree.cc). Right-sibling links the descent had to follow are
  // appended to `moved`.
  absl::Status InsertSplitting(std::string_view key, uint64_t value, uint64_t txn,
                               std::vector<MissingLink>* moved)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(tree_mu);
  // Posts the separators of `links` into their parents, taking tree_mu exclusively (btree.cc).
  // Best effort: the tree is correct without them, so failures are dropped.
  void RepairLinks(std::vector<MissingLink> links) ABSL_LOCKS_EXCLUDED(tree_mu);

  class Splitter;  // btree.cc: one insert (of a leaf entry or a separator) that may split
  class Checker;   // btree_check.cc: one Check walk

  cache::BufferCache* const cache;
  cache::PageSpace* const space;
  const page::PageNo root;
  const uint32_t page_size;
  const uint32_t max_key;
  // Shared: operations that change one leaf's entries (no structural change). Exclusive:
  // splits, repairs and Check. Readers never take it.
  mutable util::SharedMutex tree_mu;
  // The rightmost leaf as the last descent for an insert found it, while inserts keep landing
  // there (PostgreSQL's "fastpath" insert does the same): an ascending load then skips the
  // descent. A hint only: FindInRightmost checks the page before trusting it, against the ids
  // (relation_id << 16 | index_id) of the leaf the hint was taken from: every node of a tree
  // carries the same ones, so they never change once set.
  mutable std::atomic<page::PageNo> rightmost_hint{page::kNoPage};
  mutable std::atomic<uint64_t> tree_ids{0};
};

}  // namespace ember::index
