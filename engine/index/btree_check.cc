// BTree::Check, the B-tree part of Validate(): under the tree lock held exclusively (no split,
// repair or leaf change runs meanwhile; readers may), it walks each level of the tree from the
// top along its right_sibling chain, latching one page at a time, and checks:
// - every page: a kBtree page of this tree's relation and index at the level's number, that
//   decodes (keys increasing, below the page's fence);
// - each level's chain: it starts at the leftmost page (the root; below it, the low_page of the
//   level above's first page), fences strictly increase along it, the last page has none, every
//   key of a page is at or above its left neighbour's fence (its lower bound), and left_sibling
//   names an earlier page of the chain (0 only for the first one: it is a hint, see btree.cc);
// - the parents: the children of the level above, in order, are pages of the chain in the same
//   order, each starting where its parent says (the separator, or the parent's own lower bound
//   for low_page). Pages of the chain no parent names are accepted: they are right siblings the
//   parent has not been told about yet (a crash between writing a split node and its parent),
//   and their fences put them exactly where the B-link descent finds them.
// It reports structural problems, and pages that fail their checksum, as strings naming the page
// and keeps going; only a page that cannot be read at all (an I/O error) stops it.
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "engine/index/btree.h"
#include "engine/index/btree_impl.h"

namespace ember::index {

using page::BtreeNode;
using page::PageNo;

class BTree::Impl::Checker {
 public:
  Checker(const BTree::Impl& t, std::vector<std::string>* errors,
          const std::function<void(std::string_view, uint64_t)>& visit, std::vector<PageNo>* pages)
      : t_(t), errors_(errors), visit_(visit), pages_(pages) {}

  absl::Status Run() {
    std::vector<ChainPage> above;
    PageNo first = t_.root;
    for (int level = -1;;) {  // -1: the root's level, whatever it is
      std::vector<ChainPage> chain;
      if (absl::Status s = WalkChain(first, level, &chain); !s.ok()) return s;
      if (chain.empty()) return absl::OkStatus();  // the first page was unusable (reported)
      if (level < 0) {
        level = chain[0].level;
        if (chain.size() > 1 || chain[0].left != page::kNoPage) {
          Problem(t_.root, "the root has siblings");
        }
      } else {
        MatchChildren(above, chain, level);
      }
      if (level == 0) return absl::OkStatus();
      first = chain[0].children.empty() ? page::kNoPage : chain[0].children[0].first;
      if (first == page::kNoPage) return absl::OkStatus();
      above = std::move(chain);
      --level;
    }
  }

 private:
  // What the check keeps of a page of a level's chain.
  struct ChainPage {
    PageNo no = page::kNoPage;
    PageNo left = page::kNoPage;
    uint8_t level = 0;
    std::optional<std::string> lower;  // the left neighbour's fence (none: leftmost)
    // Internal pages: (child, the lower bound this page gives it) for low_page and each entry.
    std::vector<std::pair<PageNo, std::optional<std::string>>> children;
  };

  void Problem(PageNo no, const std::string& what) {
    errors_->push_back(absl::StrCat("btree page ", no, ": ", what));
  }

  static std::string Show(const std::optional<std::string>& k) {
    return k ? absl::StrCat("\"", absl::CHexEscape(*k), "\"") : std::string("(none)");
  }

