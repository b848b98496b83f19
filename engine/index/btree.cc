// The B-link tree: creation, descent with the move-right rule, insert with node splits, remove,
// and the repair of separators a crash kept from their parent (see btree.h). Cursors are in
// btree_cursor.cc and the structural check in btree_check.cc.
//
// Shape (Lehman and Yao's B-link tree, as Firebird's btr.cpp with its END_BUCKET nodes): every
// node but the rightmost of its level has a fence (high key, btree_page.h): every key of the node
// and its subtree is below it, every key of its right sibling at or above it. A split of N gives
// N the separator as fence and the new right page R N's old fence, before the parent P learns the
// separator. Every descent that finds its key at or past a node's fence moves right along
// right_sibling (MoveRight), so a node reachable only through its left sibling's link is found.
// In a consistent tree a descent never moves right (a split updates N, R and P under latches no
// reader can pass); it does after a crash that wrote N and R but not P, and such a move is
// recorded so that the writer that made it posts the missing separator (RepairLinks).
//
// Concurrency protocol (one BTree object per tree in a process; page latches are the buffer
// cache's shared/exclusive frame latches, `tree_mu` is a util::SharedMutex in Impl):
// - Readers (Seek, Cursor::Next) take no tree lock. They latch-couple down with shared latches
//   (a parent is released only once its child is latched) and couple rightwards along
//   right_sibling (a node held while its right neighbour is latched) when the key is past a
//   fence, and at the leaf level when a leaf has nothing more to return. A reader holds at most
//   two latches and never waits for a page above or to the left of one it holds.
// - Writers that change one leaf (Remove, and Insert when the entry fits) hold tree_mu shared,
//   couple down (and right) like readers and take the leaf exclusively. They never wait for
//   anything while holding the leaf but its right neighbour.
// - An Insert that does not fit releases everything and retries holding tree_mu exclusively, so
//   it is the only writer in the tree and only readers run beside it. It latches its path
//   exclusively top-down (moving right where a fence says so), releasing ancestors as soon as a
//   node below them is "safe" (has room for one more entry, so a split cannot climb past it).
//   The pages its splits may need are allocated first, with no latch held (allocating may evict,
//   and the dirty pages to write may depend on the very nodes the path holds), then the path is
//   latched again. Splits run bottom-up on the latched nodes; the only new latches are those
//   fresh pages' (unreachable, uncontended). A repair runs the same way for an internal entry.
// Latch order, therefore: tree_mu before any latch; higher level before lower level; within a
// level, left before right. Nobody waits for a latch against that order.
//
// Careful write (architecture.md "Durability"). A split of N (level l, parent P) into N and a
// new right page R records, through BufferCache::AddPrecedence:
//   R before N   (N's right_sibling names R)
//   R before P   (P's new separator names R)
//   N before P   (P must not say "the upper keys live in R" while N's old copy still has them)
// and PageSpace::Allocate adds "R's PIP before R". N's old right neighbour is not changed: a
// left_sibling is only a hint naming some page to the left on the same level (the left neighbour
// when the page was created), never followed, so it cannot dangle. A root split writes the new
// right child before the new left child (its right_sibling) and both before the root. A repair
// posting (fence of N -> R) in P records "R before P" and "N before P" (no-ops: both are already
// on disk). Edges go from a lower level to a higher one, or within a level from a newer page to
// an older one (R joins the level after N), so they never form a cycle. The crash states these
// edges allow are: nothing; R alone (unreachable, freed by Validate); R and N (R reachable from
// N only: the B-link rule reads it, RepairLinks links it); everything. Pages a split or repair
// changes are marked for transaction 0, so the next commit flush of any transaction writes the
// whole split: a committed entry in R never reaches disk without the links that make R
// reachable, even when the transaction that split rolled back or failed its commit.
// AddPrecedence may have to flush its `first` page's chain at once (cycle breaking), taking
// shared latches on that chain: R is released before it is named, and N before "N before P" is
// recorded.
#include "engine/index/btree.h"

#include <algorithm>
#include <optional>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "engine/index/btree_impl.h"
#include "engine/page/pip.h"

