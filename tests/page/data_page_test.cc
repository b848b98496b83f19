// Tests for slotted data pages (engine/page/data_page.h): placement, compaction, stable line
// numbers, the DpCheck invariants, and robustness against corrupt line entries.
#include "engine/page/data_page.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/util/coding.h"

namespace ember::page {
namespace {

std::vector<uint8_t> NewDataPage(uint32_t ps) {
  std::vector<uint8_t> page(ps);
  InitDataPage(page.data(), ps, 50, 7, 3);
  return page;
}

std::string Rec(size_t n, char c) { return std::string(n, c); }

// Header field readers for white-box checks (offsets from data_page.h).
uint16_t DataStart(const std::vector<uint8_t>& p) { return util::Get16(p.data() + 26); }
uint16_t FreeBytes(const std::vector<uint8_t>& p) { return util::Get16(p.data() + 28); }
void SetLineEntry(std::vector<uint8_t>& p, uint32_t line, uint16_t off, uint16_t len) {
  util::Put16(p.data() + 32 + 4 * line, off);
  util::Put16(p.data() + 32 + 4 * line + 2, len);
}

TEST_CASE("data page: init and header fields", "[page]") {
  for (uint32_t ps : {4096u, 8192u, 16384u, 32768u}) {
    auto page = NewDataPage(ps);
    CHECK(GetType(page.data()) == PageType::kData);
    CHECK(DpRelation(page.data()) == 7);
    CHECK(DpSequence(page.data()) == 3);
    CHECK(DpLineCount(page.data()) == 0);
    CHECK(DpLiveLines(page.data()) == 0);
    CHECK(DataStart(page) == ps);
    CHECK(FreeBytes(page) == ps - 32);
    CHECK(DpFreeSpace(page.data(), ps) == ps - 32);
    CHECK(DpCheck(page.data(), ps) == "");
    CHECK_FALSE(DpGet(page.data(), ps, 0).has_value());
  }
}

TEST_CASE("data page: record numbers", "[page]") {
  const uint64_t r = MakeRecordNo(0x123456, 0xBEEF);
  CHECK(r == 0x123456BEEFull);
  CHECK(RecordDpSequence(r) == 0x123456);
  CHECK(RecordLine(r) == 0xBEEF);
  CHECK(RecordDpSequence(MakeRecordNo(0xFFFFFFFF, 0xFFFF)) == 0xFFFFFFFF);
}

TEST_CASE("data page: insert, get, layout", "[page]") {
  const uint32_t ps = 4096;
  auto page = NewDataPage(ps);
  CHECK(DpInsert(page.data(), ps, "hello") == uint16_t{0});
  CHECK(DpInsert(page.data(), ps, "world!") == uint16_t{1});
  CHECK(DpGet(page.data(), ps, 0) == std::string_view("hello"));
  CHECK(DpGet(page.data(), ps, 1) == std::string_view("world!"));
  CHECK_FALSE(DpGet(page.data(), ps, 2).has_value());
  // Records are packed down from the end of the page in insertion order.
  CHECK(util::Get16(page.data() + 32) == ps - 5);
  CHECK(util::Get16(page.data() + 34) == 5);
  CHECK(util::Get16(page.data() + 36) == ps - 11);
  CHECK(util::Get16(page.data() + 38) == 6);
  CHECK(std::memcmp(page.data() + ps - 11, "world!hello", 11) == 0);
  CHECK(DpLineCount(page.data()) == 2);
  CHECK(DataStart(page) == ps - 11);
  CHECK(FreeBytes(page) == ps - 32 - 8 - 11);
  CHECK(DpCheck(page.data(), ps) == "");
  SealPage(page.data(), ps);
  CHECK(VerifyPage(page.data(), ps, 50, "db").ok());
}

TEST_CASE("data page: empty records are refused", "[page]") {
  const uint32_t ps = 4096;
  auto page = NewDataPage(ps);
  CHECK_FALSE(DpInsert(page.data(), ps, "").has_value());
  CHECK_FALSE(DpInsertAt(page.data(), ps, 0, ""));
  REQUIRE(DpInsert(page.data(), ps, "x") == uint16_t{0});
  CHECK_FALSE(DpReplace(page.data(), ps, 0, ""));
  CHECK(DpGet(page.data(), ps, 0) == std::string_view("x"));
  CHECK(DpCheck(page.data(), ps) == "");
}

TEST_CASE("data page: the largest record fits an empty page exactly", "[page]") {
  for (uint32_t ps : {4096u, 32768u}) {
    auto page = NewDataPage(ps);
    const std::string too_big = Rec(MaxRecordOnPage(ps) + 1, 'z');
    CHECK_FALSE(DpInsert(page.data(), ps, too_big).has_value());
    const std::string max = Rec(MaxRecordOnPage(ps), 'y');
    REQUIRE(DpInsert(page.data(), ps, max) == uint16_t{0});
    CHECK(DpFreeSpace(page.data(), ps) == 0);
    CHECK(DataStart(page) == 36);
    CHECK(DpCheck(page.data(), ps) == "");
    CHECK(DpGet(page.data(), ps, 0) == std::string_view(max));
    CHECK_FALSE(DpInsert(page.data(), ps, "a").has_value());
    DpDelete(page.data(), ps, 0);
    CHECK(DpLineCount(page.data()) == 0);
    CHECK(DataStart(page) == ps);
    CHECK(FreeBytes(page) == ps - 32);
    CHECK(DpCheck(page.data(), ps) == "");
  }
}

TEST_CASE("data page: fill until full", "[page]") {
  for (uint32_t ps : {4096u, 8192u}) {
    for (size_t size : {1u, 7u, 100u, 1000u}) {
      INFO("page size " << ps << ", record size " << size);
      auto page = NewDataPage(ps);
      std::vector<std::string> recs;
      while (true) {
        std::string r = Rec(size, static_cast<char>('a' + recs.size() % 26));
        r[0] = static_cast<char>(recs.size());
        auto line = DpInsert(page.data(), ps, r);
        if (!line) break;
        REQUIRE(*line == recs.size());
        recs.push_back(r);
      }
      CHECK(recs.size() == (ps - 32) / (size + 4));
      CHECK(DpFreeSpace(page.data(), ps) < size + 4);
      CHECK(DpFreeSpace(page.data(), ps) == ps - 32 - recs.size() * (size + 4));
      CHECK(DpCheck(page.data(), ps) == "");
      CHECK(DpLiveLines(page.data()) == recs.size());
      for (size_t i = 0; i < recs.size(); ++i) {
        REQUIRE(DpGet(page.data(), ps, static_cast<uint16_t>(i)) == std::string_view(recs[i]));
      }
    }
  }
}

TEST_CASE("data page: the lowest empty line is reused and trailing lines dropped", "[page]") {
  const uint32_t ps = 4096;
  auto page = NewDataPage(ps);
  for (int i = 0; i < 5; ++i) REQUIRE(DpInsert(page.data(), ps, Rec(10, 'a' + i)) == i);
  DpDelete(page.data(), ps, 3);
  DpDelete(page.data(), ps, 1);
  CHECK(DpLineCount(page.data()) == 5);
  CHECK(DpLiveLines(page.data()) == 3);
  CHECK_FALSE(DpGet(page.data(), ps, 1).has_value());
  CHECK(DpCheck(page.data(), ps) == "");
  CHECK(DpInsert(page.data(), ps, "new1") == uint16_t{1});
  CHECK(DpInsert(page.data(), ps, "new3") == uint16_t{3});
  CHECK(DpInsert(page.data(), ps, "new5") == uint16_t{5});
  CHECK(DpGet(page.data(), ps, 4) == std::string_view(Rec(10, 'e')));
  // Deleting the last lines drops them and any empty lines before them.
  DpDelete(page.data(), ps, 3);
  DpDelete(page.data(), ps, 5);
  CHECK(DpLineCount(page.data()) == 5);
  DpDelete(page.data(), ps, 4);
  CHECK(DpLineCount(page.data()) == 3);
  CHECK(DpCheck(page.data(), ps) == "");
  // Deleting an empty or absent line is a no-op.
  std::vector<uint8_t> before = page;
  DpDelete(page.data(), ps, 7);
  DpDelete(page.data(), ps, 1000);
  CHECK(page == before);
}

TEST_CASE("data page: insert compacts when only the holes have room", "[page]") {
  const uint32_t ps = 4096;
  auto page = NewDataPage(ps);
  std::vector<std::string> recs;
  for (int i = 0; DpInsert(page.data(), ps, Rec(200, 'a' + i)); ++i)
    recs.push_back(Rec(200, 'a' + i));
  REQUIRE(recs.size() == 19);  // 19 * 204 = 3876 of 4064
  // Free every other record: lots of room, but in holes.
  for (size_t i = 0; i < recs.size(); i += 2) DpDelete(page.data(), ps, static_cast<uint16_t>(i));
  REQUIRE(DpCheck(page.data(), ps) == "");
  const uint32_t gap = DataStart(page) - (32 + 4 * DpLineCount(page.data()));
  const std::string big = Rec(1500, 'Q');
  REQUIRE(big.size() > gap);
  REQUIRE(DpFreeSpace(page.data(), ps) >= big.size());
  CHECK(DpInsert(page.data(), ps, big) == uint16_t{0});
  CHECK(DpCheck(page.data(), ps) == "");
  CHECK(DpGet(page.data(), ps, 0) == std::string_view(big));
  for (size_t i = 1; i < recs.size(); i += 2) {
    REQUIRE(DpGet(page.data(), ps, static_cast<uint16_t>(i)) == std::string_view(recs[i]));
  }
}

TEST_CASE("data page: replace shrinking, growing, and not fitting", "[page]") {
  const uint32_t ps = 4096;
  auto page = NewDataPage(ps);
  REQUIRE(DpInsert(page.data(), ps, Rec(100, 'a')) == uint16_t{0});
  REQUIRE(DpInsert(page.data(), ps, Rec(100, 'b')) == uint16_t{1});
  REQUIRE(DpInsert(page.data(), ps, Rec(100, 'c')) == uint16_t{2});
  const uint32_t free0 = DpFreeSpace(page.data(), ps);

  SECTION("shrink in place") {
    const uint16_t off = util::Get16(page.data() + 32 + 4);
    REQUIRE(DpReplace(page.data(), ps, 1, "short"));
    CHECK(util::Get16(page.data() + 32 + 4) == off);
    CHECK(DpGet(page.data(), ps, 1) == std::string_view("short"));
    CHECK(DpFreeSpace(page.data(), ps) == free0 + 95);
    CHECK(DpCheck(page.data(), ps) == "");
    // Growing back within the free space works, and the line number is kept.
    REQUIRE(DpReplace(page.data(), ps, 1, Rec(300, 'B')));
    CHECK(DpGet(page.data(), ps, 1) == std::string_view(Rec(300, 'B')));
    CHECK(DpFreeSpace(page.data(), ps) == free0 - 200);
    CHECK(DpCheck(page.data(), ps) == "");
  }
  SECTION("grow into the gap") {
    REQUIRE(DpReplace(page.data(), ps, 0, Rec(1000, 'A')));
    CHECK(DpGet(page.data(), ps, 0) == std::string_view(Rec(1000, 'A')));
    CHECK(DpGet(page.data(), ps, 1) == std::string_view(Rec(100, 'b')));
    CHECK(DpFreeSpace(page.data(), ps) == free0 - 900);
    CHECK(DpCheck(page.data(), ps) == "");
  }
  SECTION("grow to use every free byte (needs compaction)") {
    const std::string all = Rec(100 + free0, 'M');
    REQUIRE(DpReplace(page.data(), ps, 1, all));
    CHECK(DpFreeSpace(page.data(), ps) == 0);
    CHECK(DpGet(page.data(), ps, 0) == std::string_view(Rec(100, 'a')));
    CHECK(DpGet(page.data(), ps, 1) == std::string_view(all));
    CHECK(DpGet(page.data(), ps, 2) == std::string_view(Rec(100, 'c')));
    CHECK(DpCheck(page.data(), ps) == "");
  }
  SECTION("too big: false and the page is unchanged") {
    const std::vector<uint8_t> before = page;
    CHECK_FALSE(DpReplace(page.data(), ps, 1, Rec(100 + free0 + 1, 'X')));
    CHECK(page == before);
    CHECK_FALSE(DpReplace(page.data(), ps, 5, "absent"));
    CHECK(page == before);
  }
  SECTION("replacing with bytes that live on the page") {
    // The new value is a view of another record (and then of the record itself): the page
    // moves bytes around while copying, so this checks the aliasing is handled.
    const std::string c(*DpGet(page.data(), ps, 2));
    REQUIRE(DpReplace(page.data(), ps, 0, *DpGet(page.data(), ps, 2)));
    CHECK(DpGet(page.data(), ps, 0) == std::string_view(c));
    auto self = *DpGet(page.data(), ps, 1);
    REQUIRE(DpReplace(page.data(), ps, 1, self.substr(10, 50)));
    CHECK(DpGet(page.data(), ps, 1) == std::string_view(Rec(50, 'b')));
    CHECK(DpCheck(page.data(), ps) == "");
  }
}

TEST_CASE("data page: the lowest empty line is found at every position of a long line array",
          "[page]") {
  // DpInsert scans the line array several entries per step; a hole at any position in or after
  // a step, and two holes in one step, must give the lowest one.
  const uint32_t ps = 4096;
  for (int n : {1, 2, 7, 8, 9, 16, 17, 150}) {
    for (int hole = 0; hole < n; ++hole) {
      INFO("lines " << n << ", hole " << hole);
      auto page = NewDataPage(ps);
      for (int i = 0; i < n; ++i) REQUIRE(DpInsert(page.data(), ps, Rec(8, 'a')) == i);
      DpDelete(page.data(), ps, static_cast<uint16_t>(hole));
      if (hole + 1 < n - 1) DpDelete(page.data(), ps, static_cast<uint16_t>(hole + 1));
      if (hole == n - 1) {
        // Deleting the last line drops it: the next insert appends at the same number.
        CHECK(DpInsert(page.data(), ps, "x") == uint16_t(hole));
        continue;
      }
      CHECK(DpInsert(page.data(), ps, "x") == uint16_t(hole));
      if (hole + 1 < n - 1) CHECK(DpInsert(page.data(), ps, "y") == uint16_t(hole + 1));
      CHECK(DpInsert(page.data(), ps, "z") == uint16_t(n));  // no hole left: a new line
      CHECK(DpCheck(page.data(), ps) == "");
    }
  }
}

TEST_CASE("data page: free_hint starts the search and is checked", "[page]") {
  const uint32_t ps = 4096;
  auto page = NewDataPage(ps);
  CHECK(util::Get16(page.data() + 30) == 0);
  for (int i = 0; i < 40; ++i) REQUIRE(DpInsert(page.data(), ps, Rec(8, 'a')) == i);
  CHECK(util::Get16(page.data() + 30) == 40);  // every line below 40 is in use
  DpDelete(page.data(), ps, 17);
  CHECK(util::Get16(page.data() + 30) == 17);
  DpDelete(page.data(), ps, 30);
  CHECK(util::Get16(page.data() + 30) == 17);
  REQUIRE(DpInsert(page.data(), ps, "x") == uint16_t{17});
  CHECK(util::Get16(page.data() + 30) == 18);
  REQUIRE(DpInsertAt(page.data(), ps, 30, "y"));
  CHECK(DpCheck(page.data(), ps) == "");
  REQUIRE(DpInsert(page.data(), ps, "z") == uint16_t{40});
  // A hint of 0 (too low) only costs a longer search.
  DpDelete(page.data(), ps, 25);
  util::Put16(page.data() + 30, 0);
  CHECK(DpCheck(page.data(), ps) == "");
  REQUIRE(DpInsert(page.data(), ps, "w") == uint16_t{25});
  // A hint past an empty line would hide it: Validate's check names it.
  DpDelete(page.data(), ps, 5);
  util::Put16(page.data() + 30, 9);
  CHECK(DpCheck(page.data(), ps) == "line 5: empty below free_hint 9");
}

TEST_CASE("data page: DpInsertAt keeps a chosen line number", "[page]") {
  const uint32_t ps = 4096;
  auto page = NewDataPage(ps);
  REQUIRE(DpInsertAt(page.data(), ps, 4, "four"));
  CHECK(DpLineCount(page.data()) == 5);
  CHECK(DpLiveLines(page.data()) == 1);
  CHECK(FreeBytes(page) == ps - 32 - 20 - 4);
  CHECK(DpCheck(page.data(), ps) == "");
  CHECK_FALSE(DpInsertAt(page.data(), ps, 4, "again"));
  REQUIRE(DpInsertAt(page.data(), ps, 2, "two"));
  CHECK(DpInsert(page.data(), ps, "zero") == uint16_t{0});
  CHECK(DpGet(page.data(), ps, 2) == std::string_view("two"));
  CHECK(DpGet(page.data(), ps, 4) == std::string_view("four"));
  CHECK(DpCheck(page.data(), ps) == "");
  // A line beyond what the page can address is refused.
  CHECK_FALSE(DpInsertAt(page.data(), ps, 0xFFFF, "x"));
  CHECK_FALSE(DpInsertAt(page.data(), ps, 2000, "x"));  // the line array alone would not fit
  CHECK(DpCheck(page.data(), ps) == "");
}

// The reference model of one data page: line -> bytes.
struct Model {
  uint32_t ps;
  std::map<uint16_t, std::string> recs;

