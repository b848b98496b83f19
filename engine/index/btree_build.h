// Bottom-up (bulk) build of a B-tree from entries in key order: leaves are filled to a fill
// factor one after the other, then each level above is made from the separators between the
// pages of the level below, and the top node goes into the tree's root page (whose number the
// catalog keeps). The key space is cut into ranges that separate threads fill at the same time;
// the ranges are stitched together at the end. Used by CREATE INDEX on a populated table and by
// index rebuilds (engine/db/index_build.cc), which sort the entries first.
//
// Every page is encoded once, in its final form, and marked for the building transaction, so
// each is written once (by the commit's flush, or by an eviction if the cache is smaller than
// the index). No careful-write edges are recorded among these pages: until the transaction
// that publishes the index commits, nothing on disk links to any of them, and its commit
// writes (and syncs) them all before the TIP that makes the index exist, so the order in which
// they reach the disk cannot matter. A leaf's right sibling and fence are known only when the next
// leaf starts, so a range holds back its first leaf (whose left neighbour is the previous range's
// last) and its last one until Complete. Nothing on disk links to any page of the build until the
// transaction that publishes the index commits; a crash before that leaves unreachable pages
// (Validate(free_unreachable) and the reclamation after a crash free them), and Abandon frees
// them at once after a failure.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "engine/cache/buffer_cache.h"
#include "engine/cache/page_space.h"
#include "engine/page/btree_page.h"

namespace ember::index {

struct BulkBuildStats {
  uint64_t entries = 0;
  uint64_t leaf_pages = 0;
  uint64_t internal_pages = 0;  // the root included when it is not a leaf
  int depth = 1;                // levels, the leaves included
};

class BulkBuild {
 public:
  // `root`: the tree's root page, made empty by BTree::Create for `txn`. `ranges`: key ranges
  // filled separately (range r's keys all below range r+1's). Pages are filled to
  // `fill_percent` of the page (10..100).
  BulkBuild(cache::BufferCache* cache, cache::PageSpace* space, uint32_t relation_id,
            uint16_t index_id, uint64_t txn, page::PageNo root, int ranges, int fill_percent);
  ~BulkBuild();
  BulkBuild(const BulkBuild&) = delete;
  BulkBuild& operator=(const BulkBuild&) = delete;

  // Appends an entry to range `r`: keys strictly increasing within the range, at most
  // BtreeMaxKeySize. Each range is fed by one thread at a time; ranges by different threads.
  absl::Status Add(int r, std::string_view key, uint64_t value);
  // Once every range is fed (no Add runs): links the ranges, writes the leaves they held back
  // and the levels above, and puts the top node into the root page.
  absl::Status Complete();
  // After a failure (of Add, Complete or the caller's): frees every page the build allocated,
  // the root excepted. Best effort: a page it cannot free stays unreachable (Validate frees it).
  void Abandon();

  BulkBuildStats stats() const;

 private:
  struct Range;
  struct Child {  // a page of a level and the separator below it (none for the first)
    std::string lower;
    page::PageNo page;
  };
  absl::StatusOr<page::PageNo> NextPage(Range& r);
  absl::Status WriteNode(page::PageNo no, const page::BtreePageBuilder& b, page::PageNo left,
                         page::PageNo right, page::PageNo low, std::string_view fence);
  absl::Status CloseLeaf(Range& r, std::string_view next_key);
  // Builds the level above `level` (its pages in order); the result replaces `level`.
  absl::Status BuildLevel(std::vector<Child>* level, uint8_t height);

  cache::BufferCache* cache_;
  cache::PageSpace* space_;
  const uint32_t relation_id_;
  const uint16_t index_id_;
  const uint64_t txn_;
  const page::PageNo root_;
  const uint32_t ps_;
  const size_t target_;  // bytes a page is filled to
  std::vector<std::unique_ptr<Range>> ranges_;
  std::unique_ptr<Range> upper_;         // page allocation for the levels above the leaves
  page::PageNo unused_ = page::kNoPage;  // a page Complete freed (a one-leaf tree's)
  BulkBuildStats stats_;
};

}  // namespace ember::index