namespace ember::index {

using cache::LatchMode;
using cache::PageRef;
using page::BtreeEntry;
using page::BtreeHeader;
using page::BtreeNode;
using page::PageNo;

uint32_t MaxKeySize(uint32_t page_size) { return page::BtreeMaxKeySize(page_size); }

namespace {

absl::Status Corrupt(PageNo no, const std::string& what) {
  return absl::DataLossError(absl::StrCat("btree page ", no, ": ", what));
}

// Position of the first entry >= key (binary search over the decoded entries).
size_t LowerBound(const BtreeNode& node, std::string_view key) {
  auto it = std::lower_bound(node.entries.begin(), node.entries.end(), key,
                             [](const BtreeEntry& e, std::string_view k) { return e.key < k; });
  return static_cast<size_t>(it - node.entries.begin());
}

// Decodes the latched page `ref` into `node`; returns the position of its first entry >= key.
absl::StatusOr<size_t> DecodeAt(const PageRef& ref, uint32_t page_size, std::string_view key,
                                BtreeNode* node) {
  if (absl::Status s = page::DecodeBtreePage(ref.data(), page_size, ref.page_no(), node); !s.ok()) {
    return s;
  }
  return LowerBound(*node, key);
}

size_t CommonPrefix(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

// The shortest key s with left < s <= right (suffix truncation): keys between the two halves of
// a leaf need only be told apart, not stored whole, in the parent. REQUIRES: left < right, so
// the common prefix is shorter than `right`.
std::string ShortestSeparator(std::string_view left, std::string_view right) {
  return std::string(right.substr(0, CommonPrefix(left, right) + 1));
}

BtreeNode EmptyLike(const BtreeNode& n) {
  BtreeNode out;
  out.relation_id = n.relation_id;
  out.index_id = n.index_id;
  out.level = n.level;
  return out;
}

// The two halves of an overfull node and the separator between them (also the left half's
// fence; the right half inherits the node's fence). Sibling links are the caller's.
struct SplitPlan {
  BtreeNode left, right;
  std::string separator;
};

// Chooses where to split an overfull node (the entry at `inserted` is the new one): leaves,
// left = [0,k) and right = [k,n); internal, left = [0,k), entry k moves up (its child becomes
// right's low_page) and right = (k,n). Each half is sized with its fence: the separator for the
// left, the node's own fence for the right. Appending at the right end of a level (ascending
// loads) leaves the left page as full as it can be with its fence; otherwise the larger half is
// made as small as possible. Returns 0 when no split point makes both halves fit, which
// BtreeMaxKeySize rules out: with entries of at most E = 13 + 2 + K bytes (a restart slot included)
// and fences of at most 2 + K, a page holding four entries and a fence leaves a window of at least
// E bytes of split points where both halves fit.
size_t ChooseSplit(const BtreeNode& node, size_t inserted, uint32_t page_size) {
  const size_t n = node.entries.size();
  // A split needs two entries, and a page never holds more entries than bytes (the bound also
  // tells GCC at -O3 that the vectors below cannot be sized past the address space).
  if (n < 2 || n > page_size) return 0;
  const bool internal = !node.leaf();
  const auto& e = node.entries;
  constexpr size_t kR = page::kBtreeRestartInterval;
  // Each half is encoded afresh: entries compressed against their predecessor except every kR-th
  // from the half's first, stored whole (costing `shared[i]` more bytes), plus the restart array.
  std::vector<size_t> sum(n + 1, 0);  // compressed bytes of entries [0, i)
  std::vector<size_t> whole(n, 0);    // extra bytes of entry i when stored whole (a restart)
  for (size_t i = 0; i < n; ++i) {
    const size_t shared = i > 0 ? CommonPrefix(e[i - 1].key, e[i].key) : 0;
    const size_t bytes = page::BtreeEntryBytes(shared, e[i].key.size() - shared, e[i].value);
    sum[i + 1] = sum[i] + bytes;
    whole[i] = page::BtreeEntryBytes(0, e[i].key.size(), e[i].value) - bytes;
  }
  // stride[i]: extra bytes of entries i, i+kR, i+2kR, ... stored whole (a half starting at i).
  std::vector<size_t> stride(n + kR, 0);
  for (size_t i = n; i-- > 0;) stride[i] = whole[i] + stride[i + kR];
  auto restart_bytes = [&](size_t entries) {
    return page::bt::kRestartSize * ((entries + kR - 1) / kR);
  };
  const size_t right_fence = node.fence ? page::bt::kFenceOverhead + node.fence->size() : 0;
  auto left_bytes = [&](size_t k) {
    const size_t sep = internal ? e[k].key.size() : CommonPrefix(e[k - 1].key, e[k].key) + 1;
    // The left half starts at entry 0, so its restarts are where they are in `stride` from 0,
    // minus those at or past k.
    const size_t extra = stride[0] - stride[(k + kR - 1) / kR * kR];
    return page::kBtreeHeaderSize + sum[k] + extra + restart_bytes(k) + page::bt::kFenceOverhead +
           sep;
  };
  auto right_bytes = [&](size_t k) {
    const size_t from = internal ? k + 1 : k;  // the right half's first entry
    const size_t entries = from >= n ? 0 : sum[n] - sum[from] + stride[from];
    return page::kBtreeHeaderSize + right_fence + entries + restart_bytes(n - std::min(n, from));
  };
  if (inserted + 1 == n && node.right_sibling == page::kNoPage && n >= 2) {
    // The left page keeps all it held, or as much as fits once it carries a fence: a page
    // filled to the last bytes as the rightmost (no fence) may not hold them all with one, and
    // falling back to an even split then would leave every page of an ascending load half full.
    for (size_t k = n - 1; k >= 1 && k + kR >= n; --k) {
      if (left_bytes(k) <= page_size && right_bytes(k) <= page_size) return k;
    }
  }
  size_t best_k = 0, best = SIZE_MAX;
  for (size_t k = 1; k < n; ++k) {
    const size_t worst = std::max(left_bytes(k), right_bytes(k));
    if (worst <= page_size && worst < best) {
      best = worst;
      best_k = k;
    }
  }
  return best_k;
}

// A node can be split when each half keeps at least one entry (internal: plus the one moving up).
bool CanSplit(const BtreeNode& node) { return node.entries.size() >= (node.leaf() ? 2u : 3u); }

// Splits at `k` (from ChooseSplit). Consumes node's entries.
SplitPlan PlanSplit(BtreeNode& node, size_t k) {
  SplitPlan p{EmptyLike(node), EmptyLike(node), {}};
  auto& e = node.entries;
  if (node.leaf()) {
    p.separator = ShortestSeparator(e[k - 1].key, e[k].key);
    p.right.entries.assign(std::make_move_iterator(e.begin() + static_cast<ptrdiff_t>(k)),
                           std::make_move_iterator(e.end()));
  } else {
    p.separator = std::move(e[k].key);
    p.right.low_page = static_cast<PageNo>(e[k].value);
    p.right.entries.assign(std::make_move_iterator(e.begin() + static_cast<ptrdiff_t>(k) + 1),
                           std::make_move_iterator(e.end()));
  }
  e.resize(k);
  p.left.entries = std::move(e);
  p.left.low_page = node.low_page;
  p.left.fence = p.separator;
  p.right.fence = node.fence;
  return p;
}

// Initialises, fills, marks (for the engine: a split's pages) and releases a fresh page.
absl::Status WriteNewPage(PageRef& ref, const BtreeNode& node, uint32_t page_size) {
  page::InitPage(ref.data(), page_size, page::PageType::kBtree, ref.page_no());
  if (!page::EncodeBtreePage(node, ref.data(), page_size)) {
    return absl::InternalError(
        absl::StrCat("btree page ", ref.page_no(), ": split half does not fit"));
  }
  ref.Mark(cache::kSystemMark);
  ref.Release();
  return absl::OkStatus();
}

// For Insert's `alone`: whether the neighbours of `slot` in `leaf` show no other entry
// beginning with key[0, prefix).
bool AloneInLeaf(const uint8_t* leaf, uint32_t page_size, const page::BtreeHeader& h,
                 const page::BtreeSlot& slot, std::string_view key, size_t prefix) {
  // prev_common / next_common are exact (the longest common prefix with each neighbour). An
  // entry first in its leaf has its left neighbour in another leaf: not known here.
  if (!slot.has_prev() || slot.prev_common >= prefix) return false;
  if (slot.offset < h.data_end) return slot.next_common < prefix;
  // Last in the leaf: every key of the right sibling is at or above the fence, and a fence
  // that does not begin with the prefix is above every key that does (the entry is below it).
  if (!h.has_fence()) return true;  // the rightmost leaf
  const std::string_view fence = page::BtreeFence(leaf, page_size, h);
  return fence.size() < prefix || fence.substr(0, prefix) != key.substr(0, prefix);
}

}  // namespace

// ---------------------------------------------------------------- descent

absl::StatusOr<PageRef> BTree::Impl::FetchNode(PageNo no, LatchMode mode, int expected_level,
                                               BtreeHeader* h) const {
  absl::StatusOr<PageRef> r = cache->Fetch(no, mode);
  if (!r.ok()) return r.status();
  if (absl::Status s = page::ReadBtreeHeader(r->data(), page_size, no, h); !s.ok()) return s;
  if (expected_level >= 0 && h->level != expected_level) {
    return Corrupt(no, absl::StrCat("level ", int{h->level}, " where level ", expected_level,
                                    " was expected (tree root ", root, ")"));
  }
  return r;
}

absl::StatusOr<PageRef> BTree::Impl::FetchRoot(LatchMode mode, BtreeHeader* h) const {
  absl::StatusOr<PageRef> r = FetchNode(root, mode, -1, h);
  if (r.ok() && (h->left_sibling != page::kNoPage || h->right_sibling != page::kNoPage)) {
    return Corrupt(
        root, absl::StrCat("the root has siblings ", h->left_sibling, " and ", h->right_sibling));
  }
  return r;
}

absl::Status BTree::Impl::MoveRight(const Bound& b, LatchMode mode, PageRef* page, BtreeHeader* h,
                                    std::string* lower, bool* has_lower,
                                    std::vector<MissingLink>* moved) const {
  for (;;) {
    if (!h->has_fence()) return absl::OkStatus();
    const std::string_view fence = page::BtreeFence(page->data(), page_size, *h);
    if (!b.infinite) {
      const int c = b.key.compare(fence);
      if (c < 0 || (c == 0 && !b.inclusive)) return absl::OkStatus();
    }
    std::string passed(fence);
    const PageNo from = page->page_no();
    BtreeHeader nh;
    absl::StatusOr<PageRef> next = FetchNode(h->right_sibling, mode, h->level, &nh);
    if (!next.ok()) return next.status();
    if (nh.has_fence() && !(page::BtreeFence(next->data(), page_size, nh) > passed)) {
      return Corrupt(next->page_no(),
                     absl::StrCat("fence not above the fence of its left sibling ", from));
    }
    if (moved) moved->push_back(MissingLink{h->level, passed, from, next->page_no()});
    *page = std::move(*next);  // releases the left page now that its neighbour is latched
    *h = nh;
    if (has_lower) *has_lower = true;
    if (lower) *lower = std::move(passed);
  }
}

absl::Status BTree::Impl::PickChild(const uint8_t* data, PageNo no, const BtreeHeader& h,
                                    const Bound& b, PageNo* child, std::string* lower,
                                    bool* has_lower) const {
  if (!lower && !b.infinite) {
    // The child is the last separator below the bound (or equal to it, inclusive).
    page::BtreeSlot slot;
    if (absl::Status s = page::BtreeLowerBound(data, page_size, no, h, b.key, &slot); !s.ok()) {
      return s;
    }
    const bool take_equal = slot.equal && b.inclusive;
    const uint64_t v = take_equal ? slot.value : slot.has_prev() ? slot.prev_value : h.low_page;
    if (v == page::kNoPage || v > UINT32_MAX) {
      return Corrupt(no, absl::StrCat("child page ", v));
    }
    *child = static_cast<PageNo>(v);
    if (has_lower && (take_equal || slot.has_prev())) *has_lower = true;
    return absl::OkStatus();
  }
  // Entries are prefix compressed, so they are decoded in order; the walk stops at the first
  // separator past the bound.
  page::BtreeEntryReader r(data, page_size, no);
  PageNo pick = h.low_page;
  bool picked = false;
  while (r.Next()) {
    if (!b.infinite) {
      const int c = r.key().compare(b.key);
      if (c > 0 || (c == 0 && !b.inclusive)) break;
    }
    pick = static_cast<PageNo>(r.value());
    picked = true;
    if (lower) lower->assign(r.key());
  }
  if (!r.status().ok()) return r.status();
  *child = pick;
  if (has_lower && picked) *has_lower = true;
  return absl::OkStatus();
}

absl::StatusOr<PageRef> BTree::Impl::DescendToLeaf(const Bound& b, LatchMode mode,
                                                   std::string* lower, bool* has_lower,
                                                   std::vector<MissingLink>* moved) const {
  for (int attempt = 0;; ++attempt) {
    if (has_lower) *has_lower = false;
    BtreeHeader h;
    absl::StatusOr<PageRef> cur = FetchRoot(LatchMode::kShared, &h);
    if (!cur.ok()) return cur.status();
    if (h.leaf() && mode == LatchMode::kExclusive) {
      // A leaf root: relatch it exclusively. It can only have become internal meanwhile if a
      // root split ran, which needs tree_mu exclusive; go round again if so.
      cur->Release();
      cur = FetchRoot(LatchMode::kExclusive, &h);
      if (!cur.ok()) return cur.status();
      if (!h.leaf()) {
        if (attempt > 1000) return absl::InternalError("btree: root keeps changing level");
        continue;
      }
    }
    PageRef page = std::move(*cur);
    for (;;) {
      if (absl::Status s = MoveRight(b, h.leaf() ? mode : LatchMode::kShared, &page, &h, lower,
                                     has_lower, moved);
          !s.ok()) {
        return s;
      }
      if (h.leaf()) return page;
      PageNo child;
      if (absl::Status s = PickChild(page.data(), page.page_no(), h, b, &child, lower, has_lower);
          !s.ok()) {
        return s;
      }
      BtreeHeader ch;
      absl::StatusOr<PageRef> c =
          FetchNode(child, h.level == 1 ? mode : LatchMode::kShared, h.level - 1, &ch);
      if (!c.ok()) return c.status();
      page = std::move(*c);  // releases the parent now that the child is latched
      h = ch;
    }
  }
}

// ---------------------------------------------------------------- create, insert, remove

absl::StatusOr<PageNo> BTree::Create(cache::BufferCache* cache, cache::PageSpace* space,
                                     uint64_t txn, uint32_t relation_id, uint16_t index_id) {
  absl::StatusOr<PageRef> r = space->Allocate(txn);
  if (!r.ok()) return r.status();
  const PageNo no = r->page_no();
  BtreeNode leaf;
  leaf.relation_id = relation_id;
  leaf.index_id = index_id;
  page::InitPage(r->data(), cache->page_size(), page::PageType::kBtree, no);
  if (!page::EncodeBtreePage(leaf, r->data(), cache->page_size())) {
    return absl::InternalError(absl::StrCat("btree page ", no, ": empty root does not fit"));
  }
  r->Mark(txn);
  return no;
}

BTree::BTree(cache::BufferCache* cache, cache::PageSpace* space, PageNo root)
    : cache_(cache),
      space_(space),
      root_(root),
      impl_(std::make_unique<Impl>(cache, space, root)) {}

BTree::~BTree() = default;

namespace {

absl::Status CheckKeySize(const char* op, std::string_view key, uint32_t max_key) {
  if (key.size() <= max_key) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("btree ", op, ": key of ", key.size(),
                                                 " bytes exceeds the maximum of ", max_key));
}

}  // namespace

// Under tree_mu shared: the leaf for `key`, latched exclusively, its header and where the key
// falls on it.
absl::Status BTree::Impl::FindInLeaf(std::string_view key, std::vector<MissingLink>* moved,
                                     PageRef* leaf, BtreeHeader* h, page::BtreeSlot* slot) const {
  if (FindInRightmost(key, leaf, h, slot)) return absl::OkStatus();
  absl::StatusOr<PageRef> r =
      DescendToLeaf(Bound{key}, LatchMode::kExclusive, nullptr, nullptr, moved);
  if (!r.ok()) return r.status();
  *leaf = std::move(*r);
  if (absl::Status s = page::ReadBtreeHeader(leaf->data(), page_size, leaf->page_no(), h);
      !s.ok()) {
    return s;
  }
  if (h->right_sibling == page::kNoPage &&
      rightmost_hint.load(std::memory_order_relaxed) != leaf->page_no()) {
    tree_ids.store(uint64_t{h->relation_id} << 16 | h->index_id, std::memory_order_relaxed);
    rightmost_hint.store(leaf->page_no(), std::memory_order_relaxed);
  }
  return page::BtreeLowerBound(leaf->data(), page_size, leaf->page_no(), *h, key, slot);
}

bool BTree::Impl::FindInRightmost(std::string_view key, PageRef* leaf, BtreeHeader* h,
                                  page::BtreeSlot* slot) const {
  const PageNo hint = rightmost_hint.load(std::memory_order_relaxed);
  if (hint == page::kNoPage) return false;
  // Any failure (the page no longer the rightmost leaf, or not readable) leaves it to the
  // descent, which reports what is wrong.
  absl::StatusOr<PageRef> r = cache->Fetch(hint, LatchMode::kExclusive);
  if (!r.ok()) return false;
  // The rightmost leaf holds every key at or above its lower bound, which its first key is at
  // or above: a key past the first key belongs here. (A leaf without a right sibling is the
  // rightmost: one per tree, and a tree's pages stay its own while it lives.)
  std::optional<std::string_view> first;
  if (!page::ReadBtreeHeader(r->data(), page_size, hint, h).ok() || !h->leaf() ||
      h->right_sibling != page::kNoPage ||
      (uint64_t{h->relation_id} << 16 | h->index_id) != tree_ids.load(std::memory_order_relaxed) ||
      !(first = page::BtreeFirstKey(r->data(), *h)) || !(*first < key)) {
    // Inserts have moved away from the right end (or it split): the next descent that lands
    // there sets the hint again, and until then none pays for a failed check.
    PageNo expected = hint;
    rightmost_hint.compare_exchange_strong(expected, page::kNoPage, std::memory_order_relaxed);
    return false;
  }
  if (!page::BtreeLowerBound(r->data(), page_size, hint, *h, key, slot).ok()) return false;
  *leaf = std::move(*r);
  return true;
}

absl::Status BTree::Insert(std::string_view key, uint64_t value, uint64_t txn, size_t prefix,
                           bool* alone) {
  if (alone) *alone = false;
  if (absl::Status s = CheckKeySize("insert", key, impl_->max_key); !s.ok()) return s;
  std::vector<MissingLink> moved;
  absl::Status result;
  bool fit = false;
  {
    // The common case: the entry fits its leaf and goes in place, under tree_mu shared.
    util::ReaderLock tree(impl_->tree_mu);
    PageRef leaf;
    BtreeHeader h;
    page::BtreeSlot slot;
    result = impl_->FindInLeaf(key, &moved, &leaf, &h, &slot);
    if (result.ok() && slot.equal) {
      result = absl::AlreadyExistsError(
          absl::StrCat("btree insert: key already present in page ", leaf.page_no()));
    }
    if (result.ok() && alone)
      *alone = AloneInLeaf(leaf.data(), impl_->page_size, h, slot, key, prefix);
    if (result.ok() && page::BtreeInsertAt(leaf.data(), impl_->page_size, &h, slot, key, value)) {
      leaf.Mark(txn);
      fit = true;
    } else if (alone) {
      *alone = false;  // a split: the caller looks again
    }
  }
  if (result.ok() && !fit) {
    util::WriterLock tree(impl_->tree_mu);
    result = impl_->InsertSplitting(key, value, txn, &moved);
  }
  if (!moved.empty()) impl_->RepairLinks(std::move(moved));
  return result;
}

absl::Status BTree::Remove(std::string_view key, uint64_t txn) {
  // A key longer than any the tree takes is not in it (an undo of an insert the size check
  // refused removes it too, and must not fail).
  if (key.size() > impl_->max_key) {
    return absl::NotFoundError(absl::StrCat("btree remove: no key of ", key.size(),
                                            " bytes (longer than the maximum of ", impl_->max_key,
                                            ")"));
  }
  std::vector<MissingLink> moved;
  absl::Status result;
  {
    util::ReaderLock tree(impl_->tree_mu);
    PageRef leaf;
    BtreeHeader h;
    page::BtreeSlot slot;
    result = impl_->FindInLeaf(key, &moved, &leaf, &h, &slot);
    if (result.ok() && !slot.equal) {
      result = absl::NotFoundError(absl::StrCat("btree remove: key not in page ", leaf.page_no()));
    }
    if (result.ok()) {
      // Removing an entry never grows the page (see BtreeRemoveAt).
      if (page::BtreeRemoveAt(leaf.data(), impl_->page_size, &h, slot, key)) {
        leaf.Mark(txn);
      } else {
        result = Corrupt(leaf.page_no(), "entry to remove (or the one after it) does not parse");
      }
    }
  }
  if (!moved.empty()) impl_->RepairLinks(std::move(moved));
  return result;
}

// ---------------------------------------------------------------- splits and repairs

// One insert of an entry at `level` (0: a leaf entry; above: a separator being repaired) under
// tree_mu exclusive, splitting nodes bottom-up as needed. A split that fails after the one below
// it completed (no frame for its new page: an I/O error evicting) leaves the tree correct: the
// lower split's new page is linked from its left sibling only, as after a crash, and the next
// writer that passes posts its separator.
class BTree::Impl::Splitter {
 public:
  Splitter(BTree::Impl* t, uint64_t txn, std::vector<MissingLink>* moved)
      : t_(t), txn_(txn), moved_(moved) {}

