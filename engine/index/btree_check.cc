// BTree::Check, the B+tree part of Validate(): a depth-first walk of the whole tree under the
// tree lock held exclusively (no split or leaf change runs meanwhile; readers may), latching one
// page at a time. It reports structural problems as strings naming the page and keeps going;
// only a page that cannot be read at all stops it.
#include <set>

#include "absl/strings/str_cat.h"
#include "engine/index/btree.h"
#include "engine/index/btree_impl.h"

namespace ember::index {

using page::BtreeNode;
using page::PageNo;

class BTree::Impl::Checker {
 public:
  Checker(const BTree::Impl& t, std::vector<std::string>* errors,
          const std::function<void(std::string_view, uint64_t)>& visit,
          std::vector<PageNo>* pages)
      : t_(t), errors_(errors), visit_(visit), pages_(pages) {}

  absl::Status Run() {
    if (absl::Status s = Visit(t_.root, -1, nullptr, nullptr); !s.ok()) return s;
    CheckSiblingChains();
    return absl::OkStatus();
  }

 private:
  struct LevelItem {
    PageNo no, left, right;
  };

  void Problem(PageNo no, const std::string& what) {
    errors_->push_back(absl::StrCat("btree page ", no, ": ", what));
  }

  // Visits page `no`, expected at `level` (-1: the root, any level), whose keys must lie in
  // [*lo, *hi) (a null pointer: unbounded).
  absl::Status Visit(PageNo no, int level, const std::string* lo, const std::string* hi) {
    if (!seen_.insert(no).second) {
      Problem(no, "reached twice in the tree");
      return absl::OkStatus();
    }
    pages_->push_back(no);
    BtreeNode node;
    {
      absl::StatusOr<cache::PageRef> r = t_.cache->Fetch(no, cache::LatchMode::kShared);
      if (!r.ok()) return r.status();
      if (absl::Status s = page::DecodeBtreePage(r->data(), t_.page_size, no, &node); !s.ok()) {
        errors_->push_back(std::string(s.message()));
        return absl::OkStatus();
      }
    }
    if (level < 0) {
      relation_id_ = node.relation_id;
      index_id_ = node.index_id;
      levels_.resize(size_t{node.level} + 1);
    } else if (node.level != level) {
      Problem(no, absl::StrCat("level ", int{node.level}, ", expected ", level));
      return absl::OkStatus();
    }
    if (node.relation_id != relation_id_ || node.index_id != index_id_) {
      Problem(no, absl::StrCat("belongs to relation ", node.relation_id, " index ", node.index_id,
                               ", the tree to relation ", relation_id_, " index ", index_id_));
    }
    levels_[node.level].push_back({no, node.left_sibling, node.right_sibling});
    if (!node.entries.empty()) {
      // Keys are increasing within the page (decoding checked that), so the ends decide. A
      // separator equal to the lower bound would leave an empty child range: also a problem.
      const std::string& first = node.entries.front().key;
      if (lo && (first < *lo || (!node.leaf() && first == *lo))) {
        Problem(no, "first key below the bound its parent gives");
      }
      if (hi && node.entries.back().key >= *hi) {
        Problem(no, "last key not below the bound its parent gives");
      }
    }
    if (node.leaf()) {
      if (visit_) {
        for (const page::BtreeEntry& e : node.entries) visit_(e.key, e.value);
      }
      return absl::OkStatus();
    }
    const int child_level = node.level - 1;
    const size_t n = node.entries.size();
    if (absl::Status s = Visit(node.low_page, child_level, lo, n > 0 ? &node.entries[0].key : hi);
        !s.ok()) {
      return s;
    }
    for (size_t i = 0; i < n; ++i) {
      const std::string* upper = i + 1 < n ? &node.entries[i + 1].key : hi;
      if (absl::Status s = Visit(static_cast<PageNo>(node.entries[i].value), child_level,
                                 &node.entries[i].key, upper);
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

  // The walk met each level's pages left to right; the sibling links must say the same.
  void CheckSiblingChains() {
    for (size_t level = 0; level < levels_.size(); ++level) {
      const std::vector<LevelItem>& v = levels_[level];
      for (size_t i = 0; i < v.size(); ++i) {
        const PageNo want_left = i > 0 ? v[i - 1].no : page::kNoPage;
        const PageNo want_right = i + 1 < v.size() ? v[i + 1].no : page::kNoPage;
        if (v[i].right != want_right) {
          Problem(v[i].no, absl::StrCat("right_sibling ", v[i].right, ", expected ", want_right,
                                        " (level ", level, " chain out of order)"));
        }
        if (v[i].left != want_left) {
          Problem(v[i].no, absl::StrCat("left_sibling ", v[i].left, ", expected ", want_left,
                                        " (level ", level, ")"));
        }
      }
    }
  }

  const BTree::Impl& t_;
  std::vector<std::string>* errors_;
  const std::function<void(std::string_view, uint64_t)>& visit_;
  std::vector<PageNo>* pages_;
  std::set<PageNo> seen_;
  uint32_t relation_id_ = 0;
  uint16_t index_id_ = 0;
  std::vector<std::vector<LevelItem>> levels_;  // indexed by level
};

absl::Status BTree::Check(std::vector<std::string>* errors,
                          const std::function<void(std::string_view key, uint64_t value)>& visit,
                          std::vector<PageNo>* pages) const {
  std::unique_lock<std::shared_mutex> tree(impl_->tree_mu);
  Impl::Checker c(*impl_, errors, visit, pages);
  return c.Run();
}

}  // namespace ember::index
