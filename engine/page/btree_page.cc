// Encoding and checked decoding of B-tree pages (layout in btree_page.h and docs/format.md).
#include "engine/page/btree_page.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/util/coding.h"

namespace ember::page {

// The layout is part of the file format: a change here is a format version bump.
static_assert(bt::kRelationId == kPageHeaderSize);
static_assert(bt::kIndexId == bt::kRelationId + 4 && bt::kLevel == bt::kIndexId + 2 &&
              bt::kFlags == bt::kLevel + 1 && bt::kLeftSibling == bt::kFlags + 1 &&
              bt::kRightSibling == bt::kLeftSibling + 4 && bt::kCount == bt::kRightSibling + 4 &&
              bt::kDataEnd == bt::kCount + 2 && bt::kLowPage == bt::kDataEnd + 2 &&
              bt::kEntries == bt::kLowPage + 4);
static_assert(bt::kEntryOverhead == 2 + 2 + 8);
static_assert(bt::kFenceOverhead == 2);
// data_end and the key lengths are u16.
static_assert(kMaxPageSize <= 0xFFFF);
// Four maximal entries and a maximal fence fit in every page size.
constexpr bool MaxEntriesFit(uint32_t ps) {
  return kBtreeHeaderSize + 4 * (bt::kEntryOverhead + BtreeMaxKeySize(ps)) + bt::kFenceOverhead +
             BtreeMaxKeySize(ps) <=
         ps;
}
static_assert(MaxEntriesFit(kMinPageSize) && MaxEntriesFit(8192) && MaxEntriesFit(16384) &&
              MaxEntriesFit(kMaxPageSize));
static_assert(BtreeMaxKeySize(kMinPageSize) == 801 && BtreeMaxKeySize(kMaxPageSize) == 6535);

namespace {

size_t CommonPrefix(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

absl::Status Corrupt(PageNo no, const std::string& what) {
  return absl::DataLossError(absl::StrCat("btree page ", no, ": ", what));
}

// Offset one past the last entry of `node` once encoded (the header included, the fence not).
size_t EntriesEnd(const BtreeNode& node) {
  size_t size = kBtreeHeaderSize;
  std::string_view prev;
  for (const BtreeEntry& e : node.entries) {
    size += BtreeEntrySize(prev, e.key);
    prev = e.key;
  }
  return size;
}

}  // namespace

size_t BtreeEntrySize(std::string_view prev, std::string_view key) {
  return bt::kEntryOverhead + key.size() - CommonPrefix(prev, key);
}

size_t BtreeEncodedSize(const BtreeNode& node) {
  return EntriesEnd(node) + (node.fence ? bt::kFenceOverhead + node.fence->size() : 0);
}

std::string_view BtreeFence(const uint8_t* page, uint32_t page_size, const BtreeHeader& h) {
  if (!h.has_fence()) return {};
  return std::string_view(
      reinterpret_cast<const char*>(page + page_size - bt::kFenceOverhead - h.fence_len),
      h.fence_len);
}

absl::Status ReadBtreeHeader(const uint8_t* page, uint32_t page_size, PageNo no, BtreeHeader* h) {
  if (GetType(page) != PageType::kBtree) {
    return Corrupt(no, absl::StrCat("page type is ", PageTypeName(GetType(page))));
  }
  h->relation_id = util::Get32(page + bt::kRelationId);
  h->index_id = util::Get16(page + bt::kIndexId);
  h->level = page[bt::kLevel];
  h->flags = page[bt::kFlags];
  h->left_sibling = util::Get32(page + bt::kLeftSibling);
  h->right_sibling = util::Get32(page + bt::kRightSibling);
  h->count = util::Get16(page + bt::kCount);
  h->data_end = util::Get16(page + bt::kDataEnd);
  h->low_page = util::Get32(page + bt::kLowPage);
  h->fence_len = 0;
  if ((h->flags & ~kBtreeHasFence) != 0) {
    return Corrupt(no, absl::StrCat("unknown flags 0x", absl::Hex(h->flags)));
  }
  size_t limit = page_size;  // where the entries must end
  if (h->has_fence()) {
    h->fence_len = util::Get16(page + page_size - bt::kFenceOverhead);
    if (h->fence_len == 0 || h->fence_len > BtreeMaxKeySize(page_size)) {
      return Corrupt(no, absl::StrCat("fence_len ", h->fence_len));
    }
    limit -= bt::kFenceOverhead + h->fence_len;
  }
  if (h->has_fence() != (h->right_sibling != kNoPage)) {
    return Corrupt(no, h->has_fence() ? "a fence but no right sibling"
                                      : absl::StrCat("right sibling ", h->right_sibling,
                                                     " but no fence"));
  }
  if (h->data_end < kBtreeHeaderSize || h->data_end > limit) {
    return Corrupt(no, absl::StrCat("data_end ", h->data_end, " outside the page"));
  }
  if (size_t{h->count} * bt::kEntryOverhead > h->data_end - kBtreeHeaderSize) {
    return Corrupt(no, absl::StrCat(h->count, " entries cannot fit before data_end ", h->data_end));
  }
  if (h->leaf() != (h->low_page == kNoPage)) {
    return Corrupt(no, absl::StrCat("low_page ", h->low_page, " on a level ", h->level, " page"));
  }
  return absl::OkStatus();
}

BtreeEntryReader::BtreeEntryReader(const uint8_t* page, uint32_t page_size, PageNo no)
    : page_(page),
      no_(no),
      max_key_(BtreeMaxKeySize(page_size)),
      internal_(page[bt::kLevel] != 0),
      end_(std::min<size_t>(util::Get16(page + bt::kDataEnd), page_size)),
      count_(util::Get16(page + bt::kCount)) {
  if (page[bt::kFlags] & kBtreeHasFence) {
    const size_t len = util::Get16(page + page_size - bt::kFenceOverhead);
    // ReadBtreeHeader checked the length; re-checked so that the view stays inside the page.
    if (len <= max_key_) {
      fence_ = std::string_view(
          reinterpret_cast<const char*>(page + page_size - bt::kFenceOverhead - len), len);
    }
  }
}

bool BtreeEntryReader::Fail(const std::string& what) {
  status_ = Corrupt(no_, absl::StrCat("entry ", index_, " at offset ", off_, ": ", what));
  return false;
}

bool BtreeEntryReader::Next() {
  if (!status_.ok()) return false;
  if (index_ == count_) {
    if (off_ != end_) return Fail(absl::StrCat("entries end before data_end ", end_));
    // Keys increase, so the last one decides.
    if (!fence_.empty() && index_ > 0 && !(std::string_view(key_) < fence_)) {
      status_ = Corrupt(no_, "last key not below the fence");
    }
    return false;
  }
  if (off_ + 4 > end_) return Fail("entry header past data_end");
  const size_t prefix = util::Get16(page_ + off_);
  const size_t suffix = util::Get16(page_ + off_ + 2);
  if (prefix > key_.size()) {
    return Fail(absl::StrCat("prefix_len ", prefix, " longer than the previous key"));
  }
  if (off_ + 4 + suffix + 8 > end_)
    return Fail(absl::StrCat("suffix_len ", suffix, " past data_end"));
  if (prefix + suffix > max_key_) return Fail(absl::StrCat("key of ", prefix + suffix, " bytes"));
  const std::string_view sfx(reinterpret_cast<const char*>(page_ + off_ + 4), suffix);
  // The new key shares `prefix` bytes with the previous one, so only the tails decide the order.
  if (index_ > 0 && !(sfx > std::string_view(key_).substr(prefix))) {
    return Fail("key not greater than the previous key");
  }
  key_.resize(prefix);
  key_.append(sfx);
  value_ = util::Get64(page_ + off_ + 4 + suffix);
  if (internal_ && (value_ == kNoPage || value_ > UINT32_MAX)) {
    return Fail(absl::StrCat("child page ", value_));
  }
  off_ += 4 + suffix + 8;
  ++index_;
  return true;
}

absl::Status DecodeBtreePage(const uint8_t* page, uint32_t page_size, PageNo no, BtreeNode* out) {
  if (absl::Status s = ReadBtreeHeader(page, page_size, no, out); !s.ok()) return s;
  out->entries.clear();
  out->entries.reserve(out->count);
  BtreeEntryReader r(page, page_size, no);
  while (r.Next()) out->entries.push_back({std::string(r.key()), r.value()});
  if (!r.status().ok()) return r.status();
  if (out->has_fence()) {
    out->fence.emplace(BtreeFence(page, page_size, *out));
  } else {
    out->fence.reset();
  }
  return absl::OkStatus();
}

bool EncodeBtreePage(const BtreeNode& node, uint8_t* page, uint32_t page_size) {
  const uint32_t max_key = BtreeMaxKeySize(page_size);
  if (node.entries.size() > 0xFFFF) return false;
  for (const BtreeEntry& e : node.entries) {
    if (e.key.size() > max_key) return false;
  }
  if (node.fence.has_value() != (node.right_sibling != kNoPage)) return false;
  if (node.fence) {
    if (node.fence->empty() || node.fence->size() > max_key) return false;
    if (!node.entries.empty() && !(node.entries.back().key < *node.fence)) return false;
  }
  const size_t end = EntriesEnd(node);
  if (BtreeEncodedSize(node) > page_size) return false;
  util::Put32(page + bt::kRelationId, node.relation_id);
  util::Put16(page + bt::kIndexId, node.index_id);
  page[bt::kLevel] = node.level;
  page[bt::kFlags] = static_cast<uint8_t>((node.flags & ~kBtreeHasFence) |
                                          (node.fence ? kBtreeHasFence : 0));
  util::Put32(page + bt::kLeftSibling, node.left_sibling);
  util::Put32(page + bt::kRightSibling, node.right_sibling);
  util::Put16(page + bt::kCount, static_cast<uint16_t>(node.entries.size()));
  util::Put16(page + bt::kDataEnd, static_cast<uint16_t>(end));
  util::Put32(page + bt::kLowPage, node.low_page);
  uint8_t* p = page + kBtreeHeaderSize;
  std::string_view prev;
  for (const BtreeEntry& e : node.entries) {
    const size_t prefix = CommonPrefix(prev, e.key);
    const size_t suffix = e.key.size() - prefix;
    util::Put16(p, static_cast<uint16_t>(prefix));
    util::Put16(p + 2, static_cast<uint16_t>(suffix));
    if (suffix > 0) std::memcpy(p + 4, e.key.data() + prefix, suffix);
    util::Put64(p + 4 + suffix, e.value);
    p += 4 + suffix + 8;
    prev = e.key;
  }
  size_t tail = page_size;  // start of the fence trailer
  if (node.fence) {
    tail -= bt::kFenceOverhead + node.fence->size();
    std::memcpy(page + tail, node.fence->data(), node.fence->size());
    util::Put16(page + page_size - bt::kFenceOverhead, static_cast<uint16_t>(node.fence->size()));
  }
  std::memset(p, 0, tail - end);
  return true;
}

}  // namespace ember::page