  // Inserts `key` -> `value` at `level`. With `link` (a repair, level > 0), posts it only if it
  // is still missing: the child the node gives for `key` must have `key` as its fence and
  // link->right as its right sibling; otherwise (already posted, or the tree moved on) it is OK
  // and does nothing.
  absl::Status Run(std::string_view key, uint64_t value, uint8_t level, const MissingLink* link);

 private:
  // Run's work; Run then releases the latches and frees the fresh pages no split used.
  absl::Status RunLatched(std::string_view key, uint64_t value, uint8_t level,
                          const MissingLink* link);
  // RunLatched's second half: puts `entry_key` -> `entry_value` into path_[i] and, while a
  // node is full, splits it and posts the separator into its parent, from the target up. `node`
  // holds the target with the entry inserted at `pos` unless `tail` (split in place) is set.
  absl::Status PostUp(std::string entry_key, uint64_t entry_value, uint64_t mark_for, bool tail,
                      BtreeNode& node, size_t pos);
  // An upper bound on the pages the splits of path_ need when the target node (path_.back())
  // splits or not: one per node that may split, two for the root.
  size_t PagesNeeded(bool target_splits) const;
  // For an insert at the right end of the last leaf of the tree (ascending loads): plans the
  // target's split in place (tail_) and returns true; false when that does not apply.
  absl::StatusOr<bool> PlanTail(std::string_view key, uint64_t value);
  // Carries out tail_ on path_[i], releasing it. Returns the separator and the new page for the
  // parent path_[i - 1].
  absl::Status SplitTail(size_t i, std::string* separator, PageNo* right);
  // A page for a split: one allocated before the path was latched, else a new allocation.
  absl::StatusOr<PageRef> NewPage();
  // Latches the path from the highest node that may change down to the node of `level` for
  // `key`, exclusively (path_).
  absl::Status LatchPath(std::string_view key, uint8_t level);
  // For a repair: the child of `node` (latched; its entry `pos` is the first >= link.fence)
  // that links to link.right without a separator in `node`, or kNoPage when there is none.
  absl::StatusOr<PageNo> LinkingChild(const BtreeNode& node, size_t pos, const MissingLink& link);
  // Splits path_[i] (whose new content `node` does not fit) into itself and a new right page,
  // releasing path_[i]. Returns the separator and the new page for the parent path_[i - 1].
  absl::Status SplitNode(size_t i, BtreeNode& node, size_t inserted, std::string* separator,
                         PageNo* right);
  // The end both splits of path_[i] share, once the new right page `r_no` is written and
  // released: the precedence that keeps a crash from leaving a link to an unwritten page,
  // `rewrite` making path_[i] the left half, and path_[i]'s release.
  absl::Status LinkNewRight(size_t i, PageNo r_no,
                            absl::FunctionRef<absl::Status(PageRef&)> rewrite);
  // Moves the root's content (`node`, which does not fit) into two new children, the root
  // becoming an internal node one level up over them. The root keeps its page number.
  absl::Status SplitRoot(PageRef& root, BtreeNode& node, size_t inserted);
  // ChooseSplit + PlanSplit, with the errors of a node that cannot be split.
  absl::StatusOr<SplitPlan> Plan(PageNo no, BtreeNode& node, size_t inserted) const;

