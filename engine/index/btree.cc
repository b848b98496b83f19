// The B+tree: creation, descent, insert with node splits, remove (see btree.h). Cursors are in
// btree_cursor.cc and the structural check in btree_check.cc.
//
// Concurrency protocol (one BTree object per tree in a process; page latches are the buffer
// cache's shared/exclusive frame latches, `tree_mu` is a std::shared_mutex in Impl):
// - Readers (Seek, Cursor::Next) take no tree lock. They latch-couple down with shared latches
//   (a parent is released only once its child is latched) and, at the leaf level only, couple
//   rightwards along right_sibling (leaf held while its right neighbour is latched). A reader
//   holds at most two latches and never waits for a page above or to the left of one it holds.
// - Writers that change one leaf (Remove, and Insert when the entry fits) hold tree_mu shared,
//   couple down like readers and take the leaf exclusively. They never wait for anything while
//   holding the leaf.
// - An Insert that does not fit releases everything and retries holding tree_mu exclusively, so
//   it is the only writer in the tree and only readers run beside it. It latches its path
//   exclusively top-down, releasing ancestors as soon as a node below them is "safe" (has room
//   for one more separator, so a split cannot climb past it). Splits then run bottom-up on
//   already latched nodes; the only new latches are fresh pages (unreachable, uncontended) and the
//   right neighbour of a node being split, which is taken while holding that node (left to right,
//   as readers go) and only after every latch on the levels below has been released, so the
//   splitter never holds a child of a page it waits for.
// Latch order, therefore: tree_mu before any latch; higher level before lower level; within a
// level, left before right. Nobody waits for a latch against that order.
//
// Careful write (architecture.md "Durability"): the new right page R of a split is fully written
// and released before anything links to it; then AddPrecedence records "R before" the split node
// N (its right_sibling), N's old right neighbour (its left_sibling) and the parent P (the new
// separator), all before those pages change; and "N before P", so the parent never reaches disk
// saying the upper keys live in R while N's old copy still holds them. A root split writes both
// new children before the root. Edges always point from a lower level to a higher one, or within
// a level from a newer page to an older one, so they never form a cycle. A page that links to R
// is never latched by us when AddPrecedence may have to flush R's chain (cycle breaking), since
// that flush takes shared latches on the chain.
#include "engine/index/btree.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/index/btree_impl.h"
#include "engine/util/coding.h"

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

// Position of the first entry >= key.
size_t LowerBound(const BtreeNode& node, std::string_view key) {
  auto it = std::lower_bound(node.entries.begin(), node.entries.end(), key,
                             [](const BtreeEntry& e, std::string_view k) { return e.key < k; });
  return static_cast<size_t>(it - node.entries.begin());
}

// The shortest key s with left < s <= right (suffix truncation): keys between the two halves of
// a leaf need only be told apart, not stored whole, in the parent. REQUIRES: left < right.
std::string ShortestSeparator(std::string_view left, std::string_view right) {
  size_t i = 0;
  while (i < left.size() && i < right.size() && left[i] == right[i]) ++i;
  return std::string(right.substr(0, i + 1));
}

BtreeNode EmptyLike(const BtreeNode& n) {
  BtreeNode out;
  out.relation_id = n.relation_id;
  out.index_id = n.index_id;
  out.level = n.level;
  return out;
}

// The two halves of an overfull node and the separator between them.
struct SplitPlan {
  BtreeNode left, right;
  std::string separator;
};

