// Tests for the B-tree page format (engine/page/btree_page.h): byte layout, prefix compression,
// the fence trailer, fit checks, and that corrupt bytes decode to DataLoss rather than reading
// outside the page.
#include "engine/page/btree_page.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "engine/util/coding.h"

namespace ember::page {
namespace {

bool Contains(const absl::Status& s, const std::string& needle) {
  return std::string(s.message()).find(needle) != std::string::npos;
}

BtreeNode SampleLeaf() {
  BtreeNode n;
  n.relation_id = 0x01020304;
  n.index_id = 0x0506;
  n.left_sibling = 77;
  n.right_sibling = 88;
  n.entries = {
      {"", 1}, {"apple", 2}, {"applesauce", 3}, {"apricot", 0xFFFFFFFFFFFFFFFFull}, {"b", 5}};
  n.fence = "bc";  // it has a right sibling, so it has a fence
  return n;
}

std::vector<uint8_t> Encoded(const BtreeNode& n, uint32_t ps, PageNo no = 9) {
  std::vector<uint8_t> page(ps);
  InitPage(page.data(), ps, PageType::kBtree, no);
  REQUIRE(EncodeBtreePage(n, page.data(), ps));
  return page;
}

void RequireSame(const BtreeNode& a, const BtreeNode& b) {
  CHECK(a.relation_id == b.relation_id);
  CHECK(a.index_id == b.index_id);
  CHECK(a.level == b.level);
  CHECK(a.left_sibling == b.left_sibling);
  CHECK(a.right_sibling == b.right_sibling);
  CHECK(a.low_page == b.low_page);
  CHECK(a.fence == b.fence);
  REQUIRE(a.entries.size() == b.entries.size());
  for (size_t i = 0; i < a.entries.size(); ++i) {
    CHECK(a.entries[i].key == b.entries[i].key);
    CHECK(a.entries[i].value == b.entries[i].value);
  }
}

// Sorts the entries, drops duplicate keys and then the last entries until the node fits `ps`.
void SortAndFit(BtreeNode* n, uint32_t ps) {
  std::sort(n->entries.begin(), n->entries.end(),
            [](const BtreeEntry& a, const BtreeEntry& b) { return a.key < b.key; });
  n->entries.erase(
      std::unique(n->entries.begin(), n->entries.end(),
                  [](const BtreeEntry& a, const BtreeEntry& b) { return a.key == b.key; }),
      n->entries.end());
  while (BtreeEncodedSize(*n) > ps) n->entries.pop_back();
}

TEST_CASE("btree page: byte layout and prefix compression", "[btree][page]") {
  const uint32_t ps = 4096;
  const BtreeNode n = SampleLeaf();
  auto page = Encoded(n, ps);
  const uint8_t* p = page.data();
  CHECK(GetType(p) == PageType::kBtree);
  CHECK(util::Get32(p + 16) == 0x01020304u);
  CHECK(util::Get16(p + 20) == 0x0506u);
  CHECK(p[22] == 0);
  CHECK(p[23] == kBtreeHasFence);
  CHECK(util::Get32(p + 24) == 77u);
  CHECK(util::Get32(p + 28) == 88u);
  CHECK(util::Get16(p + 32) == 5u);
  CHECK(util::Get32(p + 36) == 0u);
  CHECK(util::Get16(p + 40) == 1u);  // one restart: the first entry
  // "" then "apple" (prefix 0), "applesauce" (prefix 5, "sauce"), "apricot" (prefix 2), "b":
  // each {varint prefix_len, varint suffix_len << 3 | (value bytes - 1), suffix, value bytes}.
  size_t off = 42;
  auto bytes = [&](size_t n) { return std::vector<uint8_t>(p + off, p + off + n); };
  CHECK(bytes(3) == std::vector<uint8_t>{0, 0, 1});
  off += 3;
  CHECK(bytes(2) == std::vector<uint8_t>{0, 5 << 3});
  CHECK(std::string(reinterpret_cast<const char*>(p + off + 2), 5) == "apple");
  CHECK(p[off + 7] == 2);
  off += 8;
  CHECK(bytes(2) == std::vector<uint8_t>{5, 5 << 3});
  CHECK(std::string(reinterpret_cast<const char*>(p + off + 2), 5) == "sauce");
  CHECK(p[off + 7] == 3);
  off += 8;
  CHECK(bytes(2) == std::vector<uint8_t>{2, 5 << 3 | 7});  // an 8-byte value
  CHECK(std::string(reinterpret_cast<const char*>(p + off + 2), 5) == "ricot");
  for (size_t i = 0; i < 8; ++i) CHECK(p[off + 7 + i] == 0xFF);
  off += 15;
  CHECK(bytes(4) == std::vector<uint8_t>{0, 1 << 3, 'b', 5});
  off += 4;
  CHECK(util::Get16(p + 34) == off);
  // The fence "bc" ends the page: its bytes, then its u16 length in the last two bytes; the
  // restart array (offset 42) comes before it.
  CHECK(std::string(reinterpret_cast<const char*>(p + ps - 4), 2) == "bc");
  CHECK(util::Get16(p + ps - 2) == 2);
  CHECK(util::Get16(p + ps - 6) == 42);
  CHECK(BtreeEncodedSize(n) == off + 4 + 2);
  for (size_t i = off; i < ps - 6; ++i) REQUIRE(p[i] == 0);

  BtreeNode d;
  REQUIRE(DecodeBtreePage(p, ps, 9, &d).ok());
  RequireSame(n, d);
  CHECK(d.count == 5);
  CHECK(d.data_end == off);
  CHECK(d.has_fence());
  CHECK(d.fence_len == 2);
  CHECK(BtreeFence(p, ps, d) == "bc");
  CHECK(d.restart_count == 1);
  CHECK(d.free_space(ps) == ps - off - 6);

  // Without a right sibling there is no fence, and the page is zero up to its end.
  BtreeNode last = n;
  last.right_sibling = kNoPage;
  last.fence.reset();
  auto q = Encoded(last, ps);
  CHECK(q[23] == 0);
  for (size_t i = off; i < ps - 2; ++i) REQUIRE(q[i] == 0);
  CHECK(util::Get16(q.data() + ps - 2) == 42);
  REQUIRE(DecodeBtreePage(q.data(), ps, 9, &d).ok());
  RequireSame(last, d);
  CHECK(BtreeFence(q.data(), ps, d).empty());
  CHECK(d.free_space(ps) == ps - off - 2);
}

TEST_CASE("btree page: encode refuses a fence that breaks the node's invariants", "[btree][page]") {
  const uint32_t ps = 4096;
  std::vector<uint8_t> page(ps);
  InitPage(page.data(), ps, PageType::kBtree, 9);
  BtreeNode n = SampleLeaf();
  SECTION("fence without a right sibling") {
    n.right_sibling = kNoPage;
    CHECK_FALSE(EncodeBtreePage(n, page.data(), ps));
  }
  SECTION("right sibling without a fence") {
    n.fence.reset();
    CHECK_FALSE(EncodeBtreePage(n, page.data(), ps));
  }
  SECTION("fence not above the last key") {
    n.fence = "b";
    CHECK_FALSE(EncodeBtreePage(n, page.data(), ps));
  }
  SECTION("empty fence") {
    n.fence = "";
    n.entries.clear();
    CHECK_FALSE(EncodeBtreePage(n, page.data(), ps));
  }
  SECTION("fence longer than a key may be") {
    n.fence = std::string(BtreeMaxKeySize(ps) + 1, 'z');
    CHECK_FALSE(EncodeBtreePage(n, page.data(), ps));
  }
  SECTION("an empty leaf may have a fence") {
    n.entries.clear();
    REQUIRE(EncodeBtreePage(n, page.data(), ps));
    BtreeNode d;
    REQUIRE(DecodeBtreePage(page.data(), ps, 9, &d).ok());
    CHECK(d.fence == n.fence);
  }
}

TEST_CASE("btree page: internal node round trip and entry reader", "[btree][page]") {
  const uint32_t ps = 8192;
  BtreeNode n;
  n.level = 3;
  n.low_page = 1234;
  for (int i = 0; i < 100; ++i) n.entries.push_back({"sep" + std::to_string(1000 + i), 5000u + i});
  auto page = Encoded(n, ps);
  BtreeNode d;
  REQUIRE(DecodeBtreePage(page.data(), ps, 9, &d).ok());
  RequireSame(n, d);
  BtreeHeader h;
  REQUIRE(ReadBtreeHeader(page.data(), ps, 9, &h).ok());
  CHECK(h.level == 3);
  CHECK(!h.leaf());
  BtreeEntryReader r(page.data(), ps, 9);
  size_t i = 0;
  while (r.Next()) {
    CHECK(r.index() == i);
    CHECK(r.key() == n.entries[i].key);
    CHECK(r.value() == n.entries[i].value);
    ++i;
  }
  CHECK(r.status().ok());
  CHECK(i == n.entries.size());
}

TEST_CASE("btree page: encode refuses what does not fit and leaves the page alone",
          "[btree][page]") {
  const uint32_t ps = 4096;
  const uint32_t max = BtreeMaxKeySize(ps);
  CHECK(max == (4096 - 42 - 2 - 4 * (13 + 2)) / 5);
  // Four maximal keys with nothing in common and a maximal fence always fit.
  BtreeNode n;
  for (char c : {'a', 'b', 'c', 'd'}) n.entries.push_back({std::string(max, c), 1});
  n.right_sibling = 5;
  n.fence = std::string(max, 'z');
  CHECK(BtreeEncodedSize(n) <= ps);
  auto page = Encoded(n, ps);
  const std::vector<uint8_t> before = page;
  // A fifth does not.
  n.entries.push_back({std::string(max, 'e'), 1});
  CHECK(BtreeEncodedSize(n) > ps);
  CHECK_FALSE(EncodeBtreePage(n, page.data(), ps));
  CHECK(page == before);
  // Nor does a key over the maximum, even alone.
  BtreeNode big;
  big.entries.push_back({std::string(max + 1, 'x'), 1});
  CHECK_FALSE(EncodeBtreePage(big, page.data(), ps));
  CHECK(page == before);
  for (uint32_t s : {4096u, 8192u, 16384u, 32768u}) {
    CHECK(kBtreeHeaderSize + 4 * (bt::kEntryMaxOverhead + bt::kRestartSize + BtreeMaxKeySize(s)) +
              bt::kFenceOverhead + BtreeMaxKeySize(s) <=
          s);
  }
}

TEST_CASE("btree page: corrupt fields decode to DataLoss naming the page", "[btree][page]") {
  const uint32_t ps = 4096;
  const auto good = Encoded(SampleLeaf(), ps, 42);
  const size_t first = 42, second = 42 + 3;  // "" then "apple"
  struct Case {
    const char* name;
    std::function<void(uint8_t*)> corrupt;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"type", [](uint8_t* p) { p[0] = static_cast<uint8_t>(PageType::kData); }, "page type"},
      {"data_end past page", [](uint8_t* p) { util::Put16(p + 34, 5000); }, "data_end"},
      {"data_end in header", [](uint8_t* p) { util::Put16(p + 34, 20); }, "data_end"},
      {"count too big", [](uint8_t* p) { util::Put16(p + 32, 400); }, "entries"},
      {"count too small", [](uint8_t* p) { util::Put16(p + 32, 4); }, "before data_end"},
      {"leaf low_page", [](uint8_t* p) { util::Put32(p + 36, 5); }, "low_page"},
      {"prefix too long", [=](uint8_t* p) { p[second] = 3; }, "prefix_len"},
      {"suffix too long",
       [=](uint8_t* p) {
         p[second + 1] = 0xFF;  // a two-byte size word: a 2047-byte suffix
         p[second + 2] = 0x7F;
       },
       "suffix_len"},
      {"over-long varint", [=](uint8_t* p) { std::memset(p + second, 0xFF, 11); }, "past data_end"},
      {"keys out of order", [=](uint8_t* p) { p[second + 2] = 'z'; }, "not greater"},
      {"duplicate key",
       [=](uint8_t* p) {
         REQUIRE(p[first + 1] == 0);
         p[second + 1] = 0;
       },
       "not greater"},
      {"unknown flag", [](uint8_t* p) { p[23] |= 0x80; }, "flags"},
      {"fence flag without a right sibling", [](uint8_t* p) { util::Put32(p + 28, 0); },
       "no right sibling"},
      {"right sibling without a fence", [](uint8_t* p) { p[23] = 0; }, "no fence"},
      {"fence_len 0", [=](uint8_t* p) { util::Put16(p + ps - 2, 0); }, "fence_len"},
      {"fence_len too long", [=](uint8_t* p) { util::Put16(p + ps - 2, 3000); }, "fence_len"},
      // A longer fence_len reads zeros before "bc": a fence below the last key.
      // (The restart array moves with it, so that is what fails first.)
      {"fence_len longer", [=](uint8_t* p) { util::Put16(p + ps - 2, 798); }, "restart"},
      {"fence reaching data_end",
       [=](uint8_t* p) {
         util::Put16(p + ps - 2, 798);
         util::Put16(p + 34, ps - 300);
       },
       "data_end"},
      {"no restarts", [](uint8_t* p) { util::Put16(p + 40, 0); }, "restart_count"},
      {"more restarts than entries", [](uint8_t* p) { util::Put16(p + 40, 6); }, "restart_count"},
      {"restart not at an entry", [=](uint8_t* p) { util::Put16(p + ps - 6, 43); }, "restart"},
      {"first entry not a restart", [=](uint8_t* p) { util::Put16(p + ps - 6, second); },
       "not a restart"},
      {"fence not above the last key", [=](uint8_t* p) { p[ps - 4] = 'a'; }, "below the fence"},
  };
  for (const Case& c : cases) {
    SECTION(c.name) {
      auto page = good;
      c.corrupt(page.data());
      BtreeNode d;
      absl::Status s = DecodeBtreePage(page.data(), ps, 42, &d);
      INFO(s.ToString());
      CHECK(absl::IsDataLoss(s));
      CHECK(Contains(s, "btree page 42"));
      CHECK(Contains(s, c.message));
    }
  }
  SECTION("internal page without low_page or with child 0") {
    BtreeNode n;
    n.level = 1;
    n.low_page = 3;
    n.entries = {{"m", 4}};
    auto page = Encoded(n, ps, 42);
    BtreeNode d;
    REQUIRE(DecodeBtreePage(page.data(), ps, 42, &d).ok());
    util::Put32(page.data() + 36, 0);
    CHECK(absl::IsDataLoss(DecodeBtreePage(page.data(), ps, 42, &d)));
    util::Put32(page.data() + 36, 3);
    REQUIRE(page[42 + 3] == 4);  // {0, 1 << 3, 'm', 4}
    page[42 + 3] = 0;
    CHECK(absl::IsDataLoss(DecodeBtreePage(page.data(), ps, 42, &d)));
    n.entries[0].value = uint64_t{1} << 40;  // not a page number
    page = Encoded(n, ps, 42);
    CHECK(absl::IsDataLoss(DecodeBtreePage(page.data(), ps, 42, &d)));
  }
}

TEST_CASE("btree page: a prefix shorter than the common prefix is corruption", "[btree][page]") {
  // Searches rely on exact prefix lengths inside a restart group.
  const uint32_t ps = 4096;
  BtreeNode n;
  n.entries = {{"ab", 1}, {"zbc", 2}};
  auto page = Encoded(n, ps, 42);
  const size_t second = 42 + 5;  // after {0, 2 << 3, 'a', 'b', 1}
  REQUIRE(page[second] == 0);
  page[second + 2] = 'a';  // the key is now "abc", sharing "ab" with the first
  BtreeNode d;
  const absl::Status s = DecodeBtreePage(page.data(), ps, 42, &d);
  CHECK(absl::IsDataLoss(s));
  CHECK(Contains(s, "longest common prefix"));
}

TEST_CASE("btree page: random damage never reads outside the page", "[btree][page]") {
  // Run under ASan to make this meaningful: every decode of damaged bytes must stay in bounds.
  const uint32_t ps = 4096;
  std::mt19937_64 rng(7);
  BtreeNode n;
  n.level = 0;
  std::string k = "k";
  for (int i = 0; i < 150; ++i) {
    k += static_cast<char>('a' + rng() % 26);
    if (k.size() > 12) k.resize(1 + rng() % 11);
    n.entries.push_back({k + std::to_string(i), rng()});
  }
  SortAndFit(&n, ps);
  const auto good = Encoded(n, ps);
  const size_t data_end = BtreeEncodedSize(n);
  int errors = 0;
  for (int round = 0; round < 3000; ++round) {
    auto page = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      const size_t at = 16 + rng() % (round % 2 ? data_end - 16 : ps - 16);
      page[at] = static_cast<uint8_t>(rng());
    }
    BtreeNode d;
    absl::Status s = DecodeBtreePage(page.data(), ps, 1, &d);
    if (!s.ok()) {
      ++errors;
      CHECK(absl::IsDataLoss(s));
      continue;
    }
    // Whatever decoded is a well-formed node: it re-encodes within the page.
    std::vector<uint8_t> again(ps);
    InitPage(again.data(), ps, PageType::kBtree, 1);
    CHECK(EncodeBtreePage(d, again.data(), ps));
  }
  CHECK(errors > 0);
}

