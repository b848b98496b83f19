// A B+tree of byte-string keys (ordered by memcmp) to 64-bit values, stored in kBtree pages
// through the buffer cache. Keys are unique within one tree: the index layer makes entries of a
// non-unique index unique by appending the record number to the encoded key.
//
// It is a B-link tree (Lehman and Yao): every node but the rightmost of its level carries a
// fence (high key), and a descent that finds its key at or past a node's fence continues in the
// right sibling. So a node that a split linked from its left sibling is found before (or
// without) the separator in its parent.
//
// The root page number never changes (a root split moves the root's contents into two new
// children), so the catalog stores it once.
//
// Careful write: a split writes the new right page before the pages that link to it (the split
// node and the parent) and the split node before the parent, through BufferCache::AddPrecedence,
// so a crash never leaves a link to a page that is not on disk, and the one partial split it can
// leave (split node and new page written, parent not) reads correctly through the fences. The
// next writer that meets such a node posts the missing separator. Details in btree.cc.
//
// Thread safety: all methods may be called concurrently on one tree.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/cache/buffer_cache.h"
#include "engine/cache/page_space.h"

namespace ember::index {

// Longest key accepted (longer ones are InvalidArgument): a page must hold at least 4 entries.
uint32_t MaxKeySize(uint32_t page_size);

class BTree {
 public:
  // Allocates and initialises an empty tree (one leaf root) for `txn`; returns the root page.
  static absl::StatusOr<page::PageNo> Create(cache::BufferCache* cache, cache::PageSpace* space,
                                             uint64_t txn, uint32_t relation_id, uint16_t index_id);

  BTree(cache::BufferCache* cache, cache::PageSpace* space, page::PageNo root);
  ~BTree();

  // Inserts `key` -> `value`, the leaf marked for `txn` (pages a split changes are marked for
  // the engine, txn 0, so every commit writes them). AlreadyExists if the exact key is present.
  // With `alone`: set to true only when, as the entry went in, no other entry of the tree
  // began with the first `prefix` bytes of `key` (seen from its neighbours in the leaf and the
  // leaf's fence, under the leaf's latch); false when that would take a second look. A unique
  // index checks its key this way without a second descent in the common case.
  absl::Status Insert(std::string_view key, uint64_t value, uint64_t txn, size_t prefix = 0,
                      bool* alone = nullptr);
  // Removes the exact key. NotFound if absent, a key longer than MaxKeySize included (the
  // tree never took it). (Pages are not merged; empty leaves stay linked.)
  absl::Status Remove(std::string_view key, uint64_t txn);

  // A cursor over entries in key order. It holds no latch between calls: after each leaf it
  // re-seeks from the root past the last key it returned, so concurrent splits (and partial
  // splits left by a crash) never make it skip or repeat an entry.
  class Cursor {
   public:
    bool Valid() const { return valid_; }
    std::string_view key() const { return key_; }
    uint64_t value() const { return value_; }
    absl::Status Next();

   private:
    friend class BTree;
    const BTree* tree_ = nullptr;
    bool descending_ = false;
    bool valid_ = false;
    std::string key_;
    uint64_t value_ = 0;
    // Entries of the current leaf not yet returned, and where that leaf sat.
    std::vector<std::pair<std::string, uint64_t>> buffered_;
    size_t pos_ = 0;
  };
  // Entries an ascending seek copies from its leaf by default: most seeks are short ranges, so
  // copying the rest of the leaf would be wasted; a cursor that goes further re-seeks past the
  // batch and then copies whole leaves. A point lookup asks for fewer.
  static constexpr size_t kSeekBatch = 16;
  // Ascending: positioned at the first key >= `key`. Descending: at the last key <= `key`
  // (an empty key with descending means "from the very end"). `batch`: see kSeekBatch
  // (ascending only; at least 1).
  absl::StatusOr<Cursor> Seek(std::string_view key, bool descending = false,
                              size_t batch = kSeekBatch) const;

  // For Validate(): walks every level of the tree along its right-sibling chain, checking page
  // types, key order within and across pages, fences, that each parent's children appear on
  // the chain in order with the bounds the parent gives them, sibling links and leaf depth. A
  // page that only its left sibling links to (its parent lacks its separator: a crash between
  // writing a split node and its parent) is accepted when its fences put it where the descent
  // finds it. Appends a description of every problem to `errors` (naming the page), calls
  // `visit` for every leaf entry, and adds every page of the tree to `pages`. The status is an
  // error only if a page could not be read.
  absl::Status Check(std::vector<std::string>* errors,
                     const std::function<void(std::string_view key, uint64_t value)>& visit,
                     std::vector<page::PageNo>* pages) const;

  page::PageNo root() const { return root_; }

 private:
  struct Impl;
  cache::BufferCache* cache_;
  cache::PageSpace* space_;
  page::PageNo root_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember::index