// Chooses where to split an overfull node (the entry at `inserted` is the new one) so the larger
// half is as small as possible in bytes. Leaves: left = [0,k), right = [k,n). Internal: left =
// [0,k), entry k moves up (its child becomes right's low_page), right = (k,n).
size_t ChooseSplit(const BtreeNode& node, size_t inserted) {
  const size_t n = node.entries.size();
  const bool internal = !node.leaf();
  // Appending at the right end of a level (ascending loads): leave the left page full.
  if (inserted + 1 == n && node.right_sibling == page::kNoPage && n >= 2) return n - 1;
  std::vector<size_t> packed(n), sum(n + 1, 0);
  std::string_view prev;
  for (size_t i = 0; i < n; ++i) {
    packed[i] = page::BtreeEntrySize(prev, node.entries[i].key);
    sum[i + 1] = sum[i] + packed[i];
    prev = node.entries[i].key;
  }
  // Bytes of entries [from, n) once `from` is the first entry of a page.
  auto tail = [&](size_t from) -> size_t {
    if (from >= n) return 0;
    return page::bt::kEntryOverhead + node.entries[from].key.size() + sum[n] - sum[from + 1];
  };
  const size_t lo = 1;
  const size_t hi = internal ? n - 2 : n - 1;
  size_t best_k = lo, best = SIZE_MAX;
  for (size_t k = lo; k <= hi && k < n; ++k) {
    const size_t worst = std::max(sum[k], tail(internal ? k + 1 : k));
    if (worst < best) {
      best = worst;
      best_k = k;
    }
  }
  return best_k;
}

// A node can be split when each half keeps at least one entry (internal: plus the one moving up).
bool CanSplit(const BtreeNode& node) { return node.entries.size() >= (node.leaf() ? 2u : 3u); }

// REQUIRES: CanSplit(node). Consumes node's entries.
SplitPlan PlanSplit(BtreeNode& node, size_t inserted) {
  const size_t k = ChooseSplit(node, inserted);
  SplitPlan p{EmptyLike(node), EmptyLike(node), {}};
  auto& e = node.entries;
  if (node.leaf()) {
    p.separator = ShortestSeparator(e[k - 1].key, e[k].key);
    p.right.entries.assign(std::make_move_iterator(e.begin() + k), std::make_move_iterator(e.end()));
  } else {
    p.separator = std::move(e[k].key);
    p.right.low_page = static_cast<PageNo>(e[k].value);
    p.right.entries.assign(std::make_move_iterator(e.begin() + k + 1),
                           std::make_move_iterator(e.end()));
  }
  e.resize(k);
  p.left.entries = std::move(e);
  p.left.low_page = node.low_page;
  return p;
}

bool Fits(const BtreeNode& n, uint32_t page_size) { return page::BtreeEncodedSize(n) <= page_size; }

