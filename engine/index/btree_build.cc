// BulkBuild (see btree_build.h).
#include "engine/index/btree_build.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ember::index {

using cache::LatchMode;
using cache::PageRef;
using page::BtreePageBuilder;
using page::PageNo;

namespace {

// Pages come in runs (PageSpace::AllocateRun), so a range's leaves are contiguous: the first
// of a range is kFirstRun pages, each next one twice the last, up to kRun. A small index then
// fits in the free runs a dropped one left instead of growing the file by a whole kRun.
constexpr uint32_t kFirstRun = 8;
constexpr uint32_t kRun = 64;

// The shortest s with left < s <= right: the fence between two neighbouring pages. Its length is
// at most left's plus one, which is what a page reserves for it (see LeafFits).
std::string Separator(std::string_view left, std::string_view right) {
  size_t i = 0;
  const size_t n = std::min(left.size(), right.size());
  while (i < n && left[i] == right[i]) ++i;
  return std::string(right.substr(0, i + 1));
}

}  // namespace

struct BulkBuild::Range {
  explicit Range(uint32_t ps) : cur(ps), first(ps) {}
  BtreePageBuilder cur;  // the leaf being filled
  PageNo cur_no = page::kNoPage;
  std::string cur_lower;   // the separator below it ("" for the range's first leaf)
  BtreePageBuilder first;  // the range's first leaf once closed, held back until Complete
  bool first_closed = false;
  PageNo first_no = page::kNoPage, first_right = page::kNoPage;
  std::string first_fence;
  PageNo prev_no = page::kNoPage;  // the leaf before `cur` in this range
  std::string first_key;
  std::vector<Child> leaves;  // closed leaves in order (the held-back first one included)
  uint64_t entries = 0;
  uint64_t written = 0;  // leaves written
  // Page allocation: every run taken (for Abandon) and what is left of the last one.
  std::vector<std::pair<PageNo, uint32_t>> runs;  // (first page, pages)
  uint32_t next_run = kFirstRun;
  PageNo run_next = page::kNoPage;
  uint32_t run_left = 0;
  uint32_t tail_freed = 0;  // pages at the end of the last run Complete gave back
};

BulkBuild::BulkBuild(cache::BufferCache* cache, cache::PageSpace* space, uint32_t relation_id,
                     uint16_t index_id, uint64_t txn, PageNo root, int ranges, int fill_percent)
    : cache_(cache),
      space_(space),
      relation_id_(relation_id),
      index_id_(index_id),
      txn_(txn),
      root_(root),
      ps_(cache->page_size()),
      target_(static_cast<size_t>(cache->page_size()) * std::clamp(fill_percent, 10, 100) / 100) {
  for (int i = 0; i < std::max(ranges, 1); ++i) {
    ranges_.push_back(std::make_unique<Range>(ps_));
    ranges_.back()->cur.Reset(relation_id_, index_id_, 0);
  }
  upper_ = std::make_unique<Range>(ps_);
}

BulkBuild::~BulkBuild() = default;

absl::StatusOr<PageNo> BulkBuild::NextPage(Range& r) {
  if (r.run_left == 0) {
    const uint32_t n = r.next_run;
    absl::StatusOr<PageNo> run = space_->AllocateRun(txn_, n);
    if (!run.ok()) return run.status();
    r.runs.emplace_back(*run, n);
    r.next_run = std::min(kRun, 2 * n);
    r.run_next = *run;
    r.run_left = n;
  }
  --r.run_left;
  return r.run_next++;
}

absl::Status BulkBuild::WriteNode(PageNo no, const BtreePageBuilder& b, PageNo left, PageNo right,
                                  PageNo low, std::string_view fence) {
  absl::StatusOr<PageRef> ref =
      no == root_ ? cache_->Fetch(no, LatchMode::kExclusive) : space_->Claim(no);
  if (!ref.ok()) return ref.status();
  // No precedence among the build's own pages: nothing links to any of them until the commit
  // that publishes the index, and that commit writes them all before its TIP (see the file
  // comment). An edge per child would also cost a cycle search per child, and a node with
  // hundreds of children exhausts that search, which then writes the subtree early.
  page::InitPage(ref->data(), ps_, page::PageType::kBtree, no);
  if (!b.Finish(ref->data(), left, right, low, fence)) {
    return absl::InternalError(absl::StrCat("index build: btree page ", no, " does not fit"));
  }
  ref->Mark(txn_);
  return absl::OkStatus();
}