  uint32_t LineCount() const { return recs.empty() ? 0 : recs.rbegin()->first + 1u; }
  uint32_t Free() const {
    uint32_t used = 0;
    for (const auto& [line, r] : recs) used += static_cast<uint32_t>(r.size());
    return ps - 32 - 4 * LineCount() - used;
  }
  uint16_t LowestEmpty() const {
    uint16_t i = 0;
    for (const auto& [line, r] : recs) {
      if (line != i) break;
      ++i;
    }
    return i;
  }
};

// First difference between page and model, or "".
std::string Compare(const std::vector<uint8_t>& page, const Model& m) {
  std::string c = DpCheck(page.data(), m.ps);
  if (!c.empty()) return "DpCheck: " + c;
  if (DpLineCount(page.data()) != m.LineCount()) return "line count differs";
  if (DpLiveLines(page.data()) != m.recs.size()) return "live lines differ";
  if (DpFreeSpace(page.data(), m.ps) != m.Free()) return "free space differs";
  for (uint32_t line = 0; line < m.LineCount() + 2; ++line) {
    auto got = DpGet(page.data(), m.ps, static_cast<uint16_t>(line));
    auto it = m.recs.find(static_cast<uint16_t>(line));
    if (it == m.recs.end()) {
      if (got) return "line " + std::to_string(line) + " should be empty";
    } else if (!got || *got != it->second) {
      return "line " + std::to_string(line) + " has the wrong bytes";
    }
  }
  return "";
}

size_t RandomSize(std::mt19937& rng, uint32_t ps) {
  const uint32_t r = rng() % 100;
  if (r < 65) return 1 + rng() % 64;
  if (r < 92) return 65 + rng() % 536;
  if (r < 99) return 601 + rng() % (ps / 4);
  return 1 + rng() % MaxRecordOnPage(ps);
}

std::string RandomBytes(std::mt19937& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

TEST_CASE("data page: random operations against a model", "[page]") {
  for (uint32_t ps : {4096u, 8192u, 32768u}) {
    for (uint32_t seed = 1; seed <= 3; ++seed) {
      INFO("page size " << ps << ", seed " << seed);
      std::mt19937 rng(seed * 1000 + ps);
      auto page = NewDataPage(ps);
      Model m{ps, {}};
      int inserts = 0, insert_fails = 0, replaces = 0, replace_fails = 0, compactions = 0;
      for (int op = 0; op < 4000; ++op) {
        INFO("op " << op);
        const uint32_t kind = rng() % 100;
        auto random_live = [&]() -> uint16_t {
          auto it = m.recs.begin();
          std::advance(it, rng() % m.recs.size());
          return it->first;
        };
        const uint32_t gap_before = DataStart(page) - (32 + 4 * DpLineCount(page.data()));
        if (kind < 40 || m.recs.empty()) {
          const std::string r = RandomBytes(rng, RandomSize(rng, ps));
          const uint16_t expect_line = m.LowestEmpty();
          const bool reuse = expect_line < m.LineCount();
          const bool fits = r.size() + (reuse ? 0 : 4) <= m.Free();
          auto line = DpInsert(page.data(), ps, r);
          REQUIRE(line.has_value() == fits);
          ++inserts;
          if (line) {
            REQUIRE(*line == expect_line);
            m.recs[*line] = r;
            compactions += r.size() + (reuse ? 0 : 4) > gap_before;
          } else {
            ++insert_fails;
          }
        } else if (kind < 50) {
          const uint16_t line = static_cast<uint16_t>(rng() % (m.LineCount() + 4));
          const std::string r = RandomBytes(rng, RandomSize(rng, ps));
          const uint32_t new_lines = line >= m.LineCount() ? line + 1 - m.LineCount() : 0;
          const bool ok = !m.recs.count(line) && r.size() + 4 * new_lines <= m.Free();
          const std::vector<uint8_t> before = page;
          REQUIRE(DpInsertAt(page.data(), ps, line, r) == ok);
          if (ok) {
            m.recs[line] = r;
          } else {
            REQUIRE(page == before);
          }
        } else if (kind < 75) {
          const uint16_t line = random_live();
          std::string& cur = m.recs[line];
          const size_t n = rng() % 3 == 0 ? cur.size() + 1 + rng() % 200 : RandomSize(rng, ps);
          std::string r = RandomBytes(rng, n);
          if (rng() % 10 == 0) {
            // Take the new bytes from a record on the page to exercise aliasing.
            const uint16_t src = random_live();
            std::string_view v = *DpGet(page.data(), ps, src);
            v = v.substr(0, std::max<size_t>(1, rng() % (v.size() + 1)));
            r.assign(v);
            REQUIRE(DpReplace(page.data(), ps, line, v) ==
                    (r.size() <= cur.size() || r.size() - cur.size() <= m.Free()));
            if (r.size() <= cur.size() || r.size() - cur.size() <= m.Free()) cur = r;
            continue;
          }
          const bool ok = r.size() <= cur.size() || r.size() - cur.size() <= m.Free();
          const std::vector<uint8_t> before = page;
          ++replaces;
          REQUIRE(DpReplace(page.data(), ps, line, r) == ok);
          if (ok) {
            cur = r;
          } else {
            ++replace_fails;
            REQUIRE(page == before);
          }
        } else {
          const uint16_t line = random_live();
          DpDelete(page.data(), ps, line);
          m.recs.erase(line);
        }
        const std::string diff = Compare(page, m);
        REQUIRE(diff == "");
      }
      // Every path was taken.
      CHECK(inserts > 0);
      CHECK(insert_fails > 0);
      CHECK(replaces > 0);
      CHECK(replace_fails > 0);
      CHECK(compactions > 0);
      SealPage(page.data(), ps);
      CHECK(VerifyPage(page.data(), ps, 50, "db").ok());
    }
  }
}

TEST_CASE("data page: corrupt line entries never read outside the page", "[page]") {
  const uint32_t ps = 4096;
  auto good = NewDataPage(ps);
  REQUIRE(DpInsert(good.data(), ps, Rec(100, 'a')));
  REQUIRE(DpInsert(good.data(), ps, Rec(100, 'b')));
  REQUIRE(DpInsert(good.data(), ps, Rec(100, 'c')));
  REQUIRE(DpCheck(good.data(), ps) == "");

  struct Case {
    const char* what;
    uint32_t line;
    uint16_t off, len;
    const char* expect;  // part of DpCheck's description
  };
  const Case cases[] = {
      {"offset into the header", 1, 10, 100, "points into the line array"},
      {"offset into the line array", 1, 40, 100, "points into the line array"},
      {"runs past the end", 1, ps - 50, 100, "past the page end"},
      {"offset beyond the page", 1, 60000, 10, "past the page end"},
      {"zero length", 1, ps - 200, 0, "length 0"},
      {"empty with a length", 1, 0, 5, "empty (offset 0) but length 5"},
      {"overlapping", 1, ps - 150, 100, "overlap"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    auto page = good;
    SetLineEntry(page, c.line, c.off, c.len);
    // Overlapping bytes are still inside the page, so only DpCheck can tell; every other
    // case is caught by DpGet itself.
    auto got = DpGet(page.data(), ps, static_cast<uint16_t>(c.line));
    CHECK(got.has_value() == (std::string_view(c.expect) == "overlap"));
    const std::string check = DpCheck(page.data(), ps);
    CHECK(check.find(c.expect) != std::string::npos);
    CHECK(check.find("line") != std::string::npos);
    // Mutators must not crash or write outside the page either.
    DpReplace(page.data(), ps, static_cast<uint16_t>(c.line), Rec(300, 'x'));
    DpInsert(page.data(), ps, Rec(3000, 'y'));
    DpDelete(page.data(), ps, static_cast<uint16_t>(c.line));
    DpFreeSpace(page.data(), ps);
  }

  SECTION("line_count past the page end") {
    auto page = good;
    util::Put16(page.data() + 24, 0xFFFF);
    for (uint32_t line : {0u, 1u, 2u, 1000u, 0xFFFEu}) {
      CHECK_FALSE(DpGet(page.data(), ps, static_cast<uint16_t>(line)).has_value());
    }
    CHECK(DpCheck(page.data(), ps).find("line_count 65535") != std::string::npos);
    CHECK_FALSE(DpInsert(page.data(), ps, "x").has_value());
    CHECK_FALSE(DpReplace(page.data(), ps, 0, "x"));
    CHECK(DpFreeSpace(page.data(), ps) == 0);
  }
  SECTION("wrong data_start") {
    auto page = good;
    util::Put16(page.data() + 26, DataStart(good) - 1);
    CHECK(DpCheck(page.data(), ps).find("data_start") != std::string::npos);
    util::Put16(page.data() + 26, ps + 1);
    CHECK(DpCheck(page.data(), ps).find("data_start") != std::string::npos);
    CHECK_FALSE(DpInsert(page.data(), ps, "x").has_value());
  }
  SECTION("wrong free_bytes") {
    auto page = good;
    util::Put16(page.data() + 28, FreeBytes(good) + 1);
    CHECK(DpCheck(page.data(), ps).find("free_bytes") != std::string::npos);
  }
  SECTION("trailing empty line") {
    auto page = good;
    util::Put16(page.data() + 24, 4);
    util::Put16(page.data() + 28, FreeBytes(good) - 4);
    CHECK(DpCheck(page.data(), ps).find("last line is empty") != std::string::npos);
  }
  SECTION("not a data page") {
    auto page = good;
    page[0] = static_cast<uint8_t>(PageType::kBtree);
    CHECK(DpCheck(page.data(), ps).find("not data") != std::string::npos);
  }
}

TEST_CASE("data page: random corruption never crashes", "[page]") {
  // Run under ASan/UBSan this proves DpGet, DpCheck and the mutators stay inside the page.
  const uint32_t ps = 4096;
  std::mt19937 rng(99);
  auto base = NewDataPage(ps);
  for (int i = 0; i < 30; ++i)
    REQUIRE(DpInsert(base.data(), ps, RandomBytes(rng, 1 + rng() % 100)));
  int detected = 0;
  for (int round = 0; round < 3000; ++round) {
    // A fresh heap copy of exactly page_size bytes, so ASan sees any overrun.
    auto page = base;
    const int nflips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < nflips; ++k) {
      // Mostly hit the header counters and the line array, where the danger is.
      const uint32_t at = rng() % 2 ? 24 + rng() % (8 + 4 * 30) : rng() % ps;
      page[at] = static_cast<uint8_t>(rng());
    }
    page[0] = static_cast<uint8_t>(PageType::kData);
    const std::string check = DpCheck(page.data(), ps);
    detected += !check.empty();
    for (uint32_t line = 0; line < 40; ++line) {
      if (auto v = DpGet(page.data(), ps, static_cast<uint16_t>(line))) {
        REQUIRE(v->data() >= reinterpret_cast<const char*>(page.data()) + 32);
        REQUIRE(v->data() + v->size() <= reinterpret_cast<const char*>(page.data()) + ps);
      }
    }
    if (check.empty()) DpLiveLines(page.data());  // trusts line_count: only on checked pages
    DpFreeSpace(page.data(), ps);
    DpInsert(page.data(), ps, RandomBytes(rng, 1 + rng() % 500));
    DpReplace(page.data(), ps, static_cast<uint16_t>(rng() % 40),
              RandomBytes(rng, 1 + rng() % 500));
    DpInsertAt(page.data(), ps, static_cast<uint16_t>(rng() % 60), "abc");
    DpDelete(page.data(), ps, static_cast<uint16_t>(rng() % 40));
    DpCheck(page.data(), ps);
  }
  CHECK(detected > 1000);
}

// Found by the page fuzz target: Relation::HeadInlineLimit counts the live lines of a page only
// VerifyPage has seen (DpFreeSpace gives 0 for an insane header, which sends it to the count).
// A data_start past a 4 KiB page (damaged, but sealed) let the walk read up to 32 KiB of lines
// from beyond the page; with the page size given it stays inside it.
TEST_CASE("data page: DpLiveLines with the page size stays inside a page with a damaged header",
          "[data_page]") {
  constexpr uint32_t ps = 4096;
  std::vector<uint8_t> page(ps);
  InitDataPage(page.data(), ps, 7, 1, 0);
  REQUIRE(DpInsert(page.data(), ps, "abc").has_value());
  util::Put16(page.data() + 24, 0xFFFF);  // line_count
  util::Put16(page.data() + 26, 0x8000);  // data_start: 32 KiB
  CHECK_FALSE(DpCheck(page.data(), ps).empty());
  CHECK(DpFreeSpace(page.data(), ps) == 0);
  // ASan reports a read past `page` here without the bound.
  CHECK(DpLiveLines(page.data(), ps) <= (ps - kDpLinesOffset) / kDpLineSize);
}

}  // namespace
}  // namespace ember::page
