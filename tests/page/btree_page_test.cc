// Tests for the B-tree page format (engine/page/btree_page.h): byte layout, prefix compression,
// the fence trailer, fit checks, and that corrupt bytes decode to DataLoss rather than reading
// outside the page.
#include "engine/page/btree_page.h"

#include <algorithm>
#include <catch2/catch.hpp>
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
  // "" then "apple" (prefix 0), "applesauce" (prefix 5, "sauce"), "apricot" (prefix 2).
  size_t off = 40;
  CHECK(util::Get16(p + off) == 0);
  CHECK(util::Get16(p + off + 2) == 0);
  CHECK(util::Get64(p + off + 4) == 1u);
  off += 12;
  CHECK(util::Get16(p + off) == 0);
  CHECK(util::Get16(p + off + 2) == 5);
  CHECK(std::string(reinterpret_cast<const char*>(p + off + 4), 5) == "apple");
  off += 12 + 5;
  CHECK(util::Get16(p + off) == 5);
  CHECK(util::Get16(p + off + 2) == 5);
  CHECK(std::string(reinterpret_cast<const char*>(p + off + 4), 5) == "sauce");
  CHECK(util::Get64(p + off + 9) == 3u);
  off += 12 + 5;
  CHECK(util::Get16(p + off) == 2);
  CHECK(util::Get16(p + off + 2) == 5);
  off += 12 + 5;
  CHECK(util::Get16(p + off) == 0);
  CHECK(util::Get16(p + off + 2) == 1);
  off += 12 + 1;
  CHECK(util::Get16(p + 34) == off);
  // The fence "bc" ends the page: its bytes, then its u16 length in the last two bytes.
  CHECK(std::string(reinterpret_cast<const char*>(p + ps - 4), 2) == "bc");
  CHECK(util::Get16(p + ps - 2) == 2);
  CHECK(BtreeEncodedSize(n) == off + 4);
  for (size_t i = off; i < ps - 4; ++i) REQUIRE(p[i] == 0);

  BtreeNode d;
  REQUIRE(DecodeBtreePage(p, ps, 9, &d).ok());
  RequireSame(n, d);
  CHECK(d.count == 5);
  CHECK(d.data_end == off);
  CHECK(d.has_fence());
  CHECK(d.fence_len == 2);
  CHECK(BtreeFence(p, ps, d) == "bc");
  CHECK(d.free_space(ps) == ps - off - 4);

  // Without a right sibling there is no fence, and the page is zero up to its end.
  BtreeNode last = n;
  last.right_sibling = kNoPage;
  last.fence.reset();
  auto q = Encoded(last, ps);
  CHECK(q[23] == 0);
  for (size_t i = off; i < ps; ++i) REQUIRE(q[i] == 0);
  REQUIRE(DecodeBtreePage(q.data(), ps, 9, &d).ok());
  RequireSame(last, d);
  CHECK(BtreeFence(q.data(), ps, d).empty());
  CHECK(d.free_space(ps) == ps - off);
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
  CHECK(max == (4096 - 40 - 2 - 4 * 12) / 5);
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
    CHECK(kBtreeHeaderSize + 4 * (bt::kEntryOverhead + BtreeMaxKeySize(s)) + bt::kFenceOverhead +
              BtreeMaxKeySize(s) <=
          s);
  }
}

TEST_CASE("btree page: corrupt fields decode to DataLoss naming the page", "[btree][page]") {
  const uint32_t ps = 4096;
  const auto good = Encoded(SampleLeaf(), ps, 42);
  const size_t first = 40, second = 40 + 12;  // "" then "apple"
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
      {"prefix too long", [=](uint8_t* p) { util::Put16(p + second, 3); }, "prefix_len"},
      {"suffix too long", [=](uint8_t* p) { util::Put16(p + second + 2, 0xFFFF); }, "suffix_len"},
      {"keys out of order", [=](uint8_t* p) { p[second + 4] = 'z'; }, "not greater"},
      {"duplicate key",
       [=](uint8_t* p) {
         util::Put16(p + first + 2, 0);
         util::Put16(p + second + 2, 0);
       },
       "not greater"},
      {"unknown flag", [](uint8_t* p) { p[23] |= 0x80; }, "flags"},
      {"fence flag without a right sibling", [](uint8_t* p) { util::Put32(p + 28, 0); },
       "no right sibling"},
      {"right sibling without a fence", [](uint8_t* p) { p[23] = 0; }, "no fence"},
      {"fence_len 0", [=](uint8_t* p) { util::Put16(p + ps - 2, 0); }, "fence_len"},
      {"fence_len too long", [=](uint8_t* p) { util::Put16(p + ps - 2, 3000); }, "fence_len"},
      // A longer fence_len reads zeros before "bc": a fence below the last key.
      {"fence_len longer", [=](uint8_t* p) { util::Put16(p + ps - 2, 801); }, "below the fence"},
      {"fence reaching data_end",
       [=](uint8_t* p) {
         util::Put16(p + ps - 2, 801);
         util::Put16(p + 34, ps - 300);
       },
       "data_end"},
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
    util::Put64(page.data() + 40 + 4 + 1, 0);
    CHECK(absl::IsDataLoss(DecodeBtreePage(page.data(), ps, 42, &d)));
    util::Put64(page.data() + 40 + 4 + 1, uint64_t{1} << 40);
    CHECK(absl::IsDataLoss(DecodeBtreePage(page.data(), ps, 42, &d)));
  }
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
  std::sort(n.entries.begin(), n.entries.end(),
            [](const BtreeEntry& a, const BtreeEntry& b) { return a.key < b.key; });
  n.entries.erase(
      std::unique(n.entries.begin(), n.entries.end(),
                  [](const BtreeEntry& a, const BtreeEntry& b) { return a.key == b.key; }),
      n.entries.end());
  while (BtreeEncodedSize(n) > ps) n.entries.pop_back();
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

}  // namespace
}  // namespace ember::page
