// Encoding and checked decoding of B-tree pages (layout in btree_page.h and docs/format.md).
#include "engine/page/btree_page.h"

#include <algorithm>
#include <cstring>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "engine/util/coding.h"

namespace ember::page {

// The layout is part of the file format: a change here is a format version bump.
static_assert(bt::kRelationId == kPageHeaderSize);
static_assert(bt::kIndexId == bt::kRelationId + 4 && bt::kLevel == bt::kIndexId + 2 &&
              bt::kFlags == bt::kLevel + 1 && bt::kLeftSibling == bt::kFlags + 1 &&
              bt::kRightSibling == bt::kLeftSibling + 4 && bt::kCount == bt::kRightSibling + 4 &&
              bt::kDataEnd == bt::kCount + 2 && bt::kLowPage == bt::kDataEnd + 2 &&
              bt::kRestartCount == bt::kLowPage + 4);
static_assert(bt::kEntries == bt::kRestartCount + 2);
// Key lengths (and so prefix and suffix lengths) take at most two varint bytes.
static_assert(kMaxPageSize / 5 < (1u << 14));
static_assert(bt::kFenceOverhead == 2);
// data_end and the key lengths are u16.
static_assert(kMaxPageSize <= 0xFFFF);
// Four maximal entries and a maximal fence fit in every page size.
constexpr bool MaxEntriesFit(uint32_t ps) {
  return kBtreeHeaderSize + 4 * (bt::kEntryMaxOverhead + bt::kRestartSize + BtreeMaxKeySize(ps)) +
             bt::kFenceOverhead + BtreeMaxKeySize(ps) <=
         ps;
}
static_assert(MaxEntriesFit(kMinPageSize) && MaxEntriesFit(8192) && MaxEntriesFit(16384) &&
              MaxEntriesFit(kMaxPageSize));
static_assert(BtreeMaxKeySize(kMinPageSize) == 798 && BtreeMaxKeySize(kMaxPageSize) == 6532);

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

// The second length varint: the suffix length and the value's byte count, so that a search
// steps over an entry without decoding its value.
inline uint64_t SizeWord(size_t suffix, size_t value_bytes) {
  return uint64_t{suffix} << 3 | (value_bytes - 1);
}

// One entry as stored: offsets are page offsets. The value is only located; EntryValue decodes
// it, for the entries that need it.
struct RawEntry {
  size_t prefix = 0;
  size_t suffix = 0;
  size_t header = 0;  // bytes of the two length varints
  size_t sfx = 0;     // offset of the suffix bytes
  size_t val = 0;     // offset of the value's bytes
  size_t vbytes = 0;  // their number, 1..8
  size_t next = 0;    // offset one past the entry
};

// Parses the entry at `off`, not past `end`. False when it does not fit (or a varint is over
// long). Searches walk entries with this; both varints are nearly always one byte, which one
// test covers before the general decoder runs (it makes the walk measurably slower).
[[gnu::always_inline]] inline bool ParseEntry(const uint8_t* page, size_t off, size_t end,
                                              RawEntry* e) {
  const uint8_t* const lim = page + end;
  const uint8_t* p = page + off;
  uint64_t prefix, word;
  if (lim - p >= 2 && p[0] < 0x80 && p[1] < 0x80) {  // one test for the common shape
    prefix = p[0];
    word = p[1];
    p += 2;
  } else {
    p = util::DecodeVarint64(p, lim, &prefix);
    if (p == nullptr || (p = util::DecodeVarint64(p, lim, &word)) == nullptr) return false;
    if (prefix > 0xFFFF || word > (uint64_t{0xFFFF} << 3 | 7)) return false;
  }
  e->prefix = prefix;
  e->suffix = word >> 3;
  e->vbytes = (word & 7) + 1;
  e->header = static_cast<size_t>(p - (page + off));
  if (e->suffix + e->vbytes > static_cast<size_t>(lim - p)) return false;
  e->sfx = static_cast<size_t>(p - page);
  e->val = e->sfx + e->suffix;
  e->next = e->val + e->vbytes;
  return true;
}

// The value of an entry ParseEntry accepted.
inline uint64_t EntryValue(const uint8_t* page, const RawEntry& e) {
  uint64_t v = 0;
  for (size_t i = e.vbytes; i-- > 0;) v = v << 8 | page[e.val + i];
  return v;
}

// Writes an entry at `at`; returns the byte after it.
uint8_t* PutEntry(uint8_t* at, size_t prefix, std::string_view suffix, uint64_t value) {
  const size_t vb = util::SignificantBytes(value);  // little-endian, no high zero bytes
  at = util::EncodeVarint64(at, prefix);
  at = util::EncodeVarint64(at, SizeWord(suffix.size(), vb));
  if (!suffix.empty()) std::memcpy(at, suffix.data(), suffix.size());
  at += suffix.size();
  for (size_t i = 0; i < vb; ++i) at[i] = static_cast<uint8_t>(value >> (8 * i));
  return at + vb;
}

// Offset one past the last entry of `node` once encoded (the header included, the restart array
// and the fence not), and the number of restarts.
size_t EntriesEnd(const BtreeNode& node, size_t* restarts) {
  size_t size = kBtreeHeaderSize;
  std::string_view prev;
  for (size_t i = 0; i < node.entries.size(); ++i) {
    const std::string& key = node.entries[i].key;
    size += BtreeEntrySize(i % kBtreeRestartInterval == 0 ? std::string_view() : prev, key,
                           node.entries[i].value);
    prev = key;
  }
  *restarts = (node.entries.size() + kBtreeRestartInterval - 1) / kBtreeRestartInterval;
  return size;
}

// The whole encoded size of `node` given EntriesEnd's results.
size_t EncodedSizeOf(const BtreeNode& node, size_t entries_end, size_t restarts) {
  return entries_end + bt::kRestartSize * restarts +
         (node.fence ? bt::kFenceOverhead + node.fence->size() : 0);
}

uint16_t RestartAt(const uint8_t* restarts, size_t i) {
  return util::Get16(restarts + bt::kRestartSize * i);
}
void SetRestart(uint8_t* restarts, size_t i, size_t offset) {
  util::Put16(restarts + bt::kRestartSize * i, static_cast<uint16_t>(offset));
}

void PutCounts(uint8_t* page, const BtreeHeader& h) {
  util::Put16(page + bt::kCount, h.count);
  util::Put16(page + bt::kDataEnd, h.data_end);
  util::Put16(page + bt::kRestartCount, h.restart_count);
}

}  // namespace