  // Walks the chain of `level` (-1: the root, any level) from `first` along right_sibling,
  // appending one ChainPage per page that decodes; stops at the chain's end or at a page that
  // cannot be part of it.
  absl::Status WalkChain(PageNo first, int level, std::vector<ChainPage>* chain) {
    absl::flat_hash_map<PageNo, size_t> index;  // page -> position in *chain
    std::optional<std::string> lower;
    for (PageNo no = first; no != page::kNoPage;) {
      if (!seen_.insert(no).second) {
        Problem(no, "reached twice in the tree");
        return absl::OkStatus();
      }
      pages_->push_back(no);
      BtreeNode node;
      {
        absl::StatusOr<cache::PageRef> r = t_.cache->Fetch(no, cache::LatchMode::kShared);
        // A page that fails its checksum is damage to report, as one that does not decode is
        // (and as Validate reports damaged data and BLOB pages); only an I/O error stops it.
        if (absl::IsDataLoss(r.status())) {
          errors_->push_back(std::string(r.status().message()));
          return absl::OkStatus();
        }
        if (!r.ok()) return r.status();
        if (absl::Status s = page::DecodeBtreePage(r->data(), t_.page_size, no, &node); !s.ok()) {
          errors_->push_back(std::string(s.message()));
          return absl::OkStatus();
        }
      }
      if (level < 0) {
        relation_id_ = node.relation_id;
        index_id_ = node.index_id;
      } else if (node.level != level) {
        Problem(no, absl::StrCat("level ", int{node.level}, ", expected ", level));
        return absl::OkStatus();
      }
      if (node.relation_id != relation_id_ || node.index_id != index_id_) {
        Problem(no, absl::StrCat("belongs to relation ", node.relation_id, " index ", node.index_id,
                                 ", the tree to relation ", relation_id_, " index ", index_id_));
      }
      if (chain->empty() ? node.left_sibling != page::kNoPage
                         : !index.contains(node.left_sibling)) {
        Problem(no, absl::StrCat("left_sibling ", node.left_sibling,
                                 " is not a page to its left on level ", int{node.level}));
      }
      if (lower && node.fence && !(*node.fence > *lower)) {
        Problem(no, absl::StrCat("fence ", Show(node.fence), " not above its left neighbour's ",
                                 Show(lower), " (level ", int{node.level}, ")"));
      }
      // Keys increase within the page and stay below its fence (decoding checked that), so the
      // first decides. An internal page's first separator equal to its lower bound would leave
      // low_page an empty range: also a problem.
      if (lower && !node.entries.empty()) {
        const std::string& k = node.entries.front().key;
        if (k < *lower || (!node.leaf() && k == *lower)) {
          Problem(no, absl::StrCat("first key below its lower bound ", Show(lower)));
        }
      }
      ChainPage cp{no, node.left_sibling, node.level, lower, {}};
      if (node.leaf()) {
        if (visit_) {
          for (const page::BtreeEntry& e : node.entries) visit_(e.key, e.value);
        }
      } else {
        cp.children.emplace_back(node.low_page, lower);
        for (page::BtreeEntry& e : node.entries) {
          cp.children.emplace_back(static_cast<PageNo>(e.value), std::move(e.key));
        }
      }
      index.emplace(no, chain->size());
      chain->push_back(std::move(cp));
      lower = std::move(node.fence);
      no = node.right_sibling;  // 0 exactly when the page has no fence (decoding checked that)
    }
    return absl::OkStatus();
  }

  // The children named by `above` (level + 1), in order, must be pages of `chain` in the same
  // order, each with the lower bound its parent gives it.
  void MatchChildren(const std::vector<ChainPage>& above, const std::vector<ChainPage>& chain,
                     int level) {
    absl::flat_hash_map<PageNo, size_t> index;
    for (size_t i = 0; i < chain.size(); ++i) index.emplace(chain[i].no, i);
    size_t next = 0;  // chain positions before this are taken
    for (const ChainPage& parent : above) {
      for (const auto& [child, bound] : parent.children) {
        auto it = index.find(child);
        if (it == index.end()) {
          Problem(parent.no, absl::StrCat("child ", child, " is not on the level ", level,
                                          " right-sibling chain"));
          // Keep it out of Validate's unreachable pages; its subtree is not checked.
          if (seen_.insert(child).second) pages_->push_back(child);
          continue;
        }
        if (it->second < next) {
          Problem(parent.no, absl::StrCat("child ", child, " out of order on level ", level));
          continue;
        }
        const ChainPage& c = chain[it->second];
        if (c.lower != bound) {
          Problem(child,
                  absl::StrCat("lower bound ", Show(c.lower), " (its left neighbour's fence)",
                               " where its parent ", parent.no, " gives ", Show(bound)));
        }
        next = it->second + 1;
      }
    }
  }

  const BTree::Impl& t_;
  std::vector<std::string>* errors_;
  const std::function<void(std::string_view, uint64_t)>& visit_;
  std::vector<PageNo>* pages_;
  absl::flat_hash_set<PageNo> seen_;
  uint32_t relation_id_ = 0;
  uint16_t index_id_ = 0;
};

absl::Status BTree::Check(std::vector<std::string>* errors,
                          const std::function<void(std::string_view key, uint64_t value)>& visit,
                          std::vector<PageNo>* pages) const {
  util::WriterLock tree(impl_->tree_mu);
  Impl::Checker c(*impl_, errors, visit, pages);
  return c.Run();
}

}  // namespace ember::index