absl::Status BulkBuild::CloseLeaf(Range& r, std::string_view next_key) {
  std::string fence = Separator(r.cur.last_key(), next_key);
  absl::StatusOr<PageNo> next = NextPage(r);
  if (!next.ok()) return next.status();
  if (r.prev_no == page::kNoPage) {
    // The range's first leaf: its left neighbour is the previous range's last leaf.
    std::swap(r.first, r.cur);
    r.first_closed = true;
    r.first_no = r.cur_no;
    r.first_right = *next;
    r.first_fence = fence;
  } else {
    if (absl::Status s = WriteNode(r.cur_no, r.cur, r.prev_no, *next, page::kNoPage, fence);
        !s.ok()) {
      return s;
    }
    ++r.written;
  }
  r.leaves.push_back(Child{std::move(r.cur_lower), r.cur_no});
  r.prev_no = r.cur_no;
  r.cur_no = *next;
  r.cur_lower = std::move(fence);
  r.cur.Reset(relation_id_, index_id_, 0);
  return absl::OkStatus();
}

absl::Status BulkBuild::Add(int ri, std::string_view key, uint64_t value) {
  Range& r = *ranges_[static_cast<size_t>(ri)];
  if (r.entries == 0) {
    absl::StatusOr<PageNo> no = NextPage(r);
    if (!no.ok()) return no.status();
    r.cur_no = *no;
    r.first_key.assign(key.data(), key.size());
  } else {
    const size_t prefix = r.cur.PrefixFor(key);
    const size_t size = r.cur.used() + r.cur.Growth(key, value, prefix);
    // Full: the room kept for a fence covers the longest one this leaf can get (the separator
    // of its last key and the next is at most one byte longer than that last key).
    if (size <= target_ && size + page::bt::kFenceOverhead + key.size() + 1 <= ps_) {
      r.cur.Add(key, value, prefix);
      ++r.entries;
      return absl::OkStatus();
    }
    if (absl::Status s = CloseLeaf(r, key); !s.ok()) return s;
  }
  r.cur.Add(key, value);
  ++r.entries;
  return absl::OkStatus();
}

absl::Status BulkBuild::BuildLevel(std::vector<Child>* level, uint8_t height) {
  const std::vector<Child>& c = *level;
  const size_t n = c.size();
  // Groups of children, one node each: [starts[g], starts[g+1]). A node's first child is its
  // low_page; each further child enters with the separator below it, and the node's fence is
  // the separator below the next node's first child (known here: it is checked to fit).
  std::vector<size_t> starts;
  BtreePageBuilder b(ps_);
  for (size_t i = 0; i < n;) {
    starts.push_back(i);
    b.Reset(relation_id_, index_id_, height);
    size_t j = i + 1;
    for (; j < n; ++j) {
      const size_t fence = j + 1 < n ? c[j + 1].lower.size() : 0;
      if (b.count() > 0 && (b.SizeWith(c[j].lower, c[j].page, 0) > target_ ||
                            b.SizeWith(c[j].lower, c[j].page, fence) > ps_)) {
        break;
      }
      b.Add(c[j].lower, c[j].page);
    }
    i = j;
  }
  starts.push_back(n);
  const size_t nodes = starts.size() - 1;
  std::vector<PageNo> pages(nodes, root_);  // a single node is the root
  if (nodes > 1) {
    for (PageNo& p : pages) {
      absl::StatusOr<PageNo> no = NextPage(*upper_);
      if (!no.ok()) return no.status();
      p = *no;
    }
  }
  std::vector<Child> above;
  for (size_t g = 0; g < nodes; ++g) {
    b.Reset(relation_id_, index_id_, height);
    for (size_t j = starts[g] + 1; j < starts[g + 1]; ++j) b.Add(c[j].lower, c[j].page);
    const bool last = g + 1 == nodes;
    const std::string_view fence = last ? std::string_view() : c[starts[g + 1]].lower;
    if (absl::Status s = WriteNode(pages[g], b, g == 0 ? page::kNoPage : pages[g - 1],
                                   last ? page::kNoPage : pages[g + 1], c[starts[g]].page, fence);
        !s.ok()) {
      return s;
    }
    ++stats_.internal_pages;
    above.push_back(Child{c[starts[g]].lower, pages[g]});
  }
  *level = std::move(above);
  return absl::OkStatus();
}