// Initialises, fills, marks and releases a freshly allocated page.
absl::Status WriteNewPage(PageRef& ref, const BtreeNode& node, uint32_t page_size, uint64_t txn) {
  page::InitPage(ref.data(), page_size, page::PageType::kBtree, ref.page_no());
  if (!page::EncodeBtreePage(node, ref.data(), page_size)) {
    return absl::InternalError(absl::StrCat("btree page ", ref.page_no(), ": split half does not fit"));
  }
  ref.Mark(txn);
  ref.Release();
  return absl::OkStatus();
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

absl::Status BTree::Impl::PickChild(const uint8_t* data, PageNo no, const BtreeHeader& h,
                                    const Bound& b, PageNo* child, std::string* lower,
                                    bool* has_lower) const {
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
                                                   std::string* lower, bool* has_lower) const {
  for (int attempt = 0;; ++attempt) {
    if (has_lower) *has_lower = false;
    BtreeHeader h;
    absl::StatusOr<PageRef> cur = FetchNode(root, LatchMode::kShared, -1, &h);
    if (!cur.ok()) return cur.status();
    if (h.leaf() && mode == LatchMode::kExclusive) {
      // A leaf root: relatch it exclusively. It can only have become internal meanwhile if a
      // root split ran, which needs tree_mu exclusive; go round again if so.
      cur->Release();
      cur = FetchNode(root, LatchMode::kExclusive, -1, &h);
      if (!cur.ok()) return cur.status();
      if (!h.leaf()) {
        if (attempt > 1000) return absl::InternalError("btree: root keeps changing level");
        continue;
      }
    }
    PageRef page = std::move(*cur);
    while (!h.leaf()) {
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
    return page;
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
  if (absl::Status s = WriteNewPage(*r, leaf, cache->page_size(), txn); !s.ok()) return s;
  return no;
}

BTree::BTree(cache::BufferCache* cache, cache::PageSpace* space, PageNo root)
    : cache_(cache), space_(space), root_(root), impl_(std::make_unique<Impl>(cache, space, root)) {}

BTree::~BTree() = default;

absl::Status BTree::Insert(std::string_view key, uint64_t value, uint64_t txn) {
  if (key.size() > impl_->max_key) {
    return absl::InvalidArgumentError(absl::StrCat("btree insert: key of ", key.size(),
                                                   " bytes exceeds the maximum of ", impl_->max_key));
  }
  {
    std::shared_lock<std::shared_mutex> tree(impl_->tree_mu);
    absl::StatusOr<PageRef> leaf = impl_->DescendToLeaf(Bound{key}, LatchMode::kExclusive, nullptr, nullptr);
    if (!leaf.ok()) return leaf.status();
    BtreeNode node;
    if (absl::Status s = page::DecodeBtreePage(leaf->data(), impl_->page_size, leaf->page_no(), &node);
        !s.ok()) {
      return s;
    }
    const size_t pos = LowerBound(node, key);
    if (pos < node.entries.size() && node.entries[pos].key == key) {
      return absl::AlreadyExistsError(
          absl::StrCat("btree insert: key already present in page ", leaf->page_no()));
    }
    node.entries.insert(node.entries.begin() + pos, BtreeEntry{std::string(key), value});
    if (page::EncodeBtreePage(node, leaf->data(), impl_->page_size)) {
      leaf->Mark(txn);
      return absl::OkStatus();
    }
  }
  std::unique_lock<std::shared_mutex> tree(impl_->tree_mu);
  return impl_->InsertSplitting(key, value, txn);
}

absl::Status BTree::Remove(std::string_view key, uint64_t txn) {
  if (key.size() > impl_->max_key) {
    return absl::InvalidArgumentError(absl::StrCat("btree remove: key of ", key.size(),
                                                   " bytes exceeds the maximum of ", impl_->max_key));
  }
  std::shared_lock<std::shared_mutex> tree(impl_->tree_mu);
  absl::StatusOr<PageRef> leaf = impl_->DescendToLeaf(Bound{key}, LatchMode::kExclusive, nullptr, nullptr);
  if (!leaf.ok()) return leaf.status();
  BtreeNode node;
  if (absl::Status s = page::DecodeBtreePage(leaf->data(), impl_->page_size, leaf->page_no(), &node);
      !s.ok()) {
    return s;
  }
  const size_t pos = LowerBound(node, key);
  if (pos == node.entries.size() || node.entries[pos].key != key) {
    return absl::NotFoundError(absl::StrCat("btree remove: key not in page ", leaf->page_no()));
  }
  node.entries.erase(node.entries.begin() + pos);
  // Removing an entry never grows the page (the next key's prefix can shrink by at most the
  // removed entry's own size), so this always fits.
  if (!page::EncodeBtreePage(node, leaf->data(), impl_->page_size)) {
    return absl::InternalError(absl::StrCat("btree page ", leaf->page_no(), ": grew on remove"));
  }
  leaf->Mark(txn);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- splits

// State of one insert that splits, under tree_mu exclusive.
class BTree::Impl::Splitter {
 public:
  Splitter(BTree::Impl* t, uint64_t txn) : t_(t), txn_(txn) {}

  absl::Status Run(std::string_view key, uint64_t value);

 private:
  // Splits path_[i] (whose new content `node` does not fit) into itself and a new right page,
  // releasing path_[i] and every latch it took. Returns the separator and the new page for the
  // parent path_[i - 1].
  absl::Status SplitNode(size_t i, BtreeNode& node, size_t inserted, std::string* separator,
                         PageNo* right);
  // Moves the root's content (`node`, which does not fit) into two new children, the root
  // becoming an internal node one level up over them. The root keeps its page number.
  absl::Status SplitRoot(PageRef& root, BtreeNode& node, size_t inserted);

  BTree::Impl* t_;
  uint64_t txn_;
  // Exclusive latches from the highest node that may change down to the leaf.
  std::vector<PageRef> path_;
  // A failure to record "split node before parent" does not undo the split (the tree is
  // consistent in memory); it is reported once the insert is done.
  absl::Status deferred_;
};

absl::Status BTree::Impl::Splitter::Run(std::string_view key, uint64_t value) {
  const size_t safe_room = page::bt::kEntryOverhead + t_->max_key;
  BtreeHeader h;
  absl::StatusOr<PageRef> r = t_->FetchNode(t_->root, LatchMode::kExclusive, -1, &h);
  if (!r.ok()) return r.status();
  path_.push_back(std::move(*r));
  while (!h.leaf()) {
    PageNo child;
    if (absl::Status s = t_->PickChild(path_.back().data(), path_.back().page_no(), h, Bound{key},
                                       &child, nullptr, nullptr);
        !s.ok()) {
      return s;
    }
    BtreeHeader ch;
    absl::StatusOr<PageRef> c = t_->FetchNode(child, LatchMode::kExclusive, h.level - 1, &ch);
    if (!c.ok()) return c.status();
    // An internal child with room for one more separator absorbs any split below it.
    if (!ch.leaf() && t_->page_size - ch.data_end >= safe_room) path_.clear();
    path_.push_back(std::move(*c));
    h = ch;
  }

  BtreeNode node;
  PageRef& leaf = path_.back();
  if (absl::Status s = page::DecodeBtreePage(leaf.data(), t_->page_size, leaf.page_no(), &node);
      !s.ok()) {
    return s;
  }
  size_t pos = LowerBound(node, key);
  if (pos < node.entries.size() && node.entries[pos].key == key) {
    return absl::AlreadyExistsError(
        absl::StrCat("btree insert: key already present in page ", leaf.page_no()));
  }
  node.entries.insert(node.entries.begin() + pos, BtreeEntry{std::string(key), value});

  for (size_t i = path_.size() - 1;; --i) {
    PageRef& ref = path_[i];
    if (page::EncodeBtreePage(node, ref.data(), t_->page_size)) {
      ref.Mark(txn_);
      return deferred_;
    }
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
    // Post the separator in the parent.
    PageRef& parent = path_[i - 1];
    if (absl::Status s = page::DecodeBtreePage(parent.data(), t_->page_size, parent.page_no(), &node);
        !s.ok()) {
      return s;
    }
    pos = LowerBound(node, separator);
    if (pos < node.entries.size() && node.entries[pos].key == separator) {
      return Corrupt(parent.page_no(), "separator of a split child already present");
    }
    node.entries.insert(node.entries.begin() + pos, BtreeEntry{std::move(separator), right});
  }
}

absl::Status BTree::Impl::Splitter::SplitNode(size_t i, BtreeNode& node, size_t inserted,
                                 std::string* separator, PageNo* right_no) {
  const uint32_t ps = t_->page_size;
  PageRef& n = path_[i];
  PageRef& parent = path_[i - 1];
  const PageNo n_no = n.page_no();
  const PageNo old_right_no = node.right_sibling;
  const uint8_t level = node.level;
  if (!CanSplit(node)) return Corrupt(n_no, "overfull with too few entries to split");
  SplitPlan plan = PlanSplit(node, inserted);
  if (!Fits(plan.left, ps) || !Fits(plan.right, ps)) {
    return absl::InternalError(absl::StrCat("btree page ", n_no, ": no split point fits"));
  }

  // Everything that can fail for want of a page comes before the first change.
  PageRef old_right;
  if (old_right_no != page::kNoPage) {
    BtreeHeader rh;
    absl::StatusOr<PageRef> r = t_->FetchNode(old_right_no, LatchMode::kExclusive, level, &rh);
    if (!r.ok()) return r.status();
    old_right = std::move(*r);
  }
  absl::StatusOr<PageRef> rr = t_->space->Allocate(txn_);
  if (!rr.ok()) return rr.status();
  const PageNo r_no = rr->page_no();
  plan.right.left_sibling = n_no;
  plan.right.right_sibling = old_right_no;
  // Released before anything links to it: nobody can reach it yet, and a cycle-breaking flush
  // in AddPrecedence below may need to latch it.
  if (absl::Status s = WriteNewPage(*rr, plan.right, ps, txn_); !s.ok()) return s;

  cache::BufferCache* c = t_->cache;
  if (absl::Status s = c->AddPrecedence(n, r_no); !s.ok()) return s;
  if (old_right) {
    if (absl::Status s = c->AddPrecedence(old_right, r_no); !s.ok()) return s;
  }
  if (absl::Status s = c->AddPrecedence(parent, r_no); !s.ok()) return s;

  plan.left.left_sibling = node.left_sibling;
  plan.left.right_sibling = r_no;
  if (!page::EncodeBtreePage(plan.left, n.data(), ps)) {
    return absl::InternalError(absl::StrCat("btree page ", n_no, ": split half does not fit"));
  }
  n.Mark(txn_);
  if (old_right) {
    util::Put32(old_right.data() + page::bt::kLeftSibling, r_no);
    old_right.Mark(txn_);
    old_right.Release();
  }
  n.Release();
  // N is released so that a cycle-breaking flush of N's chain cannot wait for our own latch.
  if (absl::Status s = c->AddPrecedence(parent, n_no); !s.ok() && deferred_.ok()) deferred_ = s;
  *separator = std::move(plan.separator);
  *right_no = r_no;
  return absl::OkStatus();
}

absl::Status BTree::Impl::Splitter::SplitRoot(PageRef& root, BtreeNode& node, size_t inserted) {
  const uint32_t ps = t_->page_size;
  if (node.level == UINT8_MAX) return Corrupt(root.page_no(), "tree too deep to split the root");
  const uint8_t level = node.level;
  if (!CanSplit(node)) return Corrupt(root.page_no(), "overfull with too few entries to split");
  SplitPlan plan = PlanSplit(node, inserted);
  if (!Fits(plan.left, ps) || !Fits(plan.right, ps)) {
    return absl::InternalError(absl::StrCat("btree page ", root.page_no(), ": no split point fits"));
  }
  absl::StatusOr<PageRef> lr = t_->space->Allocate(txn_);
  if (!lr.ok()) return lr.status();
  absl::StatusOr<PageRef> rr = t_->space->Allocate(txn_);
  if (!rr.ok()) return rr.status();
  const PageNo l_no = lr->page_no();
  const PageNo r_no = rr->page_no();
  plan.left.right_sibling = r_no;
  plan.right.left_sibling = l_no;
  if (absl::Status s = WriteNewPage(*rr, plan.right, ps, txn_); !s.ok()) return s;
  if (absl::Status s = t_->cache->AddPrecedence(*lr, r_no); !s.ok()) return s;
  if (absl::Status s = WriteNewPage(*lr, plan.left, ps, txn_); !s.ok()) return s;
  if (absl::Status s = t_->cache->AddPrecedence(root, l_no); !s.ok()) return s;
  if (absl::Status s = t_->cache->AddPrecedence(root, r_no); !s.ok()) return s;

  BtreeNode top = EmptyLike(node);
  top.level = static_cast<uint8_t>(level + 1);
  top.low_page = l_no;
  top.entries.push_back(BtreeEntry{std::move(plan.separator), r_no});
  if (!page::EncodeBtreePage(top, root.data(), ps)) {
    return absl::InternalError(absl::StrCat("btree page ", root.page_no(), ": new root does not fit"));
  }
  root.Mark(txn_);
  return absl::OkStatus();
}

absl::Status BTree::Impl::InsertSplitting(std::string_view key, uint64_t value, uint64_t txn) {
  Splitter s(this, txn);
  return s.Run(key, value);
}

}  // namespace ember::index
