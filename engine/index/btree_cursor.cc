// B-link tree cursors (see btree.h): a cursor copies the qualifying entries of one leaf and, when
// they run out, re-seeks from the root strictly past the last key it returned (ascending: moving
// right along the leaves while they hold nothing past it). It therefore holds no latch between
// calls, and returns strictly increasing (or decreasing) keys: neither a concurrent split nor a
// crash state where a split node and its new right page are on disk without the parent's
// separator (the descent's move-right rule finds the right page) can make it skip an entry or
// return one twice. Latching follows the protocol in btree.cc.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/index/btree.h"
#include "engine/index/btree_impl.h"

namespace ember::index {

using cache::LatchMode;
using cache::PageRef;
using page::BtreeHeader;
using page::BtreeNode;
using page::PageNo;

absl::Status BTree::Impl::FillAscending(std::string_view key, bool inclusive, size_t limit,
                                        CursorEntries* out) const {
  out->clear();
  absl::StatusOr<PageRef> leaf =
      DescendToLeaf(Bound{key}, LatchMode::kShared, nullptr, nullptr, nullptr);
  if (!leaf.ok()) return leaf.status();
  PageRef page = std::move(*leaf);
  uint64_t hop_limit = 1024;  // raised to the file's page count if empty leaves go on that long
  for (uint64_t hops = 0;; ++hops) {
    BtreeHeader h;
    page::BtreeSlot slot;
    if (absl::Status s = page::ReadBtreeHeader(page.data(), page_size, page.page_no(), &h);
        !s.ok()) {
      return s;
    }
    if (absl::Status s =
            page::BtreeLowerBound(page.data(), page_size, page.page_no(), h, key, &slot);
        !s.ok()) {
      return s;
    }
    if (hops > 0 && (slot.has_prev() || slot.equal)) {
      // A right neighbour only holds keys above the leaf the descent chose.
      return absl::DataLossError(absl::StrCat("btree page ", page.page_no(),
                                              ": holds keys below its left sibling's range"));
    }
    // The walk starts at the first entry >= key; the reader checks the order from there on.
    page::BtreeEntryReader r(page.data(), page_size, page.page_no());
    r.StartAt(slot, key);
    bool skip = slot.equal && !inclusive;
    while ((limit == 0 || out->size() < limit) && r.Next()) {
      if (skip) {
        skip = false;
        continue;
      }
      out->emplace_back(std::string(r.key()), r.value());
    }
    if (!r.status().ok()) return r.status();
    if (!out->empty() || h.right_sibling == page::kNoPage) return absl::OkStatus();
    // Every entry of this leaf is before `key` (or it is empty after removals): move right.
    // The leaf is released before its neighbour is latched, not latch-coupled: a right link
    // that a damaged page points back up the tree must not make this the inverse of a
    // descent's order (a deadlock against a writer). Nothing is lost by it: a split of this
    // leaf meanwhile moves only entries below `key` (it held none above) to the new page, and
    // a split of the neighbour is followed through its right link as any B-link reader does.
    if (hops >= hop_limit) {
      hop_limit = space->page_count();
      if (hops >= hop_limit) {
        return absl::DataLossError(absl::StrCat("btree page ", page.page_no(),
                                                ": right-sibling chain longer than the file"));
      }
    }
    BtreeHeader nh;
    const PageNo right = h.right_sibling;
    page.Release();
    absl::StatusOr<PageRef> next = FetchNode(right, LatchMode::kShared, 0, &nh);
    if (!next.ok()) return next.status();
    page = std::move(*next);
  }
}

absl::Status BTree::Impl::FillDescending(Bound b, CursorEntries* out) const {
  out->clear();
  std::string bound_key;  // owns b.key once it is a leaf's lower bound
  for (;;) {
    std::string lower;
    bool has_lower = false;
    absl::StatusOr<PageRef> leaf =
        DescendToLeaf(b, LatchMode::kShared, &lower, &has_lower, nullptr);
    if (!leaf.ok()) return leaf.status();
    BtreeNode node;
    absl::Status s = page::DecodeBtreePage(leaf->data(), page_size, leaf->page_no(), &node);
    leaf->Release();
    if (!s.ok()) return s;
    for (size_t i = node.entries.size(); i-- > 0;) {
      page::BtreeEntry& e = node.entries[i];
      if (!b.infinite) {
        const int c = e.key.compare(b.key);
        if (c > 0 || (c == 0 && !b.inclusive)) continue;
      }
      out->emplace_back(std::move(e.key), e.value);
    }
    if (!out->empty() || !has_lower) return absl::OkStatus();
    // Nothing at or before the bound in this leaf: the answer is the last key below the leaf's
    // lower bound (the separator that led to it, or the fence of the left sibling it was reached
    // from). Lower bounds strictly decrease (PickChild only takes a separator below an exclusive
    // bound, and MoveRight only passes a fence below it), so this ends. There is no latch
    // coupling leftwards: that would invert the left-to-right latch order splits rely on.
    bound_key = std::move(lower);
    b = Bound{bound_key, /*inclusive=*/false, /*infinite=*/false};
  }
}

absl::StatusOr<BTree::Cursor> BTree::Seek(std::string_view key, bool descending,
                                          size_t batch) const {
  Cursor c;
  c.tree_ = this;
  c.descending_ = descending;
  absl::Status s = descending
                       ? impl_->FillDescending(Bound{key, true, key.empty()}, &c.buffered_)
                       : impl_->FillAscending(key, true, std::max<size_t>(batch, 1), &c.buffered_);
  if (!s.ok()) return s;
  if (c.buffered_.empty()) return c;
  c.key_ = std::move(c.buffered_[0].first);
  c.value_ = c.buffered_[0].second;
  c.pos_ = 1;
  c.valid_ = true;
  return c;
}

absl::Status BTree::Cursor::Next() {
  if (!valid_) return absl::FailedPreconditionError("btree cursor: Next on an invalid cursor");
  if (pos_ >= buffered_.size()) {
    // key_ stays untouched while filling: the bound views it.
    absl::Status s = descending_
                         ? tree_->impl_->FillDescending(Bound{key_, false, false}, &buffered_)
                         : tree_->impl_->FillAscending(key_, false, 0, &buffered_);
    pos_ = 0;
    if (!s.ok() || buffered_.empty()) {
      buffered_.clear();
      valid_ = false;
      return s;
    }
  }
  key_ = std::move(buffered_[pos_].first);
  value_ = buffered_[pos_].second;
  ++pos_;
  return absl::OkStatus();
}

}  // namespace ember::index