size_t Common(const std::string& a, const std::string& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

// Keys from a small alphabet with varied lengths, so that prefixes are shared at every depth and
// one key is often a prefix of another.
std::string RandomKey(std::mt19937_64& rng) {
  std::string k(rng() % 7, ' ');
  for (char& c : k) c = static_cast<char>('a' + rng() % 3);
  if (rng() % 8 == 0) k += std::string(1, '\0');
  return k;
}

// The page holds exactly the model's entries, decodes cleanly (restart array, exact prefix
// lengths, order) and has zeros between the entries and the restart array.
void CheckPage(const std::vector<uint8_t>& page, uint32_t ps, const BtreeNode& model) {
  BtreeNode d;
  const absl::Status s = DecodeBtreePage(page.data(), ps, 9, &d);
  INFO(s.ToString());
  REQUIRE(s.ok());
  REQUIRE(d.entries.size() == model.entries.size());
  for (size_t i = 0; i < d.entries.size(); ++i) {
    REQUIRE(d.entries[i].key == model.entries[i].key);
    REQUIRE(d.entries[i].value == model.entries[i].value);
  }
  REQUIRE(std::all_of(page.begin() + d.data_end, page.begin() + d.restarts_at(ps),
                      [](uint8_t b) { return b == 0; }));
}

TEST_CASE("btree page: lower bound, in-place insert and remove match the decoded model",
          "[exhaustive][btree][page]") {
  // The lower bound must agree with a binary search over the decoded keys, and every in-place
  // change must leave a page that decodes to the model.
  for (uint32_t ps : {kMinPageSize, 8192u}) {
    std::mt19937_64 rng(ps);
    BtreeNode model;
    model.relation_id = 3;
    model.index_id = 1;
    model.right_sibling = 5;
    model.fence = "d";  // every key from RandomKey is below it
    std::vector<uint8_t> page = Encoded(model, ps);
    int inserts = 0, removes = 0, full = 0;
    for (int op = 0; op < 20000; ++op) {
      // Long keys now and then, so that the page fills up and inserts get refused.
      std::string key = RandomKey(rng);
      if (rng() % 4 == 0) key += std::string(rng() % 40, 'b');
      BtreeHeader h;
      REQUIRE(ReadBtreeHeader(page.data(), ps, 9, &h).ok());
      BtreeSlot slot;
      REQUIRE(BtreeLowerBound(page.data(), ps, 9, h, key, &slot).ok());
      const auto it =
          std::lower_bound(model.entries.begin(), model.entries.end(), key,
                           [](const BtreeEntry& e, const std::string& k) { return e.key < k; });
      const size_t pos = static_cast<size_t>(it - model.entries.begin());
      REQUIRE(slot.has_prev() == (pos > 0));
      REQUIRE(slot.equal == (it != model.entries.end() && it->key == key));
      REQUIRE((slot.offset == h.data_end) == (it == model.entries.end()));
      if (pos > 0) {
        REQUIRE(slot.prev_common == Common(model.entries[pos - 1].key, key));
        REQUIRE(slot.prev_value == model.entries[pos - 1].value);
      }
      if (it != model.entries.end()) {
        REQUIRE(slot.next_common == Common(it->key, key));
        REQUIRE(slot.value == it->value);
      }
      // The reader started at the slot walks the model's keys from there.
      BtreeEntryReader r(page.data(), ps, 9);
      r.StartAt(slot, key);
      for (size_t i = pos; i < model.entries.size(); ++i) {
        REQUIRE(r.Next());
        REQUIRE(r.key() == model.entries[i].key);
      }
      REQUIRE_FALSE(r.Next());
      REQUIRE(r.status().ok());

      const bool remove = slot.equal && (rng() % 3 != 0 || full > inserts / 4);
      if (remove) {
        REQUIRE(BtreeRemoveAt(page.data(), ps, &h, slot, key));
        model.entries.erase(it);
        ++removes;
      } else if (!slot.equal) {
        const uint64_t value = rng();
        const std::vector<uint8_t> before = page;
        const size_t free = h.free_space(ps);
        if (BtreeInsertAt(page.data(), ps, &h, slot, key, value)) {
          model.entries.insert(model.entries.begin() + static_cast<ptrdiff_t>(pos),
                               BtreeEntry{key, value});
          ++inserts;
        } else {
          REQUIRE(free < BtreeInsertRoom(key.size()));
          REQUIRE(page == before);
          ++full;
        }
      }
      CheckPage(page, ps, model);
      BtreeHeader after;
      REQUIRE(ReadBtreeHeader(page.data(), ps, 9, &after).ok());
      REQUIRE(after.count == h.count);
      REQUIRE(after.data_end == h.data_end);
      REQUIRE(after.restart_count == h.restart_count);
    }
    CHECK(inserts > 100);
    CHECK(removes > 100);
    CHECK(full > 10);
  }
}

TEST_CASE("btree page: ascending inserts start a restart group every interval", "[btree][page]") {
  const uint32_t ps = 8192;
  BtreeNode model;
  std::vector<uint8_t> page = Encoded(model, ps);
  for (int i = 0; i < 300; ++i) {
    char key[16];
    std::snprintf(key, sizeof key, "key%06d", i);
    BtreeHeader h;
    REQUIRE(ReadBtreeHeader(page.data(), ps, 9, &h).ok());
    BtreeSlot slot;
    REQUIRE(BtreeLowerBound(page.data(), ps, 9, h, key, &slot).ok());
    REQUIRE(slot.offset == h.data_end);
    REQUIRE(BtreeInsertAt(page.data(), ps, &h, slot, key, static_cast<uint64_t>(i)));
    model.entries.push_back({key, static_cast<uint64_t>(i)});
    REQUIRE(h.restart_count == (h.count + kBtreeRestartInterval - 1) / kBtreeRestartInterval);
  }
  CheckPage(page, ps, model);
  // Laid out as EncodeBtreePage lays out the same entries.
  REQUIRE(page == Encoded(model, ps));
}

// Fills the last page of a level by ascending in-place inserts of keys with varied tails until
// one does not fit; returns that key.
std::string FillAscending(std::vector<uint8_t>& page, uint32_t ps, BtreeNode& model,
                          std::mt19937_64& rng) {
  for (int i = 0;; ++i) {
    char num[16];
    std::snprintf(num, sizeof num, "k%06d", i);
    const std::string tail(rng() % 48, static_cast<char>('a' + rng() % 26));
    std::string key = std::string(num) + tail;
    BtreeHeader h;
    REQUIRE(ReadBtreeHeader(page.data(), ps, 9, &h).ok());
    BtreeSlot slot;
    REQUIRE(BtreeLowerBound(page.data(), ps, 9, h, key, &slot).ok());
    REQUIRE(slot.offset == h.data_end);
    if (!BtreeInsertAt(page.data(), ps, &h, slot, key, static_cast<uint64_t>(i))) return key;
    model.entries.push_back({key, static_cast<uint64_t>(i)});
  }
}

TEST_CASE("btree page: a tail split keeps the page full, with its fence, and moves the rest",
          "[btree][page]") {
  int moved_some = 0, moved_none = 0;
  for (uint32_t ps : {kMinPageSize, 8192u}) {
    for (uint64_t seed = 1; seed <= 40; ++seed) {
      std::mt19937_64 rng(seed * ps);
      BtreeNode model;
      model.relation_id = 3;
      model.index_id = 2;
      model.left_sibling = 4;
      std::vector<uint8_t> page = Encoded(model, ps);
      const std::string key = FillAscending(page, ps, model, rng);
      BtreeHeader h;
      REQUIRE(ReadBtreeHeader(page.data(), ps, 9, &h).ok());
      BtreeTailSplit plan;
      absl::StatusOr<bool> planned = BtreePlanTailSplit(page.data(), ps, 9, h, key, 7, &plan);
      REQUIRE(planned.ok());
      REQUIRE(*planned);
      BtreeApplyTailSplit(page.data(), ps, &h, plan, 42);

      // The page: a prefix of the model, the fence between it and the right page, sibling 42.
      const size_t keep = plan.keep_count;
      REQUIRE(keep >= 1);
      REQUIRE(keep <= model.entries.size());
      (keep < model.entries.size() ? moved_some : moved_none)++;
      BtreeNode left = model;
      left.entries.resize(keep);
      INFO("page size " << ps << ", seed " << seed << ": keeps " << keep << " of "
                        << model.entries.size() << ", separator " << plan.separator);
      CheckPage(page, ps, left);
      BtreeNode d;
      REQUIRE(DecodeBtreePage(page.data(), ps, 9, &d).ok());
      REQUIRE(d.right_sibling == 42);
      REQUIRE(d.left_sibling == 4);
      REQUIRE(d.fence == plan.separator);
      CHECK(h.count == d.count);
      CHECK(h.data_end == d.data_end);
      CHECK(h.fence_len == plan.separator.size());
      // The right page: the moved entries, then the new one; all at or above the separator.
      REQUIRE(plan.right.size() == model.entries.size() - keep + 1);
      for (size_t i = keep; i < model.entries.size(); ++i) {
        REQUIRE(plan.right[i - keep].key == model.entries[i].key);
        REQUIRE(plan.right[i - keep].value == model.entries[i].value);
      }
      REQUIRE(plan.right.back().key == key);
      REQUIRE(plan.right.back().value == 7);
      REQUIRE(model.entries[keep - 1].key < plan.separator);
      REQUIRE(plan.separator <= plan.right.front().key);
      // Moving one entry fewer would not have fit: the page keeps as many as it can.
      if (keep < model.entries.size()) {
        const size_t sep_one_more =
            Common(model.entries[keep].key,
                   keep + 1 < model.entries.size() ? model.entries[keep + 1].key : key) +
            1;
        CHECK(h.data_end +
                  BtreeEntrySize(model.entries[keep - 1].key, model.entries[keep].key,
                                 model.entries[keep].value) +
                  bt::kRestartSize * h.restart_count + 2 + sep_one_more >
              ps);
      }
    }
  }
  // Both shapes happen with these keys (a fence that fits in the free bytes, and one that
  // does not).
  CHECK(moved_some > 0);
  CHECK(moved_none > 0);
}

TEST_CASE("btree page: a tail split is refused where it does not apply, and corruption is named",
          "[btree][page]") {
  const uint32_t ps = 4096;
  std::mt19937_64 rng(5);
  BtreeNode model;
  std::vector<uint8_t> page = Encoded(model, ps);
  const std::string key = FillAscending(page, ps, model, rng);
  BtreeHeader h;
  REQUIRE(ReadBtreeHeader(page.data(), ps, 9, &h).ok());
  BtreeTailSplit plan;
  // A key not above the last one.
  absl::StatusOr<bool> r =
      BtreePlanTailSplit(page.data(), ps, 9, h, model.entries.back().key, 1, &plan);
  REQUIRE(r.ok());
  CHECK_FALSE(*r);
  r = BtreePlanTailSplit(page.data(), ps, 9, h, "k000000", 1, &plan);
  REQUIRE(r.ok());
  CHECK_FALSE(*r);
  // A page with a right sibling.
  BtreeHeader with_sibling = h;
  with_sibling.right_sibling = 5;
  r = BtreePlanTailSplit(page.data(), ps, 9, with_sibling, key, 1, &plan);
  REQUIRE(r.ok());
  CHECK_FALSE(*r);
  // The last restart pointing past the entries, or into the middle of one.
  std::vector<uint8_t> bad = page;
  util::Put16(bad.data() + h.restarts_at(ps) + 2 * (h.restart_count - 1u), h.data_end);
  r = BtreePlanTailSplit(bad.data(), ps, 9, h, key, 1, &plan);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kDataLoss);
  CHECK(Contains(r.status(), "btree page 9"));
  bad = page;
  const uint16_t last = util::Get16(bad.data() + h.restarts_at(ps) + 2 * (h.restart_count - 1u));
  util::Put16(bad.data() + h.restarts_at(ps) + 2 * (h.restart_count - 1u), last + 1);
  r = BtreePlanTailSplit(bad.data(), ps, 9, h, key, 1, &plan);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kDataLoss);
}

TEST_CASE("btree page: lower bound on damaged bytes stays inside the page", "[btree][page]") {
  // Run under ASan to make this meaningful.
  const uint32_t ps = 4096;
  std::mt19937_64 rng(11);
  BtreeNode n;
  for (int i = 0; i < 200; ++i) n.entries.push_back({RandomKey(rng) + std::to_string(i), 0});
  SortAndFit(&n, ps);
  const auto good = Encoded(n, ps);
  int errors = 0;
  for (int round = 0; round < 3000; ++round) {
    auto page = good;
    for (int f = 0; f < 3; ++f) page[kBtreeHeaderSize + rng() % (ps - kBtreeHeaderSize)] = rng();
    BtreeHeader h;
    if (!ReadBtreeHeader(page.data(), ps, 1, &h).ok()) continue;
    BtreeSlot slot;
    absl::Status s = BtreeLowerBound(page.data(), ps, 1, h, RandomKey(rng), &slot);
    if (!s.ok()) {
      CHECK(absl::IsDataLoss(s));
      ++errors;
      continue;
    }
    CHECK(slot.restart <= h.restart_count);
    CHECK(slot.offset <= h.data_end);
  }
  CHECK(errors > 0);
}

}  // namespace
}  // namespace ember::page