  BTree::Impl* t_;
  uint64_t txn_;
  std::vector<MissingLink>* moved_;
  // Exclusive latches from the highest node that may change down to the target node.
  std::vector<PageRef> path_;
  // Pages allocated (unreachable, unwritten) before path_ was latched, for the splits.
  std::vector<PageNo> fresh_;
  page::BtreeTailSplit tail_;
  // A failure to record "split node before parent" does not undo the split (the tree is
  // consistent in memory); it is reported once the insert is done.
  absl::Status deferred_;
};

absl::Status BTree::Impl::Splitter::LatchPath(std::string_view key, uint8_t level) {
  const size_t safe_room = page::BtreeInsertRoom(t_->max_key);
  BtreeHeader h;
  absl::StatusOr<PageRef> r = t_->FetchRoot(LatchMode::kExclusive, &h);
  if (!r.ok()) return r.status();
  if (h.level < level) return Corrupt(t_->root, "tree lower than a node found in it");
  path_.push_back(std::move(*r));
  for (;;) {
    if (absl::Status s = t_->MoveRight(Bound{key}, LatchMode::kExclusive, &path_.back(), &h,
                                       nullptr, nullptr, moved_);
        !s.ok()) {
      return s;
    }
    // A node with room for one more entry absorbs any split below it: its ancestors can go.
    if (path_.size() > 1 && h.free_space(t_->page_size) >= safe_room) {
      path_.erase(path_.begin(), path_.end() - 1);
    }
    if (h.level == level) return absl::OkStatus();
    PageNo child;
    if (absl::Status s = t_->PickChild(path_.back().data(), path_.back().page_no(), h, Bound{key},
                                       &child, nullptr, nullptr);
        !s.ok()) {
      return s;
    }
    BtreeHeader ch;
    absl::StatusOr<PageRef> c = t_->FetchNode(child, LatchMode::kExclusive, h.level - 1, &ch);
    if (!c.ok()) return c.status();
    path_.push_back(std::move(*c));
    h = ch;
  }
}

absl::StatusOr<PageNo> BTree::Impl::Splitter::LinkingChild(const BtreeNode& node, size_t pos,
                                                           const MissingLink& link) {
  const PageNo child = pos == 0 ? node.low_page : static_cast<PageNo>(node.entries[pos - 1].value);
  BtreeHeader ch;
  absl::StatusOr<PageRef> c = t_->FetchNode(child, LatchMode::kShared, node.level - 1, &ch);
  if (!c.ok()) return c.status();
  const bool links = ch.right_sibling == link.right &&
                     page::BtreeFence(c->data(), t_->page_size, ch) == link.fence;
  return links ? child : page::kNoPage;
}

absl::Status BTree::Impl::Splitter::Run(std::string_view key, uint64_t value, uint8_t level,
                                        const MissingLink* link) {
  absl::Status s = RunLatched(key, value, level, link);
  path_.clear();
  // Pages allocated for splits that did not happen go back: nothing links to them.
  for (PageNo no : fresh_) {
    if (absl::Status f = t_->space->Free(no, 0); !f.ok() && s.ok()) s = f;
  }
  fresh_.clear();
  return s;
}

size_t BTree::Impl::Splitter::PagesNeeded(bool target_splits) const {
  size_t need = 0;
  for (size_t i = path_.size(); i-- > 0;) {
    // An upper bound of what RunLatched does: a page with BtreeInsertRoom free takes a separator
    // in place.
    bool splits = target_splits;
    if (i + 1 < path_.size()) {
      BtreeHeader h;
      const PageRef& p = path_[i];
      splits = !page::ReadBtreeHeader(p.data(), t_->page_size, p.page_no(), &h).ok() ||
               h.free_space(t_->page_size) < page::BtreeInsertRoom(t_->max_key);
    }
    if (!splits) break;
    need += path_[i].page_no() == t_->root ? 2 : 1;
  }
  return need;
}

absl::StatusOr<PageRef> BTree::Impl::Splitter::NewPage() {
  // Not reached in practice: PagesNeeded is an upper bound of the pages the splits take.
  if (fresh_.empty()) return t_->space->Allocate(cache::kSystemMark);
  const PageNo no = fresh_.back();
  fresh_.pop_back();
  // Usually still resident (clean and zero), so no eviction happens under our latches. Allocated
  // from its PIP and linked from nothing yet: unlinked, so the cache may write it in the same
  // batch as the pages it depends on (no sync per split along a chain of new pages).
  absl::StatusOr<PageRef> p = t_->cache->FetchNew(no, cache::NewPage::kUnlinked);
  if (!p.ok()) return p.status();
  // FetchNew forgets the page's prerequisites: "its PIP before it" again (PageSpace::Allocate).
  const uint32_t ps = t_->page_size;
  const PageNo pip = page::PipPageNo(no / page::PagesPerPip(ps), ps);
  if (absl::Status s = t_->cache->AddPrecedence(*p, pip); !s.ok()) {
    return s;
  }
  return p;
}

absl::Status BTree::Impl::Splitter::RunLatched(std::string_view key, uint64_t value, uint8_t level,
                                               const MissingLink* link) {
  BtreeNode node;
  size_t pos = 0;
  PageNo link_child = page::kNoPage;  // a repair: the child that links to link->right
  bool tail = false;                  // the target splits in place at its right end (tail_)
  for (int attempt = 0;; ++attempt) {
    if (absl::Status s = LatchPath(key, level); !s.ok()) return s;
    PageRef& target = path_.back();
    if (!link && level == 0) {
      absl::StatusOr<bool> planned = PlanTail(key, value);
      if (!planned.ok()) return planned.status();
      tail = *planned;
    }
    bool target_splits = tail;
    if (!tail) {
      absl::StatusOr<size_t> at = DecodeAt(target, t_->page_size, key, &node);
      if (!at.ok()) return at.status();
      pos = *at;
      if (pos < node.entries.size() && node.entries[pos].key == key) {
        if (link) return absl::OkStatus();  // posted meanwhile
        return absl::AlreadyExistsError(
            absl::StrCat("btree insert: key already present in page ", target.page_no()));
      }
      if (link) {
        absl::StatusOr<PageNo> child = LinkingChild(node, pos, *link);
        if (!child.ok() || *child == page::kNoPage) return child.status();
        link_child = *child;
      }
      node.entries.insert(node.entries.begin() + static_cast<ptrdiff_t>(pos),
                          BtreeEntry{std::string(key), value});
      // The entry goes in place with BtreeInsertRoom free; else the node re-encoded may fit.
      BtreeHeader h;
      target_splits =
          (!page::ReadBtreeHeader(target.data(), t_->page_size, target.page_no(), &h).ok() ||
           h.free_space(t_->page_size) < page::BtreeInsertRoom(key.size())) &&
          page::BtreeEncodedSize(node) > t_->page_size;
    }
    // The pages the splits need are allocated with no latch held: allocating may have to evict,
    // and a dirty page can only be written once the pages it depends on are, which may be the
    // very nodes on our path (every leaf depends on its right neighbour until that is written,
    // so in an ascending load every dirty leaf waits for the one being split). The tree cannot
    // change while we hold tree_mu exclusively, so the second attempt has its pages.
    const size_t need = PagesNeeded(target_splits);
    if (fresh_.size() >= need || attempt > 0) break;
    path_.clear();
    while (fresh_.size() < need) {
      absl::StatusOr<PageRef> p = t_->space->Allocate(cache::kSystemMark);
      if (!p.ok()) return p.status();
      // Only the number is kept: holding the latch while latching the path would take a new
      // page's latch before its parent's, against the order everyone else uses.
      fresh_.push_back(p->page_no());
    }
  }
  if (link) {
    // Both are on disk already (a crash left them), so these are no-ops unless they changed.
    if (absl::Status s = t_->cache->AddPrecedence(path_.back(), link->right); !s.ok()) return s;
    if (absl::Status s = t_->cache->AddPrecedence(path_.back(), link_child); !s.ok()) return s;
  }

  // A leaf entry that fits is the transaction's change; everything else is structural.
  return PostUp(std::string(key), value, link ? cache::kSystemMark : txn_, tail, node, pos);
}

absl::Status BTree::Impl::Splitter::PostUp(std::string entry_key, uint64_t entry_value,
                                           uint64_t mark_for, bool tail, BtreeNode& node,
                                           size_t pos) {
  // `node` holds path_[i] with the entry inserted, except above the target, where it is only
  // decoded when the separator does not go in place (an ascending load splits a leaf every few
  // hundred inserts; decoding a parent of hundreds of entries for each was most of the cost).
  bool node_ready = !tail;
  for (size_t i = path_.size() - 1;; --i) {
    PageRef& ref = path_[i];
    if (tail && i + 1 == path_.size()) {
      std::string separator;
      PageNo right;
      if (absl::Status s = SplitTail(i, &separator, &right); !s.ok()) return s;
      entry_key = std::move(separator);
      entry_value = right;
      mark_for = cache::kSystemMark;
      continue;
    }
    // In place when it fits (always, with BtreeInsertRoom free: what LatchPath relied on to stop
    // at this page), else the node re-encoded (its restarts evenly spaced may take less room).
    BtreeHeader h;
    page::BtreeSlot slot;
    if (absl::Status s = page::ReadBtreeHeader(ref.data(), t_->page_size, ref.page_no(), &h);
        !s.ok()) {
      return s;
    }
    if (absl::Status s =
            page::BtreeLowerBound(ref.data(), t_->page_size, ref.page_no(), h, entry_key, &slot);
        !s.ok()) {
      return s;
    }
    if (!node_ready && slot.equal) {
      return Corrupt(ref.page_no(), "separator of a split child already present");
    }
    if (page::BtreeInsertAt(ref.data(), t_->page_size, &h, slot, entry_key, entry_value)) {
      ref.Mark(mark_for);
      return deferred_;
    }
    if (!node_ready) {
      absl::StatusOr<size_t> at = DecodeAt(ref, t_->page_size, entry_key, &node);
      if (!at.ok()) return at.status();
      pos = *at;
      node.entries.insert(node.entries.begin() + static_cast<ptrdiff_t>(pos),
                          BtreeEntry{entry_key, entry_value});
      node_ready = true;
    }
    if (page::EncodeBtreePage(node, ref.data(), t_->page_size)) {
      ref.Mark(mark_for);
      return deferred_;
    }
    mark_for = cache::kSystemMark;
    if (ref.page_no() == t_->root) {
      if (absl::Status s = SplitRoot(ref, node, pos); !s.ok()) return s;
      return deferred_;
    }
    if (i == 0) {
      return absl::InternalError(
          absl::StrCat("btree page ", ref.page_no(), ": full but its parent was not latched"));
    }
    std::string separator;
    PageNo right;
    if (absl::Status s = SplitNode(i, node, pos, &separator, &right); !s.ok()) return s;
    // Post the separator in the parent (next round).
    entry_key = std::move(separator);
    entry_value = right;
    node_ready = false;
  }
}

absl::StatusOr<bool> BTree::Impl::Splitter::PlanTail(std::string_view key, uint64_t value) {
  const PageRef& target = path_.back();
  // A leaf that is the root splits through SplitRoot (the root keeps its page number).
  if (path_.size() < 2 || target.page_no() == t_->root) return false;
  BtreeHeader h;
  if (absl::Status s = page::ReadBtreeHeader(target.data(), t_->page_size, target.page_no(), &h);
      !s.ok()) {
    return s;
  }
  // Only a full page: one that takes the entry in place does so in RunLatched.
  if (h.right_sibling != page::kNoPage || h.count == 0 ||
      h.free_space(t_->page_size) >= page::BtreeInsertRoom(key.size())) {
    return false;
  }
  return page::BtreePlanTailSplit(target.data(), t_->page_size, target.page_no(), h, key, value,
                                  &tail_);
}

absl::Status BTree::Impl::Splitter::SplitTail(size_t i, std::string* separator, PageNo* right_no) {
  const uint32_t ps = t_->page_size;
  PageRef& n = path_[i];
  const PageNo n_no = n.page_no();
  BtreeHeader h;
  if (absl::Status s = page::ReadBtreeHeader(n.data(), ps, n_no, &h); !s.ok()) return s;
  // As SplitNode: the new page is written and released before anything links to it.
  absl::StatusOr<PageRef> rr = NewPage();
  if (!rr.ok()) return rr.status();
  const PageNo r_no = rr->page_no();
  BtreeNode right;
  right.relation_id = h.relation_id;
  right.index_id = h.index_id;
  right.level = h.level;
  right.left_sibling = n_no;
  right.entries = std::move(tail_.right);
  if (absl::Status s = WriteNewPage(*rr, right, ps); !s.ok()) return s;
  if (absl::Status s = LinkNewRight(i, r_no,
                                    [&](PageRef& node) {
                                      page::BtreeApplyTailSplit(node.data(), ps, &h, tail_, r_no);
                                      return absl::OkStatus();
                                    });
      !s.ok()) {
    return s;
  }
  *separator = std::move(tail_.separator);
  *right_no = r_no;
  return absl::OkStatus();
}

absl::Status BTree::Impl::Splitter::LinkNewRight(
    size_t i, PageNo r_no, absl::FunctionRef<absl::Status(PageRef&)> rewrite) {
  PageRef& n = path_[i];
  PageRef& parent = path_[i - 1];
  const PageNo n_no = n.page_no();
  cache::BufferCache* c = t_->cache;
  if (absl::Status s = c->AddPrecedence(n, r_no); !s.ok()) return s;
  if (absl::Status s = c->AddPrecedence(parent, r_no); !s.ok()) return s;
  if (absl::Status s = rewrite(n); !s.ok()) return s;
  n.Mark(cache::kSystemMark);
  n.Release();
  // N is released so that a cycle-breaking flush of N's chain cannot wait for our own latch.
  if (absl::Status s = c->AddPrecedence(parent, n_no); !s.ok() && deferred_.ok()) deferred_ = s;
  return absl::OkStatus();
}

absl::StatusOr<SplitPlan> BTree::Impl::Splitter::Plan(PageNo no, BtreeNode& node,
                                                      size_t inserted) const {
  if (!CanSplit(node)) return Corrupt(no, "overfull with too few entries to split");
  const size_t k = ChooseSplit(node, inserted, t_->page_size);
  if (k == 0) return absl::InternalError(absl::StrCat("btree page ", no, ": no split point fits"));
  return PlanSplit(node, k);
}

absl::Status BTree::Impl::Splitter::SplitNode(size_t i, BtreeNode& node, size_t inserted,
                                              std::string* separator, PageNo* right_no) {
  const uint32_t ps = t_->page_size;
  PageRef& n = path_[i];
  const PageNo n_no = n.page_no();
  const PageNo left_no = node.left_sibling;
  const PageNo old_right_no = node.right_sibling;
  absl::StatusOr<SplitPlan> plan = Plan(n_no, node, inserted);
  if (!plan.ok()) return plan.status();

  // Everything that can fail for want of a page comes before the first change.
  absl::StatusOr<PageRef> rr = NewPage();
  if (!rr.ok()) return rr.status();
  const PageNo r_no = rr->page_no();
  plan->right.left_sibling = n_no;
  plan->right.right_sibling = old_right_no;
  // Released before anything links to it: nobody can reach it yet, and a cycle-breaking flush
  // in AddPrecedence below may need to latch it.
  if (absl::Status s = WriteNewPage(*rr, plan->right, ps); !s.ok()) return s;

  plan->left.left_sibling = left_no;
  plan->left.right_sibling = r_no;
  if (absl::Status s = LinkNewRight(i, r_no,
                                    [&](PageRef& node) {
                                      if (!page::EncodeBtreePage(plan->left, node.data(), ps)) {
                                        return absl::InternalError(absl::StrCat(
                                            "btree page ", n_no, ": split half does not fit"));
                                      }
                                      return absl::OkStatus();
                                    });
      !s.ok()) {
    return s;
  }
  *separator = std::move(plan->separator);
  *right_no = r_no;
  return absl::OkStatus();
}

absl::Status BTree::Impl::Splitter::SplitRoot(PageRef& root, BtreeNode& node, size_t inserted) {
  const uint32_t ps = t_->page_size;
  if (node.level == UINT8_MAX) return Corrupt(root.page_no(), "tree too deep to split the root");
  const uint8_t level = node.level;
  absl::StatusOr<SplitPlan> plan = Plan(root.page_no(), node, inserted);
  if (!plan.ok()) return plan.status();
  absl::StatusOr<PageRef> lr = NewPage();
  if (!lr.ok()) return lr.status();
  absl::StatusOr<PageRef> rr = NewPage();
  if (!rr.ok()) return rr.status();
  const PageNo l_no = lr->page_no();
  const PageNo r_no = rr->page_no();
  plan->left.right_sibling = r_no;
  plan->right.left_sibling = l_no;
  if (absl::Status s = WriteNewPage(*rr, plan->right, ps); !s.ok()) return s;
  if (absl::Status s = t_->cache->AddPrecedence(*lr, r_no); !s.ok()) return s;
  if (absl::Status s = WriteNewPage(*lr, plan->left, ps); !s.ok()) return s;
  if (absl::Status s = t_->cache->AddPrecedence(root, l_no); !s.ok()) return s;
  if (absl::Status s = t_->cache->AddPrecedence(root, r_no); !s.ok()) return s;

  BtreeNode top = EmptyLike(node);
  top.level = static_cast<uint8_t>(level + 1);
  top.low_page = l_no;
  top.entries.push_back(BtreeEntry{std::move(plan->separator), r_no});
  if (!page::EncodeBtreePage(top, root.data(), ps)) {
    return absl::InternalError(
        absl::StrCat("btree page ", root.page_no(), ": new root does not fit"));
  }
  root.Mark(cache::kSystemMark);
  return absl::OkStatus();
}

absl::Status BTree::Impl::InsertSplitting(std::string_view key, uint64_t value, uint64_t txn,
                                          std::vector<MissingLink>* moved) {
  Splitter s(this, txn, moved);
  return s.Run(key, value, 0, nullptr);
}

void BTree::Impl::RepairLinks(std::vector<MissingLink> links) {
  util::WriterLock tree(tree_mu);
  // A repair's own descent may find further missing links (a crash can leave several); a few
  // rounds settle them, and whatever is left is found again by a later writer.
  for (int round = 0; round < 4 && !links.empty(); ++round) {
    std::vector<MissingLink> more;
    for (const MissingLink& link : links) {
      Splitter s(this, 0, &more);
      (void)s.Run(link.fence, link.right, static_cast<uint8_t>(link.level + 1), &link);
    }
    links = std::move(more);
  }
}

}  // namespace ember::index