absl::Status BulkBuild::Complete() {
  std::vector<Range*> full;
  for (auto& r : ranges_) {
    stats_.entries += r->entries;
    if (r->entries > 0) full.push_back(r.get());
  }
  absl::Status result;
  PageNo unused = page::kNoPage;
  if (full.size() == 1 && !full[0]->first_closed) {
    // One leaf in all: it is the root, and the page it was given is not needed.
    Range& r = *full[0];
    result = WriteNode(root_, r.cur, page::kNoPage, page::kNoPage, page::kNoPage, {});
    if (result.ok()) stats_.leaf_pages = 1;
    unused = r.cur_no;
  } else if (!full.empty()) {
    std::vector<Child> level;
    for (size_t k = 0; k < full.size() && result.ok(); ++k) {
      Range& r = *full[k];
      Range* next = k + 1 < full.size() ? full[k + 1] : nullptr;
      const PageNo left = k > 0 ? full[k - 1]->cur_no : page::kNoPage;
      const std::string fence = next ? Separator(r.cur.last_key(), next->first_key) : "";
      const PageNo right =
          next ? (next->first_closed ? next->first_no : next->cur_no) : page::kNoPage;
      if (r.first_closed) {
        result = WriteNode(r.first_no, r.first, left, r.first_right, page::kNoPage, r.first_fence);
        if (result.ok()) {
          result = WriteNode(r.cur_no, r.cur, r.prev_no, right, page::kNoPage, fence);
        }
        r.written += 2;
      } else {
        result = WriteNode(r.cur_no, r.cur, left, right, page::kNoPage, fence);
        r.written += 1;
      }
      r.leaves.push_back(Child{std::move(r.cur_lower), r.cur_no});
      if (k > 0) r.leaves.front().lower = Separator(full[k - 1]->cur.last_key(), r.first_key);
      for (Child& c : r.leaves) level.push_back(std::move(c));
      r.leaves.clear();
    }
    stats_.leaf_pages = level.size();
    for (uint8_t height = 1; result.ok() && level.size() > 1; ++height) {
      result = BuildLevel(&level, height);
      stats_.depth = height + 1;
    }
  }
  if (!result.ok()) return result;
  // Pages allocated that no node took: the rest of each last run.
  if (unused != page::kNoPage) {
    (void)space_->Free(unused, txn_);
    unused_ = unused;
  }
  auto free_tail = [&](Range& r) {
    r.tail_freed = r.run_left;
    for (; r.run_left > 0; --r.run_left) (void)space_->Free(r.run_next++, txn_);
  };
  for (auto& r : ranges_) free_tail(*r);
  free_tail(*upper_);
  return absl::OkStatus();
}

void BulkBuild::Abandon() {
  // Each page once: a page freed already may belong to someone else by now.
  auto free_runs = [&](Range& r) {
    for (size_t k = 0; k < r.runs.size(); ++k) {
      const auto [first, pages] = r.runs[k];
      const uint32_t n = k + 1 == r.runs.size() ? pages - r.tail_freed : pages;
      for (uint32_t i = 0; i < n; ++i) {
        if (first + i != unused_) (void)space_->Free(first + i, txn_);
      }
    }
    r.runs.clear();
    r.next_run = kFirstRun;
    r.run_left = 0;
    r.tail_freed = 0;
  };
  for (auto& r : ranges_) free_runs(*r);
  free_runs(*upper_);
}

BulkBuildStats BulkBuild::stats() const { return stats_; }

}  // namespace ember::index