size_t BtreeEntryBytes(size_t prefix, size_t suffix, uint64_t value) {
  const size_t vb = util::SignificantBytes(value);  // little-endian, no high zero bytes
  return util::VarintLength(prefix) + util::VarintLength(SizeWord(suffix, vb)) + suffix + vb;
}

size_t BtreeEntrySize(std::string_view prev, std::string_view key, uint64_t value) {
  const size_t prefix = CommonPrefix(prev, key);
  return BtreeEntryBytes(prefix, key.size() - prefix, value);
}

size_t BtreeEncodedSize(const BtreeNode& node) {
  size_t restarts;
  const size_t end = EntriesEnd(node, &restarts);
  return EncodedSizeOf(node, end, restarts);
}

std::string_view BtreeFence(const uint8_t* page, uint32_t page_size, const BtreeHeader& h) {
  if (!h.has_fence()) return {};
  return std::string_view(
      reinterpret_cast<const char*>(page + page_size - bt::kFenceOverhead - h.fence_len),
      h.fence_len);
}

std::optional<std::string_view> BtreeFirstKey(const uint8_t* page, const BtreeHeader& h) {
  RawEntry e;
  if (h.count == 0 || !ParseEntry(page, kBtreeHeaderSize, h.data_end, &e) || e.prefix != 0) {
    return std::nullopt;
  }
  return std::string_view(reinterpret_cast<const char*>(page + e.sfx), e.suffix);
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
  h->restart_count = util::Get16(page + bt::kRestartCount);
  h->fence_len = 0;
  if ((h->flags & ~kBtreeHasFence) != 0) {
    return Corrupt(no, absl::StrCat("unknown flags 0x", absl::Hex(h->flags)));
  }
  size_t limit = page_size;  // where the restart array must end
  if (h->has_fence()) {
    h->fence_len = util::Get16(page + page_size - bt::kFenceOverhead);
    if (h->fence_len == 0 || h->fence_len > BtreeMaxKeySize(page_size)) {
      return Corrupt(no, absl::StrCat("fence_len ", h->fence_len));
    }
    limit -= bt::kFenceOverhead + h->fence_len;
  }
  if (h->has_fence() != (h->right_sibling != kNoPage)) {
    return Corrupt(no, h->has_fence()
                           ? "a fence but no right sibling"
                           : absl::StrCat("right sibling ", h->right_sibling, " but no fence"));
  }
  if (h->restart_count > h->count || (h->count > 0) != (h->restart_count > 0)) {
    return Corrupt(
        no, absl::StrCat("restart_count ", h->restart_count, " with ", h->count, " entries"));
  }
  if (h->data_end < kBtreeHeaderSize ||
      h->data_end + bt::kRestartSize * size_t{h->restart_count} > limit) {
    return Corrupt(no, absl::StrCat("data_end ", h->data_end, " outside the page"));
  }
  if (size_t{h->count} * bt::kEntryMinSize > h->data_end - kBtreeHeaderSize) {
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
  size_t limit = page_size;
  if (page[bt::kFlags] & kBtreeHasFence) {
    const size_t len = util::Get16(page + page_size - bt::kFenceOverhead);
    // ReadBtreeHeader checked these; re-checked so that every view stays inside the page.
    if (len <= max_key_) {
      fence_ = std::string_view(
          reinterpret_cast<const char*>(page + page_size - bt::kFenceOverhead - len), len);
      limit -= bt::kFenceOverhead + len;
    }
  }
  restart_count_ = util::Get16(page + bt::kRestartCount);
  if (bt::kRestartSize * size_t{restart_count_} > limit - end_) {
    status_ = Corrupt(no_, absl::StrCat("restart_count ", restart_count_, " outside the page"));
    return;
  }
  restarts_ = page + limit - bt::kRestartSize * restart_count_;
}

bool BtreeEntryReader::Fail(const std::string& what) {
  status_ = Corrupt(no_, absl::StrCat("entry at offset ", off_, ": ", what));
  return false;
}

void BtreeEntryReader::StartAt(const BtreeSlot& slot, std::string_view key) {
  off_ = slot.offset;
  counting_ = false;
  next_restart_ = static_cast<uint16_t>(slot.restart + (slot.at_restart() ? 0 : 1));
  // The entry at the slot shares next_common bytes (at least its prefix_len) with `key`, so those
  // bytes stand in for the previous key as far as the entry's prefix reaches.
  key_.assign(key.substr(0, slot.offset < end_ ? slot.next_common : 0));
  check_order_ = false;
}

bool BtreeEntryReader::Next() {
  if (!status_.ok()) return false;
  if (off_ >= end_ || (counting_ && index_ == count_)) {
    if (off_ != end_) return Fail(absl::StrCat("entries end before data_end ", end_));
    if (counting_ && index_ != count_) {
      return Fail(absl::StrCat("data_end reached after ", index_, " of ", count_, " entries"));
    }
    if (next_restart_ != restart_count_) {
      status_ = Corrupt(no_, absl::StrCat("restart ", next_restart_, " is not at an entry"));
      return false;
    }
    // Keys increase, so the last one decides.
    if (!fence_.empty() && !key_.empty() && !(std::string_view(key_) < fence_)) {
      status_ = Corrupt(no_, "last key not below the fence");
    }
    return false;
  }
  RawEntry e;
  if (!ParseEntry(page_, off_, end_, &e)) {
    return Fail("entry (or its suffix_len or value) past data_end");
  }
  const size_t prefix = e.prefix;
  const size_t suffix = e.suffix;
  bool restart = false;
  if (next_restart_ < restart_count_) {
    const size_t at = RestartAt(restarts_, next_restart_);
    if (at < off_) return Fail(absl::StrCat("restart ", next_restart_, " is not at an entry"));
    restart = at == off_;
  }
  if (!restart && index_ == 0 && counting_) return Fail("the first entry is not a restart");
  if (restart && prefix != 0) return Fail(absl::StrCat("restart entry with prefix_len ", prefix));
  if (prefix > key_.size()) {
    return Fail(absl::StrCat("prefix_len ", prefix, " longer than the previous key"));
  }
  if (prefix + suffix > max_key_) return Fail(absl::StrCat("key of ", prefix + suffix, " bytes"));
  const std::string_view sfx(reinterpret_cast<const char*>(page_ + e.sfx), suffix);
  if (check_order_ && (index_ > 0 || !counting_)) {
    // The new key shares `prefix` bytes with the previous one, so only the tails decide the order.
    if (!(sfx > std::string_view(key_).substr(prefix))) {
      return Fail("key not greater than the previous key");
    }
    if (!restart && prefix < key_.size() && static_cast<char>(sfx[0]) == key_[prefix]) {
      return Fail(absl::StrCat("prefix_len ", prefix, " is not the longest common prefix"));
    }
  }
  check_order_ = true;
  key_.resize(prefix);
  key_.append(sfx);
  value_ = EntryValue(page_, e);
  if (internal_ && (value_ == kNoPage || value_ > UINT32_MAX)) {
    return Fail(absl::StrCat("child page ", value_));
  }
  if (restart) ++next_restart_;
  off_ = e.next;
  ++index_;
  return true;
}

// Binary search of the restart entries (which hold their key whole): the first one whose key
// is not below `key` (k, ksize), in *lo.
[[gnu::always_inline]] inline absl::Status SearchRestarts(const uint8_t* page, PageNo no,
                                                          const uint8_t* restarts, size_t nrestarts,
                                                          size_t end, const uint8_t* k,
                                                          size_t ksize, size_t* lo_out) {
  size_t lo = 0, hi = nrestarts;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    const size_t off = RestartAt(restarts, mid);
    if (off < kBtreeHeaderSize || off >= end) {
      return Corrupt(no, absl::StrCat("restart ", mid, " at offset ", off, " outside the entries"));
    }
    RawEntry re;
    if (page[off] != 0 || !ParseEntry(page, off, end, &re)) {
      return Corrupt(no, absl::StrCat("entry at offset ", off, ": restart entry does not fit"));
    }
    const size_t suffix = re.suffix;
    const uint8_t* sfx = page + re.sfx;
    const int c = std::memcmp(sfx, k, std::min<size_t>(suffix, ksize));
    const bool below = c < 0 || (c == 0 && suffix < ksize);
    if (below) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  *lo_out = lo;
  return absl::OkStatus();
}

absl::Status BtreeLowerBound(const uint8_t* page, uint32_t page_size, PageNo no,
                             const BtreeHeader& h, std::string_view key, BtreeSlot* slot) {
  *slot = BtreeSlot{};
  slot->offset = h.data_end;
  if (h.count == 0) return absl::OkStatus();
  const uint8_t* k = reinterpret_cast<const uint8_t*>(key.data());
  const size_t ksize = key.size();
  const size_t end = h.data_end;  // ReadBtreeHeader checked it and the restart array's place
  const size_t max_key = BtreeMaxKeySize(page_size);
  const uint8_t* restarts = page + h.restarts_at(page_size);
  const size_t nrestarts = h.restart_count;
  auto bad = [&](size_t off, const std::string& what) {
    return Corrupt(no, absl::StrCat("entry at offset ", off, ": ", what));
  };
  size_t lo = 0;
  if (absl::Status s = SearchRestarts(page, no, restarts, nrestarts, end, k, ksize, &lo); !s.ok()) {
    return s;
  }
  // Walk the group of the last restart below `key` (the first group when there is none).
  size_t group = lo > 0 ? lo - 1 : 0;
  size_t off = RestartAt(restarts, group);
  if (off < kBtreeHeaderSize) return bad(off, "restart before the entries");
  size_t next_restart = group + 1 < nrestarts ? RestartAt(restarts, group + 1) : SIZE_MAX;
  size_t walked = 0;
  size_t klen = 0;     // length of the previous entry's key
  size_t matched = 0;  // bytes the key shares with the previous entry's key (which is below it)
  size_t prev_off = 0;
  RawEntry prev;  // the entry before `off` (valid when prev_off != 0)
  while (off < end) {
    const size_t prev_matched = matched;
    if (off == next_restart) {
      // A restart entry is stored whole: compare it from its first byte.
      ++group;
      walked = 0;
      klen = 0;
      matched = 0;
      next_restart = group + 1 < nrestarts ? RestartAt(restarts, group + 1) : SIZE_MAX;
    } else if (off > next_restart) {
      return bad(off, "passes a restart");
    }
    RawEntry e;
    if (!ParseEntry(page, off, end, &e)) return bad(off, "past data_end");
    const size_t prefix = e.prefix;
    const size_t suffix = e.suffix;
    if (prefix > klen || prefix + suffix > max_key) {
      return bad(off, absl::StrCat("prefix_len ", prefix, ", suffix_len ", suffix, " do not fit"));
    }
    const uint8_t* sfx = page + e.sfx;
    // Prefix lengths inside a group are exact (the longest common prefix with the previous key),
    // which is what lets the first two cases decide without looking at the bytes: the previous
    // key is below `key` and first differs from it at byte `matched`.
    bool below;     // this entry's key < key
    size_t common;  // bytes this entry's key shares with key
    bool equal = false;
    if (prefix > matched) {
      // It agrees with the previous key past byte `matched`, so it is below `key` the same way.
      below = true;
      common = matched;
    } else if (prefix < matched) {
      // It first differs from the previous key (upwards) where that key still agrees with `key`.
      below = false;
      common = prefix;
    } else {
      const size_t n = std::min(suffix, ksize - matched);
      size_t c = 0;
      while (c < n && sfx[c] == k[matched + c]) ++c;
      common = matched + c;
      if (c < n) {
        below = sfx[c] < k[matched + c];
      } else {
        below = prefix + suffix < ksize;
        equal = prefix + suffix == ksize;
      }
    }
    if (!below) {
      slot->offset = static_cast<uint16_t>(off);
      slot->prev_offset = static_cast<uint16_t>(prev_off);
      slot->prev_common = static_cast<uint16_t>(prev_off ? prev_matched : 0);
      slot->next_common = static_cast<uint16_t>(common);
      slot->restart = static_cast<uint16_t>(group);
      slot->walked = static_cast<uint16_t>(walked);
      slot->equal = equal;
      slot->prev_value = prev_off ? EntryValue(page, prev) : 0;
      slot->value = EntryValue(page, e);
      return absl::OkStatus();
    }
    matched = common;
    klen = prefix + suffix;
    prev = e;
    prev_off = off;
    off = e.next;
    ++walked;
  }
  if (off != end || next_restart != SIZE_MAX) return bad(off, "entries do not end at data_end");
  slot->offset = static_cast<uint16_t>(off);
  slot->prev_offset = static_cast<uint16_t>(prev_off);
  slot->prev_common = static_cast<uint16_t>(matched);
  slot->restart = static_cast<uint16_t>(group);
  slot->walked = static_cast<uint16_t>(walked);
  slot->prev_value = prev_off ? EntryValue(page, prev) : 0;
  return absl::OkStatus();
}

bool BtreeInsertAt(uint8_t* page, uint32_t page_size, BtreeHeader* h, const BtreeSlot& slot,
                   std::string_view key, uint64_t value) {
  if (h->count == 0xFFFF) return false;
  uint8_t* restarts = page + h->restarts_at(page_size);
  const bool has_next = slot.offset < h->data_end;
  // The new entry is a restart when it takes a restart entry's place (that entry then follows
  // it, compressed), when the page is empty, or when its group has grown long.
  const bool takes_restart = h->count == 0 || slot.at_restart();
  const bool new_restart =
      h->count == 0 || (!takes_restart && slot.walked >= kBtreeRestartInterval);
  const size_t prefix = takes_restart || new_restart ? 0 : slot.prev_common;
  const size_t size = BtreeEntryBytes(prefix, key.size() - prefix, value);
  // The next entry now shares next_common bytes with its predecessor (the new key), at least
  // the prefix it had: the difference (`drop`) leaves the front of its suffix. Its lengths are
  // rewritten; its tail (the rest of the suffix, the value) moves as it is.
  RawEntry next;
  size_t drop = 0, old_head = 0, new_head = 0;
  if (has_next) {
    if (!ParseEntry(page, slot.offset, h->data_end, &next) || slot.next_common < next.prefix ||
        slot.next_common - next.prefix > next.suffix) {
      return false;
    }
    drop = slot.next_common - next.prefix;
    old_head = next.header + drop;
    new_head = util::VarintLength(slot.next_common) +
               util::VarintLength(SizeWord(next.suffix - drop, next.vbytes));
  }
  // Positive: the next entry loses `drop` suffix bytes, which the new entry's suffix holds, and
  // its lengths grow by at most one byte, only when drop > 0 (see docs/format.md).
  const size_t grow = size + new_head - old_head;
  const size_t array_grow = new_restart ? bt::kRestartSize : 0;
  if (grow + array_grow > h->free_space(page_size)) return false;
  uint8_t* at = page + slot.offset;
  if (has_next) {
    const size_t keep_from = slot.offset + old_head;
    std::memmove(at + size + new_head, page + keep_from, h->data_end - keep_from);
    uint8_t* nh = util::EncodeVarint64(at + size, slot.next_common);
    util::EncodeVarint64(nh, SizeWord(next.suffix - drop, next.vbytes));
  }
  PutEntry(at, prefix, key.substr(prefix), value);
  // Restarts after the insert point move with their entries.
  for (size_t i = 0; i < h->restart_count; ++i) {
    const size_t r = RestartAt(restarts, i);
    if (r > slot.offset) SetRestart(restarts, i, r + grow);
  }
  if (new_restart) {
    const size_t pos = h->count == 0 ? 0 : slot.restart + 1;
    std::memmove(restarts - bt::kRestartSize, restarts, bt::kRestartSize * pos);
    restarts -= bt::kRestartSize;
    SetRestart(restarts, pos, slot.offset);
    ++h->restart_count;
  }
  ++h->count;
  h->data_end = static_cast<uint16_t>(h->data_end + grow);
  PutCounts(page, *h);
  return true;
}

bool BtreeRemoveAt(uint8_t* page, uint32_t page_size, BtreeHeader* h, const BtreeSlot& slot,
                   std::string_view key) {
  uint8_t* restarts = page + h->restarts_at(page_size);
  uint8_t* at = page + slot.offset;
  RawEntry e;
  if (!ParseEntry(page, slot.offset, h->data_end, &e)) return false;
  const size_t next = e.next;
  const bool next_is_restart =
      slot.restart + 1u < h->restart_count && RestartAt(restarts, slot.restart + 1) == next;
  size_t shrink = next - slot.offset;
  bool drop_restart = false;
  const bool fix_next = next < h->data_end && !next_is_restart;
  RawEntry n;
  if (fix_next && (!ParseEntry(page, next, h->data_end, &n) || n.prefix > key.size())) {
    return false;
  }
  if (fix_next) {
    // The next entry shares min(prefix, next prefix) bytes with the entry before the removed
    // one (none when the removed one was a restart: the next takes its place as the restart);
    // the removed key (== key) supplies the bytes it shared beyond that.
    const size_t new_prefix = std::min(e.prefix, n.prefix);
    const size_t add = n.prefix - new_prefix;
    const size_t new_head =
        util::VarintLength(new_prefix) + util::VarintLength(SizeWord(n.suffix + add, n.vbytes));
    const size_t tail_from = next + n.header;  // the old suffix, the value, the rest
    const size_t tail_to = slot.offset + new_head + add;
    std::memmove(page + tail_to, page + tail_from, h->data_end - tail_from);
    uint8_t* p = util::EncodeVarint64(at, new_prefix);
    p = util::EncodeVarint64(p, SizeWord(n.suffix + add, n.vbytes));
    std::memcpy(p, key.data() + new_prefix, add);
    shrink = tail_from - tail_to;
  } else {
    std::memmove(at, page + next, h->data_end - next);
    drop_restart = slot.at_restart();  // its group is now empty
  }
  for (size_t i = 0; i < h->restart_count; ++i) {
    const size_t r = RestartAt(restarts, i);
    if (r > slot.offset) SetRestart(restarts, i, r - shrink);
  }
  if (drop_restart) {
    std::memmove(restarts + bt::kRestartSize, restarts, bt::kRestartSize * slot.restart);
    std::memset(restarts, 0, bt::kRestartSize);
    --h->restart_count;
  }
  --h->count;
  h->data_end = static_cast<uint16_t>(h->data_end - shrink);
  std::memset(page + h->data_end, 0, shrink);
  PutCounts(page, *h);
  return true;
}

absl::StatusOr<bool> BtreePlanTailSplit(const uint8_t* page, uint32_t page_size, PageNo no,
                                        const BtreeHeader& h, std::string_view key, uint64_t value,
                                        BtreeTailSplit* plan) {
  if (h.right_sibling != kNoPage || h.has_fence() || h.restart_count == 0) return false;
  const uint8_t* restarts = page + h.restarts_at(page_size);
  BtreeSlot start;  // at the last restart entry, which is stored whole
  start.offset = RestartAt(restarts, h.restart_count - 1u);
  start.restart = static_cast<uint16_t>(h.restart_count - 1u);
  if (start.offset < kBtreeHeaderSize || start.offset >= h.data_end) {
    return Corrupt(no, absl::StrCat("last restart at ", start.offset, " outside the entries"));
  }
  BtreeEntryReader r(page, page_size, no);
  r.StartAt(start, {});
  std::vector<BtreeEntry> group;
  std::vector<uint16_t> offsets;
  for (size_t off = start.offset; r.Next(); off = r.end_offset()) {
    offsets.push_back(static_cast<uint16_t>(off));
    group.push_back({std::string(r.key()), r.value()});
  }
  if (!r.status().ok()) return r.status();
  const size_t g = group.size();
  if (g == 0 || g > h.count) return Corrupt(no, "last restart group does not match count");
  if (!(key > std::string_view(group.back().key))) return false;
  const size_t restart_bytes = bt::kRestartSize * size_t{h.restart_count};
  // The fewest entries moved right that let the page keep the rest with its fence: the first
  // entry of the group stays (the key before it, for the separator, is not at hand).
  for (size_t j = g; j >= 1; --j) {
    const std::string_view first_right = j < g ? std::string_view(group[j].key) : key;
    const size_t sep_len = CommonPrefix(group[j - 1].key, first_right) + 1;
    const size_t cut = j < g ? offsets[j] : h.data_end;
    if (cut + restart_bytes + bt::kFenceOverhead + sep_len > page_size) continue;
    plan->separator.assign(first_right.substr(0, sep_len));  // before group[j] moves
    BtreeNode right;
    right.entries.assign(std::make_move_iterator(group.begin() + static_cast<ptrdiff_t>(j)),
                         std::make_move_iterator(group.end()));
    right.entries.push_back({std::string(key), value});
    if (BtreeEncodedSize(right) > page_size) return false;
    plan->cut = static_cast<uint16_t>(cut);
    plan->keep_count = static_cast<uint16_t>(h.count - (g - j));
    plan->right = std::move(right.entries);
    return true;
  }
  return false;
}

void BtreeApplyTailSplit(uint8_t* page, uint32_t page_size, BtreeHeader* h,
                         const BtreeTailSplit& plan, PageNo right) {
  // The cut is past the last restart, so every restart stays; the array moves down to make
  // room for the fence (over bytes of entries that moved right or free space).
  const size_t restart_bytes = bt::kRestartSize * size_t{h->restart_count};
  const size_t fence = plan.separator.size();
  uint8_t* const old_restarts = page + h->restarts_at(page_size);
  uint8_t* const new_restarts = page + page_size - bt::kFenceOverhead - fence - restart_bytes;
  std::memmove(new_restarts, old_restarts, restart_bytes);
  // NOLINTNEXTLINE(bugprone-not-null-terminated-result): key bytes, not a C string
  std::memcpy(page + page_size - bt::kFenceOverhead - fence, plan.separator.data(), fence);
  util::Put16(page + page_size - bt::kFenceOverhead, static_cast<uint16_t>(fence));
  std::memset(page + plan.cut, 0, static_cast<size_t>(new_restarts - (page + plan.cut)));
  h->count = plan.keep_count;
  h->data_end = plan.cut;
  h->fence_len = static_cast<uint16_t>(fence);
  h->flags = static_cast<uint8_t>(h->flags | kBtreeHasFence);
  h->right_sibling = right;
  page[bt::kFlags] = h->flags;
  util::Put32(page + bt::kRightSibling, right);
  PutCounts(page, *h);
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
  size_t nrestarts;
  const size_t end = EntriesEnd(node, &nrestarts);
  if (EncodedSizeOf(node, end, nrestarts) > page_size) return false;
  util::Put32(page + bt::kRelationId, node.relation_id);
  util::Put16(page + bt::kIndexId, node.index_id);
  page[bt::kLevel] = node.level;
  page[bt::kFlags] =
      static_cast<uint8_t>((node.flags & ~kBtreeHasFence) | (node.fence ? kBtreeHasFence : 0));
  util::Put32(page + bt::kLeftSibling, node.left_sibling);
  util::Put32(page + bt::kRightSibling, node.right_sibling);
  util::Put16(page + bt::kCount, static_cast<uint16_t>(node.entries.size()));
  util::Put16(page + bt::kDataEnd, static_cast<uint16_t>(end));
  util::Put32(page + bt::kLowPage, node.low_page);
  util::Put16(page + bt::kRestartCount, static_cast<uint16_t>(nrestarts));
  size_t tail = page_size;  // start of the fence trailer
  if (node.fence) {
    tail -= bt::kFenceOverhead + node.fence->size();
    // NOLINTNEXTLINE(bugprone-not-null-terminated-result): key bytes, not a C string
    std::memcpy(page + tail, node.fence->data(), node.fence->size());
    util::Put16(page + page_size - bt::kFenceOverhead, static_cast<uint16_t>(node.fence->size()));
  }
  uint8_t* restarts = page + tail - bt::kRestartSize * nrestarts;
  uint8_t* p = page + kBtreeHeaderSize;
  std::string_view prev;
  for (size_t i = 0; i < node.entries.size(); ++i) {
    const BtreeEntry& e = node.entries[i];
    const bool restart = i % kBtreeRestartInterval == 0;
    if (restart) SetRestart(restarts, i / kBtreeRestartInterval, p - page);
    const size_t prefix = restart ? 0 : CommonPrefix(prev, e.key);
    p = PutEntry(p, prefix, std::string_view(e.key).substr(prefix), e.value);
    prev = e.key;
  }
  std::memset(p, 0, restarts - p);
  return true;
}

BtreePageBuilder::BtreePageBuilder(uint32_t page_size) : page_size_(page_size), buf_(page_size) {}

void BtreePageBuilder::Reset(uint32_t relation_id, uint16_t index_id, uint8_t level) {
  relation_id_ = relation_id;
  index_id_ = index_id;
  level_ = level;
  end_ = kBtreeHeaderSize;
  restarts_.clear();
  count_ = 0;
  last_.clear();
}

size_t BtreePageBuilder::PrefixFor(std::string_view key) const {
  return count_ % kBtreeRestartInterval == 0 ? 0 : CommonPrefix(last_, key);
}

size_t BtreePageBuilder::Growth(std::string_view key, uint64_t value, size_t prefix) const {
  const bool restart = count_ % kBtreeRestartInterval == 0;
  return BtreeEntryBytes(prefix, key.size() - prefix, value) + (restart ? bt::kRestartSize : 0);
}

size_t BtreePageBuilder::SizeWith(std::string_view key, uint64_t value, size_t fence_bytes) const {
  return used() + Growth(key, value, PrefixFor(key)) +
         (fence_bytes > 0 ? bt::kFenceOverhead + fence_bytes : 0);
}

void BtreePageBuilder::Add(std::string_view key, uint64_t value, size_t prefix) {
  const bool restart = count_ % kBtreeRestartInterval == 0;
  if (restart) restarts_.push_back(static_cast<uint16_t>(end_));
  uint8_t* p = PutEntry(buf_.data() + end_, prefix, key.substr(prefix), value);
  end_ = static_cast<size_t>(p - buf_.data());
  ++count_;
  last_.assign(key.data(), key.size());
}

bool BtreePageBuilder::Finish(uint8_t* page, PageNo left, PageNo right, PageNo low_page,
                              std::string_view fence) const {
  if (fence.empty() != (right == kNoPage) || fence.size() > BtreeMaxKeySize(page_size_)) {
    return false;
  }
  if (!fence.empty() && count_ > 0 && !(std::string_view(last_) < fence)) return false;
  const size_t tail = page_size_ - (fence.empty() ? 0 : bt::kFenceOverhead + fence.size());
  if (end_ + bt::kRestartSize * restarts_.size() > tail) return false;
  util::Put32(page + bt::kRelationId, relation_id_);
  util::Put16(page + bt::kIndexId, index_id_);
  page[bt::kLevel] = level_;
  page[bt::kFlags] = fence.empty() ? 0 : kBtreeHasFence;
  util::Put32(page + bt::kLeftSibling, left);
  util::Put32(page + bt::kRightSibling, right);
  util::Put16(page + bt::kCount, static_cast<uint16_t>(count_));
  util::Put16(page + bt::kDataEnd, static_cast<uint16_t>(end_));
  util::Put32(page + bt::kLowPage, low_page);
  util::Put16(page + bt::kRestartCount, static_cast<uint16_t>(restarts_.size()));
  std::memcpy(page + kBtreeHeaderSize, buf_.data() + kBtreeHeaderSize, end_ - kBtreeHeaderSize);
  uint8_t* restarts = page + tail - bt::kRestartSize * restarts_.size();
  std::memset(page + end_, 0, static_cast<size_t>(restarts - (page + end_)));
  for (size_t i = 0; i < restarts_.size(); ++i) SetRestart(restarts, i, restarts_[i]);
  if (!fence.empty()) {
    std::memcpy(page + tail, fence.data(), fence.size());
    util::Put16(page + page_size_ - bt::kFenceOverhead, static_cast<uint16_t>(fence.size()));
  }
  return true;
}

}  // namespace ember::page
