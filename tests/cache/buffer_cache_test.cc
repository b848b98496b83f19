// BufferCache and PageSpace: fetch/FetchNew, eviction through a tiny cache, dirty writes, bad
// pages, counters, per-transaction flushes, careful-write precedence (order and syncs, chains,
// cycles, eviction under pressure, frames reused during a flush), pinned-out caches, concurrent
// latching, and page allocation over the PIPs.
#include "engine/cache/buffer_cache.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/cache/page_space.h"
#include "engine/page/doublewrite_page.h"
#include "engine/page/pip.h"
#include "engine/util/counters.h"
#include "tests/support/cache_util.h"
#include "tests/support/engine_util.h"
#include "tests/support/fault_file.h"

using namespace ember;
using cache::BufferCache;
using cache::CacheOptions;
using cache::LatchMode;
using cache::PageRef;
using cache::PageSpace;
using page::PageNo;
using testing::CheckBefore;
using testing::CheckPage;
using testing::FillPage;
using testing::kPs;
using testing::kTsan;
using testing::MakePage;
using testing::Opts;
using testing::RewritePage;
using testing::TestDb;
using testing::WritesOf;

namespace {

std::string ReadCheck(BufferCache& c, PageNo no, uint64_t stamp) {
  absl::StatusOr<PageRef> r = c.Fetch(no, LatchMode::kShared);
  if (!r.ok()) return std::string(r.status().ToString());
  return CheckPage(r->data(), c.page_size(), no, stamp);
}

bool Contains(absl::string_view haystack, absl::string_view needle) {
  return haystack.find(needle) != absl::string_view::npos;
}

}  // namespace

TEST_CASE("cache: a resident page comes back with the same bytes, FetchNew gives zeros",
          "[cache]") {
  TestDb db(Opts(64));
  BufferCache& c = db.cache();
  MakePage(c, 5, 77);
  const uint64_t reads_before = c.counters().reads;
  for (LatchMode m : {LatchMode::kShared, LatchMode::kExclusive}) {
    PageRef r = VALUE_OR_FAIL(c.Fetch(5, m));
    CHECK(r.page_no() == 5);
    CHECK(r.exclusive() == (m == LatchMode::kExclusive));
    CHECK(CheckPage(r.data(), kPs, 5, 77) == "");
  }
  CHECK(c.counters().reads == reads_before);  // hits: nothing read

  // FetchNew of a resident page with contents gives zeros, and so does a brand new page.
  for (PageNo no : {PageNo{5}, PageNo{6}}) {
    PageRef r = VALUE_OR_FAIL(c.FetchNew(no));
    CHECK(r.exclusive());
    CHECK(std::all_of(r.data(), r.data() + kPs, [](uint8_t b) { return b == 0; }));
  }
}

TEST_CASE("cache: FetchNew on a recycled frame gives zeros", "[cache]") {
  TestDb db(Opts(16));
  BufferCache& c = db.cache();
  for (PageNo p = 2; p < 40; ++p) MakePage(c, p, p);  // every frame has held a filled page
  for (PageNo p = 100; p < 140; ++p) {
    PageRef r = VALUE_OR_FAIL(c.FetchNew(p));
    INFO("page " << p);
    CHECK(std::all_of(r.data(), r.data() + kPs, [](uint8_t b) { return b == 0; }));
  }
}

TEST_CASE("cache: a 16-frame cache over hundreds of pages keeps every page's contents", "[cache]") {
  TestDb db(Opts(16));
  BufferCache& c = db.cache();
  constexpr PageNo kFirst = 2, kEnd = 302;
  std::map<PageNo, uint64_t> stamp;
  for (PageNo p = kFirst; p < kEnd; ++p) {
    MakePage(c, p, 1000 + p);
    stamp[p] = 1000 + p;
    CHECK(c.DirtyCount() <= c.capacity());
  }
  std::mt19937 rng(42);
  std::vector<PageNo> order;
  for (PageNo p = kFirst; p < kEnd; ++p) order.push_back(p);
  for (int round = 0; round < 4; ++round) {
    std::shuffle(order.begin(), order.end(), rng);
    for (PageNo p : order) {
      INFO("round " << round << " page " << p);
      REQUIRE(ReadCheck(c, p, stamp[p]) == "");
      if (round == 1 && p % 3 == 0) {  // change a third of them, evicted again later
        RewritePage(c, p, stamp[p] + 5000);
        stamp[p] += 5000;
      }
    }
  }
  // Evictions really happened: every page was read back from disk at least once per round.
  CHECK(c.counters().reads >= 4 * (kEnd - kFirst) - c.capacity() * 4);
  REQUIRE_OK(c.FlushAll());
  CHECK(c.DirtyCount() == 0);
  db.Reopen();
  for (PageNo p = kFirst; p < kEnd; ++p) {
    INFO("after reopen, page " << p);
    REQUIRE(ReadCheck(db.cache(), p, stamp[p]) == "");
  }
}

TEST_CASE("cache: dirty pages are written when evicted and by FlushAll, once each", "[cache]") {
  TestDb db(Opts(16), /*init_pip=*/false);
  BufferCache& c = db.cache();
  for (PageNo p = 2; p < 18; ++p) MakePage(c, p, p);  // exactly fills the cache
  CHECK(db.file().events().empty());
  CHECK(c.DirtyCount() == 16);

  // Needs a frame: the oldest quarter of the dirty pages (2..5) is written, in one batch.
  MakePage(c, 18, 18);
  std::vector<testing::IoEvent> ev = db.file().events();
  INFO(testing::Describe(ev));
  REQUIRE(ev.size() == 4);
  for (const testing::IoEvent& e : ev) {
    CHECK(!e.sync);
    CHECK(e.step == ev[0].step);
    CHECK(e.page >= 2);
    CHECK(e.page < 6);
    CHECK(e.stamp == e.page);
    CHECK(CheckPage(reinterpret_cast<const uint8_t*>(db.DiskPage(e.page).data()), kPs, e.page,
                    e.page) == "");
  }
  CHECK(c.DirtyCount() == 13);

  REQUIRE_OK(c.FlushAll());
  CHECK(c.DirtyCount() == 0);
  ev = db.file().events();
  for (PageNo p = 2; p <= 18; ++p) {
    INFO("page " << p);
    CHECK(WritesOf(ev, p) == 1);
    const std::string disk = db.DiskPage(p);
    const auto* d = reinterpret_cast<const uint8_t*>(disk.data());
    CHECK_OK(page::VerifyPage(d, kPs, p, "test"));
    CHECK(CheckPage(d, kPs, p, p) == "");
  }
  const size_t n = ev.size();
  REQUIRE_OK(c.FlushAll());  // nothing dirty: nothing written
  CHECK(db.file().events().size() == n);
  REQUIRE_OK(c.FlushTxns(std::vector<uint64_t>{1}));
  CHECK(db.file().events().size() == n);
}

TEST_CASE(
    "cache: a corrupt page is DataLoss naming it, a page past the end is OutOfRange, and "
    "the cache keeps working",
    "[cache]") {
  TestDb db(Opts(16), /*init_pip=*/false);
  for (PageNo p = 2; p < 10; ++p) MakePage(db.cache(), p, p);
  REQUIRE_OK(db.cache().FlushAll());
  // Flip one byte of page 5 and copy page 6 over page 7 (a misdirected write).
  std::string p5 = db.DiskPage(5);
  p5[1000] ^= 0x40;
  REQUIRE_OK(db.file().Write(uint64_t{5} * kPs, p5.data(), p5.size()));
  const std::string p6 = db.DiskPage(6);
  REQUIRE_OK(db.file().Write(uint64_t{7} * kPs, p6.data(), p6.size()));
  db.Reopen();
  BufferCache& c = db.cache();

  // More failures than frames: a failed load must not leak its frame.
  for (int i = 0; i < 40; ++i) {
    absl::StatusOr<PageRef> r = c.Fetch(5, i % 2 ? LatchMode::kShared : LatchMode::kExclusive);
    REQUIRE(absl::IsDataLoss(r.status()));
    CHECK(Contains(r.status().message(), "page 5 "));
    absl::StatusOr<PageRef> m = c.Fetch(7, LatchMode::kShared);
    REQUIRE(absl::IsDataLoss(m.status()));
    CHECK(Contains(m.status().message(), "page 7 "));
    absl::StatusOr<PageRef> e = c.Fetch(1000 + i, LatchMode::kShared);
    REQUIRE(absl::IsOutOfRange(e.status()));
  }
  for (PageNo p : {2, 3, 4, 6, 8, 9}) CHECK(ReadCheck(c, p, p) == "");
  // 16 pins at once still work: no frame was lost.
  {
    std::vector<PageRef> held;
    for (PageNo p = 20; p < 36; ++p) held.push_back(VALUE_OR_FAIL(c.FetchNew(p)));
  }
  // The bad page can be rewritten and then reads fine.
  MakePage(c, 5, 55);
  REQUIRE_OK(c.FlushAll());
  db.Reopen();
  CHECK(ReadCheck(db.cache(), 5, 55) == "");
  CHECK(absl::IsDataLoss(db.cache().Fetch(7, LatchMode::kShared).status()));
}

TEST_CASE(
    "cache: Prefetch reads runs of pages in one read each, keeps resident pages, and "
    "leaves bad pages to Fetch",
    "[cache]") {
  TestDb db(Opts(256), /*init_pip=*/false);
  for (PageNo p = 2; p < 60; ++p) MakePage(db.cache(), p, p);
  REQUIRE_OK(db.cache().FlushAll());
  std::string p40 = db.DiskPage(40);
  p40[1000] ^= 0x40;
  REQUIRE_OK(db.file().Write(uint64_t{40} * kPs, p40.data(), p40.size()));
  db.Reopen();
  BufferCache& c = db.cache();
  RewritePage(c, 5, 555);  // resident and dirty: a prefetch must not replace it

  const uint64_t calls = db.file().read_calls();
  const uint64_t reads = c.counters().reads;
  // Two runs (2..21 without the resident 5, and 30..31), out of order and with a duplicate.
  std::vector<PageNo> want = {31, 30};
  for (PageNo p = 2; p < 22; ++p) want.push_back(p);
  want.push_back(30);
  c.Prefetch(want);
  CHECK(db.file().read_calls() - calls == 3);  // 2..4, 6..21, 30..31
  CHECK(c.counters().reads - reads == 21);
  for (PageNo p : want) {
    INFO("page " << p);
    REQUIRE(ReadCheck(c, p, p == 5 ? 555 : p) == "");
  }
  CHECK(c.counters().reads - reads == 21);  // every Fetch above hit
  CHECK(db.file().read_calls() - calls == 3);

  // A run with a corrupt page: the others load, the bad one is left for Fetch to report.
  std::vector<PageNo> run = {38, 39, 40, 41, 42};
  c.Prefetch(run);
  for (PageNo p : {38, 39, 41, 42}) CHECK(ReadCheck(c, p, p) == "");
  absl::StatusOr<PageRef> bad = c.Fetch(40, LatchMode::kShared);
  CHECK(absl::IsDataLoss(bad.status()));
  // Past the end of the file: nothing loads, Fetch reports it, no frame is lost.
  std::vector<PageNo> past = {1000, 1001, 1002};
  c.Prefetch(past);
  CHECK(absl::IsOutOfRange(c.Fetch(1001, LatchMode::kShared).status()));
  // At most an eighth of the cache per call.
  db.Reopen();
  std::vector<PageNo> many;
  for (PageNo p = 2; p < 60; ++p) many.push_back(p);
  const uint64_t before = db.cache().counters().reads;
  db.cache().Prefetch(many);
  CHECK(db.cache().counters().reads - before == 256 / 8);
}

TEST_CASE("cache: Prefetch that fails or finds no clean frame loses no frame", "[cache]") {
  TestDb db(Opts(16), /*init_pip=*/false);
  for (PageNo p = 2; p < 40; ++p) MakePage(db.cache(), p, p);
  REQUIRE_OK(db.cache().FlushAll());
  std::string p20 = db.DiskPage(20);
  p20[2000] ^= 0x01;
  REQUIRE_OK(db.file().Write(uint64_t{20} * kPs, p20.data(), p20.size()));
  db.Reopen();
  BufferCache& c = db.cache();
  for (int round = 0; round < 30; ++round) {
    std::vector<PageNo> run = {static_cast<PageNo>(19 + round % 3), 20, 1000, 1001};
    c.Prefetch(run);
    // Every frame dirty: nothing clean to read into, and Prefetch must not wait for cleaning.
    if (round % 10 == 9) {
      for (PageNo p = 100; p < 116; ++p) MakePage(c, p, p);
      std::vector<PageNo> some = {2, 3, 4};
      c.Prefetch(some);
      REQUIRE_OK(c.FlushAll());
    }
  }
  CHECK(absl::IsDataLoss(c.Fetch(20, LatchMode::kShared).status()));
  std::vector<PageRef> held;  // all 16 frames can still be held at once
  for (PageNo p = 200; p < 216; ++p) held.push_back(VALUE_OR_FAIL(c.FetchNew(p)));
}

TEST_CASE("cache: counters count exactly what happened, per database and per thread sink",
          "[cache]") {
  TestDb db(Opts(16), /*init_pip=*/false);
  BufferCache& c = db.cache();
  util::PageCounters txn_sink, stmt_sink;
  {
    util::ScopedCounterSinks scope({&txn_sink, &stmt_sink});
    {
      PageRef r = VALUE_OR_FAIL(c.FetchNew(3));  // fetch 1
      FillPage(r.data(), kPs, 3, 3);
      r.Mark(7);  // mark 1
      r.Mark(7);  // mark 2
    }
    { PageRef r = VALUE_OR_FAIL(c.Fetch(3, LatchMode::kShared)); }  // fetch 2, a hit
    REQUIRE_OK(c.FlushAll());                                       // write 1
    REQUIRE_OK(c.FlushAll());                                       // nothing
    c.DiscardAll();
    { PageRef r = VALUE_OR_FAIL(c.Fetch(3, LatchMode::kShared)); }         // fetch 3, read 1
    CHECK(absl::IsOutOfRange(c.Fetch(999, LatchMode::kShared).status()));  // fetch 4, no read
  }
  const util::PageCounters db_total = c.counters();
  for (const util::PageCounters& k : {db_total, txn_sink, stmt_sink}) {
    CHECK(k.fetches == 4);
    CHECK(k.marks == 2);
    CHECK(k.reads == 1);
    CHECK(k.writes == 1);
  }

  // Another thread with its own sinks: its work lands there and in the database totals only.
  util::PageCounters other;
  std::thread t([&] {
    util::ScopedCounterSinks scope({&other, nullptr});
    absl::StatusOr<PageRef> r = c.FetchNew(4);
    if (!r.ok()) return;
    FillPage(r->data(), kPs, 4, 4);
    r->Mark(8);
    r->Release();
    absl::StatusOr<PageRef> again = c.Fetch(4, LatchMode::kExclusive);
    (void)again;
  });
  t.join();
  CHECK(other.fetches == 2);
  CHECK(other.marks == 1);
  CHECK(other.reads == 0);
  CHECK(other.writes == 0);
  CHECK(txn_sink.fetches == 4);  // unchanged
  CHECK(stmt_sink.marks == 2);
  CHECK(c.counters().fetches == 6);
  CHECK(c.counters().marks == 3);

  // Outside the scope this thread counts nowhere but the database totals.
  { PageRef r = VALUE_OR_FAIL(c.Fetch(4, LatchMode::kShared)); }
  CHECK(txn_sink.fetches == 4);
  CHECK(c.counters().fetches == 7);
  // Statement sink only, nested inside a transaction sink: both see the statement's work.
  util::PageCounters t2, s2;
  {
    util::ScopedCounterSinks outer({&t2, nullptr});
    { PageRef r = VALUE_OR_FAIL(c.Fetch(4, LatchMode::kShared)); }
    {
      util::ScopedCounterSinks inner({&t2, &s2});
      { PageRef r = VALUE_OR_FAIL(c.Fetch(3, LatchMode::kShared)); }
    }
  }
  CHECK(t2.fetches == 2);
  CHECK(s2.fetches == 1);
}

TEST_CASE("cache: FlushTxns writes the transaction's pages and their dirty prerequisites only",
          "[cache]") {
  for (bool forced : {false, true}) {
    INFO("forced_writes " << forced);
    TestDb db(Opts(64, forced), /*init_pip=*/false);
    BufferCache& c = db.cache();
    MakePage(c, 3, 3, /*txn=*/1);  // X: txn 1
    MakePage(c, 4, 4, /*txn=*/2);  // Y: txn 2 only
    MakePage(c, 5, 5, /*txn=*/2);  // Z: txn 2, a prerequisite of X
    MakePage(c, 6, 6, /*txn=*/0);  // W: the engine (written by any transaction's flush)
    MakePage(c, 7, 7, /*txn=*/2);  // V: txn 2 and txn 1
    MakePage(c, 8, 8, /*txn=*/3);  // U: txn 3
    {
      PageRef x = VALUE_OR_FAIL(c.Fetch(3, LatchMode::kExclusive));
      REQUIRE_OK(c.AddPrecedence(x, 5));
      x.Mark(1);
    }
    {
      PageRef v = VALUE_OR_FAIL(c.Fetch(7, LatchMode::kExclusive));
      v.Mark(1);
    }
    db.file().ClearEvents();

    REQUIRE_OK(c.FlushTxns(std::vector<uint64_t>{1}));
    std::vector<testing::IoEvent> ev = db.file().events();
    INFO(testing::Describe(ev));
    CHECK(WritesOf(ev, 3) == 1);
    CHECK(WritesOf(ev, 5) == 1);
    CHECK(WritesOf(ev, 7) == 1);
    CHECK(WritesOf(ev, 6) == 1);
    CHECK(WritesOf(ev, 4) == 0);
    CHECK(WritesOf(ev, 8) == 0);
    CHECK(CheckBefore(ev, 5, 3, forced) == "");
    if (forced) {
      REQUIRE(!ev.empty());
      CHECK(ev.back().sync);  // durable when FlushTxns returns
    }

    db.file().ClearEvents();
    REQUIRE_OK(c.FlushTxns(std::vector<uint64_t>{2, 3}));
    ev = db.file().events();
    CHECK(WritesOf(ev, 4) == 1);
    CHECK(WritesOf(ev, 8) == 1);
    CHECK(WritesOf(ev, 3) + WritesOf(ev, 5) + WritesOf(ev, 6) + WritesOf(ev, 7) == 0);
    CHECK(c.DirtyCount() == 0);
  }
}

TEST_CASE(
    "cache: precedence: A is written before B by FlushAll and FlushTxns, along chains, "
    "with a sync between levels",
    "[cache]") {
  for (bool forced : {false, true}) {
    for (bool by_txn : {false, true}) {
      INFO("forced_writes " << forced << ", FlushTxns " << by_txn);
      TestDb db(Opts(64, forced), /*init_pip=*/false);
      BufferCache& c = db.cache();
      // C (page 10) is created first, then B (11), then A (12): C after B after A.
      MakePage(c, 10, 1, 0);
      MakePage(c, 11, 1, 0);
      MakePage(c, 12, 1, 0);
      {
        PageRef b = VALUE_OR_FAIL(c.Fetch(11, LatchMode::kExclusive));
        REQUIRE_OK(c.AddPrecedence(b, 12));
        REQUIRE_OK(c.AddPrecedence(b, 11));  // self edge: ignored
        b.Mark(0);
      }
      {
        PageRef cc = VALUE_OR_FAIL(c.Fetch(10, LatchMode::kExclusive));
        REQUIRE_OK(c.AddPrecedence(cc, 11));
        cc.Mark(by_txn ? 9 : 0);
      }
      db.file().ClearEvents();
      if (by_txn) REQUIRE_OK(c.FlushTxns(std::vector<uint64_t>{9}));
      else REQUIRE_OK(c.FlushAll());
      const std::vector<testing::IoEvent> ev = db.file().events();
      INFO(testing::Describe(ev));
      CHECK(CheckBefore(ev, 12, 11, forced) == "");
      CHECK(CheckBefore(ev, 11, 10, forced) == "");
      CHECK(WritesOf(ev, 10) == 1);
      CHECK(WritesOf(ev, 11) == 1);
      CHECK(WritesOf(ev, 12) == 1);
      CHECK(c.DirtyCount() == 0);
    }
  }
}

TEST_CASE("cache: precedence over a random DAG is respected by FlushAll", "[cache]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 5; ++trial) {
    const bool forced = trial % 2 == 1;
    TestDb db(Opts(128, forced), /*init_pip=*/false);
    BufferCache& c = db.cache();
    constexpr PageNo kN = 40;
    for (PageNo p = 2; p < 2 + kN; ++p) MakePage(c, p, p, p % 5);
    // Edges only from a lower page number to a higher one ("lower before higher"): no cycles.
    std::vector<std::pair<PageNo, PageNo>> edges;
    for (PageNo b = 3; b < 2 + kN; ++b) {
      PageRef rb = VALUE_OR_FAIL(c.Fetch(b, LatchMode::kExclusive));
      for (int k = 0; k < 3; ++k) {
        const PageNo a = 2 + static_cast<PageNo>(rng() % (b - 2));
        REQUIRE_OK(c.AddPrecedence(rb, a));
        edges.emplace_back(a, b);
      }
      rb.Mark(b % 5);
    }
    db.file().ClearEvents();
    if (trial < 3) {
      REQUIRE_OK(c.FlushAll());
    } else {  // by transaction, in two rounds: prerequisites of any transaction come along
      REQUIRE_OK(c.FlushTxns(std::vector<uint64_t>{2}));
      REQUIRE_OK(c.FlushTxns(std::vector<uint64_t>{0, 1, 3, 4}));
    }
    const std::vector<testing::IoEvent> ev = db.file().events();
    INFO("trial " << trial << ": " << testing::Describe(ev));
    for (auto [a, b] : edges) {
      INFO("edge " << a << " before " << b);
      CHECK(CheckBefore(ev, a, b, forced) == "");
    }
    for (PageNo p = 2; p < 2 + kN; ++p) CHECK(WritesOf(ev, p) == 1);
  }
}

TEST_CASE("cache: precedence holds when pages are evicted from a tiny cache", "[cache]") {
  for (bool forced : {false, true}) {
    INFO("forced_writes " << forced);
    TestDb db(Opts(16, forced), /*init_pip=*/false);
    BufferCache& c = db.cache();
    // A chain 2 < 3 < ... < 61: each new page must follow the previous one, and the cache holds
    // only 16 of them, so eviction has to write chains bottom-up.
    MakePage(c, 2, 2);
    for (PageNo p = 3; p < 62; ++p) {
      PageRef r = VALUE_OR_FAIL(c.FetchNew(p));
      FillPage(r.data(), kPs, p, p);
      REQUIRE_OK(c.AddPrecedence(r, p - 1));
      r.Mark(1);
    }
    REQUIRE_OK(c.FlushAll());
    const std::vector<testing::IoEvent> ev = db.file().events();
    INFO(testing::Describe(ev));
    for (PageNo p = 3; p < 62; ++p) {
      INFO("page " << p);
      CHECK(WritesOf(ev, p) == 1);
      CHECK(CheckBefore(ev, p - 1, p, forced) == "");
    }
  }
}

TEST_CASE("cache: eviction succeeds when every dirty page depends on one hot page", "[cache]") {
  for (bool forced : {false, true}) {
    INFO("forced_writes " << forced);
    TestDb db(Opts(16, forced), /*init_pip=*/false);
    BufferCache& c = db.cache();
    constexpr PageNo kHot = 2;
    MakePage(c, kHot, 0);
    std::map<PageNo, uint64_t> hot_version_at_link;
    for (PageNo p = 3; p < 203; ++p) {
      uint64_t v;
      {  // the hot page changes every time (a pointer page gaining a slot, say)
        PageRef h = VALUE_OR_FAIL(c.Fetch(kHot, LatchMode::kExclusive));
        v = testing::GetStamp(h.data()) + 1;
        testing::SetStamp(h.data(), v);
        h.Mark(1);
      }
      // ... and the new page must follow the hot page's current version.
      absl::StatusOr<PageRef> r = c.FetchNew(p);
      REQUIRE(r.ok());  // not ResourceExhausted
      FillPage(r->data(), kPs, p, v);
      REQUIRE_OK(c.AddPrecedence(*r, kHot));
      r->Mark(1);
      hot_version_at_link[p] = v;
    }
    REQUIRE_OK(c.FlushAll());
    const std::vector<testing::IoEvent> ev = db.file().events();
    INFO(testing::Describe(ev));
    for (auto [p, v] : hot_version_at_link) {
      INFO("page " << p << " needs the hot page at version " << v);
      CHECK(WritesOf(ev, p) == 1);
      CHECK(CheckBefore(ev, kHot, p, forced, 0,
                        [v = v](const testing::IoEvent& e) { return e.stamp >= v; }) == "");
    }
    db.Reopen();
    CHECK(ReadCheck(db.cache(), 150, hot_version_at_link[150]) == "");
  }
}

TEST_CASE(
    "cache: with forced writes, a page whose prerequisite was written by an eviction "
    "follows it only after a sync",
    "[cache]") {
  TestDb db(Opts(16, /*forced=*/true), /*init_pip=*/false);
  BufferCache& c = db.cache();
  MakePage(c, 2, 2);  // A
  {
    PageRef b = VALUE_OR_FAIL(c.FetchNew(3));  // B: after A
    FillPage(b.data(), kPs, 3, 3);
    REQUIRE_OK(c.AddPrecedence(b, 2));
    b.Mark(1);
    // Push A out while B is pinned: A (the oldest dirty page) has no prerequisites, so eviction
    // simply writes it.
    for (PageNo p = 100; p < 140; ++p) MakePage(c, p, p);
  }
  std::vector<testing::IoEvent> ev = db.file().events();
  INFO(testing::Describe(ev));
  REQUIRE(WritesOf(ev, 2) == 1);
  REQUIRE(WritesOf(ev, 3) == 0);
  REQUIRE_OK(c.FlushAll());  // writes B
  ev = db.file().events();
  INFO(testing::Describe(ev));
  CHECK(CheckBefore(ev, 2, 3, /*need_sync=*/true) == "");
}

TEST_CASE(
    "cache: a frame reused while a flush waits between levels is not written out of "
    "order",
    "[cache]") {
  TestDb db(Opts(16, /*forced=*/true), /*init_pip=*/false);
  BufferCache& c = db.cache();
  constexpr PageNo kA = 2, kB = 3, kQ = 20, kR = 21;
  // A flush waiting between levels must not write whatever page a frame it chose holds by then:
  // here the frame is reused for a new page that must follow one not written yet.
  MakePage(c, kA, 1);
  {
    PageRef b = VALUE_OR_FAIL(c.FetchNew(kB));
    FillPage(b.data(), kPs, kB, 1);
    REQUIRE_OK(c.AddPrecedence(b, kA));
    b.Mark(1);
  }
  MakePage(c, kR, 1);  // R: resident, written, clean
  REQUIRE_OK(c.FlushPages(std::vector<PageNo>{kR}));
  // Pin 13 more pages: with A, B and R that is all 16 frames.
  std::vector<PageRef> pinned;
  for (PageNo p = 100; p < 113; ++p) pinned.push_back(VALUE_OR_FAIL(c.FetchNew(p)));

  // FlushAll writes A (level 0), syncs, then B (level 1). During that sync another "thread"
  // (here: the hook, on the flushing thread, holding nothing) evicts B and reuses its frame for
  // a new page Q that must follow R.
  std::string hook_error;
  bool hook_ran = false;
  db.file().SetSyncHook([&] {
    if (hook_ran || c.DirtyCount() != 1) return;  // only the sync between A and B
    hook_ran = true;
    absl::StatusOr<PageRef> a = c.Fetch(kA, LatchMode::kShared);  // keep A's frame
    absl::StatusOr<PageRef> r = c.Fetch(kR, LatchMode::kExclusive);
    absl::StatusOr<PageRef> q = c.FetchNew(kQ);  // the only victim: B (written first)
    if (!a.ok() || !r.ok() || !q.ok()) {
      hook_error = "hook: fetch failed";
      return;
    }
    testing::SetStamp(r->data(), 2);
    r->Mark(5);
    FillPage(q->data(), kPs, kQ, 2);
    if (!c.AddPrecedence(*q, kR).ok()) hook_error = "hook: AddPrecedence failed";
    q->Mark(5);
  });
  REQUIRE_OK(c.FlushAll());
  db.file().SetSyncHook(nullptr);
  REQUIRE(hook_ran);
  REQUIRE(hook_error == "");
  std::vector<testing::IoEvent> ev = db.file().events();
  INFO(testing::Describe(ev));
  CHECK(CheckBefore(ev, kA, kB, true) == "");
  // Q may be written by that flush only after R's new version (and a sync).
  if (testing::FirstWrite(ev, kQ) >= 0) {
    CHECK(CheckBefore(ev, kR, kQ, true, 0,
                      [](const testing::IoEvent& e) { return e.stamp == 2; }) == "");
  }
  pinned.clear();
  REQUIRE_OK(c.FlushAll());
  ev = db.file().events();
  CHECK(CheckBefore(ev, kR, kQ, true, 0, [](const testing::IoEvent& e) { return e.stamp == 2; }) ==
        "");
}

TEST_CASE("cache: a precedence cycle is broken by writing at once, in the right order", "[cache]") {
  for (bool forced : {false, true}) {
    INFO("forced_writes " << forced);
    TestDb db(Opts(32, forced), /*init_pip=*/false);
    BufferCache& c = db.cache();
    constexpr PageNo kA = 20, kB = 21;
    MakePage(c, kA, 1);
    MakePage(c, kB, 1);
    {  // A before B
      PageRef b = VALUE_OR_FAIL(c.Fetch(kB, LatchMode::kExclusive));
      REQUIRE_OK(c.AddPrecedence(b, kA));
      FillPage(b.data(), kPs, kB, 2);
      b.Mark(1);
    }
    db.file().ClearEvents();
    {  // now B before A's next change: a cycle, so A (as it is) and then B are written now
      PageRef a = VALUE_OR_FAIL(c.Fetch(kA, LatchMode::kExclusive));
      REQUIRE_OK(c.AddPrecedence(a, kB));
      const std::vector<testing::IoEvent> ev = db.file().events();
      INFO(testing::Describe(ev));
      CHECK(WritesOf(ev, kA) == 1);
      CHECK(WritesOf(ev, kB) == 1);
      CHECK(CheckBefore(ev, kA, kB, forced) == "");
      if (forced) {
        REQUIRE(!ev.empty());
        CHECK(ev.back().sync);
      }
      FillPage(a.data(), kPs, kA, 3);
      a.Mark(1);
    }
    REQUIRE_OK(c.FlushAll());
    const std::vector<testing::IoEvent> ev = db.file().events();
    INFO(testing::Describe(ev));
    // A's new version goes out after B's.
    const int a3 =
        testing::FirstWrite(ev, kA, 0, [](const testing::IoEvent& e) { return e.stamp == 3; });
    const int b2 = testing::FirstWrite(ev, kB);
    REQUIRE(a3 >= 0);
    REQUIRE(b2 >= 0);
    CHECK(ev[b2].step < ev[a3].step);
    db.Reopen();
    CHECK(ReadCheck(db.cache(), kA, 3) == "");
    CHECK(ReadCheck(db.cache(), kB, 2) == "");
  }
}

TEST_CASE("cache: every frame pinned -> ResourceExhausted, not a hang", "[cache]") {
  TestDb db(Opts(16), /*init_pip=*/false);
  BufferCache& c = db.cache();
  for (PageNo p = 2; p < 30; ++p) MakePage(c, p, p);
  REQUIRE_OK(c.FlushAll());
  std::vector<PageRef> held;
  for (PageNo p = 2; p < 18; ++p) {
    held.push_back(VALUE_OR_FAIL(c.Fetch(p, p % 2 ? LatchMode::kShared : LatchMode::kExclusive)));
  }
  absl::StatusOr<PageRef> r = c.Fetch(20, LatchMode::kShared);
  CHECK(absl::IsResourceExhausted(r.status()));
  CHECK(Contains(r.status().message(), "16 frames (16 pinned, 0 dirty"));
  CHECK(absl::IsResourceExhausted(c.FetchNew(40).status()));
  // Resident pages are still reachable (a shared page can be fetched again).
  { PageRef again = VALUE_OR_FAIL(c.Fetch(3, LatchMode::kShared)); }
  held.pop_back();
  CHECK(ReadCheck(c, 20, 20) == "");
  held.clear();
  for (PageNo p = 2; p < 30; ++p) CHECK(ReadCheck(c, p, p) == "");
}

TEST_CASE("cache: an eviction waits for the frames another thread is writing instead of failing",
          "[cache]") {
  // Thread B flushes and its write stalls (a slow disk, or a presync). Thread A misses meanwhile
  // and finds no victim: either every frame is in B's batch, or B's batch holds only a hot page
  // that every other dirty frame depends on (as fresh pages depend on their PIP). The pins of a
  // write come back without B waiting for anything A holds, so A must wait for them, not report
  // "no evictable page" (the intermittent failure of the SIGKILL BLOB crash test in CI).
  const bool hot_only = GENERATE(false, true);
  CAPTURE(hot_only);
  TestDb db(Opts(16), /*init_pip=*/false);
  BufferCache& c = db.cache();
  constexpr PageNo kHot = 2;
  for (PageNo p = 2; p < 30; ++p) MakePage(c, p, p);
  REQUIRE_OK(c.FlushAll());
  std::vector<std::pair<PageNo, uint64_t>> expect;
  if (!hot_only) {
    for (PageNo p = 2; p < 18; ++p) {
      RewritePage(c, p, 100 + p);
      expect.emplace_back(p, 100 + p);
    }
  } else {
    RewritePage(c, kHot, 100 + kHot);
    expect.emplace_back(kHot, 100 + kHot);
    for (PageNo p = 40; p < 55; ++p) {  // the 15 other frames: fresh pages behind the hot one
      PageRef r = VALUE_OR_FAIL(c.FetchNew(p, cache::NewPage::kUnlinked));
      FillPage(r.data(), kPs, p, p);
      REQUIRE_OK(c.AddPrecedence(r, kHot));
      r.Mark(1);
      expect.emplace_back(p, p);
    }
  }
  REQUIRE(c.DirtyCount() == 16);
  std::atomic<bool> a_done{false};
  absl::Status a_status;
  std::string a_check;
  std::thread a;
  db.file().SetWriteHookOnce([&] {
    // Inside B's write. Start A and hold the write until A has found no victim and waited (or,
    // without the wait, failed).
    a = std::thread([&] {
      absl::StatusOr<PageRef> r = c.Fetch(20, LatchMode::kShared);
      a_status = r.status();
      if (r.ok()) a_check = testing::CheckPage(r->data(), kPs, 20, 20);
      a_done = true;
    });
    while (c.EvictionWaits() == 0 && !a_done) std::this_thread::yield();
  });
  if (hot_only) {
    const PageNo hot[] = {kHot};
    REQUIRE_OK(c.FlushPages(hot));  // thread B
  } else {
    REQUIRE_OK(c.FlushAll());
  }
  a.join();
  INFO(a_status.ToString());
  CHECK(a_status.ok());
  CHECK(a_check == "");
  CHECK(c.EvictionWaits() > 0);
  for (auto [p, stamp] : expect) CHECK(ReadCheck(c, p, stamp) == "");
}

TEST_CASE(
    "cache: when the disk fails and no frame can be evicted, the error is the disk's, "
    "not \"all pinned\"",
    "[cache]") {
  // Every dirty frame depends on one hot page that stays pinned, so the only way to free a frame
  // is the cleaner writing the hot page first. When those writes fail, the evictor must report
  // the I/O error that stopped it: "all pinned" would send the user looking for a pin leak.
  testing::TempDir dir;
  REQUIRE(dir.ok());
  io::FileOptions fo;
  fo.mode = io::OpenMode::kCreateNew;
  auto f = io::OpenPosixFile(dir.File("db.edb"), fo);
  REQUIRE(f.ok());
  io::FaultFile file(std::move(*f));
  const bool fail = GENERATE(false, true);
  CAPTURE(fail);
  BufferCache c(&file, Opts(16, /*forced=*/true));
  constexpr PageNo kHot = 2;
  MakePage(c, kHot, 1);
  PageRef hot = VALUE_OR_FAIL(c.Fetch(kHot, LatchMode::kShared));
  for (PageNo p = 3; p < 18; ++p) {  // the 15 other frames
    PageRef r = VALUE_OR_FAIL(c.FetchNew(p));
    FillPage(r.data(), kPs, p, p);
    REQUIRE_OK(c.AddPrecedence(r, kHot));
    r.Mark(1);
  }
  if (fail) file.FailWriteAfter(1, EIO, /*sticky=*/true);
  absl::StatusOr<PageRef> r = c.FetchNew(40);
  if (!fail) {  // the cleaner writes the pinned hot page (shared), then its dependants
    REQUIRE_OK(r.status());
    return;
  }
  INFO(r.status().ToString());
  REQUIRE_FALSE(r.ok());
  CHECK_FALSE(absl::IsResourceExhausted(r.status()));
  CHECK(Contains(r.status().message(), std::strerror(EIO)));
  // Nothing was lost: once the disk works again, every page reaches it.
  file.FailWriteAfter(0, 0);
  hot.Release();
  REQUIRE_OK(c.FlushAll());
  CHECK(ReadCheck(c, kHot, 1) == "");
  for (PageNo p = 3; p < 18; ++p) CHECK(ReadCheck(c, p, p) == "");
}

TEST_CASE("cache: 4 threads latching random pages through a 32-frame cache", "[cache]") {
  TestDb db(Opts(32), /*init_pip=*/false);
  constexpr PageNo kFirst = 2, kPages = 200;
  constexpr size_t kCounterOff = 64;
  for (PageNo p = kFirst; p < kFirst + kPages; ++p) {
    PageRef r = VALUE_OR_FAIL(db.cache().FetchNew(p));
    page::InitPage(r.data(), kPs, page::PageType::kData, p);
    testing::SetStamp(r.data(), p);
    r.Mark(0);
  }
  REQUIRE_OK(db.cache().FlushAll());
  BufferCache& c = db.cache();

  constexpr int kThreads = 4, kOps = 2500;
  std::atomic<uint64_t> increments{0};
  std::mutex err_mu;
  std::vector<std::string> errors;
  auto fail = [&](std::string e) {
    std::lock_guard<std::mutex> g(err_mu);
    if (errors.size() < 10) errors.push_back(std::move(e));
  };
  auto bump = [&](PageRef& r) {
    uint8_t* d = r.data();
    util::Put64(d + kCounterOff, util::Get64(d + kCounterOff) + 1);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(1000 + t);
      uint64_t mine = 0;
      for (int i = 0; i < kOps; ++i) {
        const PageNo p = kFirst + rng() % kPages;
        const int what = static_cast<int>(rng() % 100);
        if (what < 50) {
          absl::StatusOr<PageRef> r = c.Fetch(p, LatchMode::kShared);
          if (!r.ok()) {
            fail(std::string(r.status().ToString()));
            continue;
          }
          if (page::GetPageNo(r->data()) != p || testing::GetStamp(r->data()) != p) {
            fail(absl::StrCat("page ", p, " holds another page's bytes"));
          }
        } else if (what < 90) {
          absl::StatusOr<PageRef> r = c.Fetch(p, LatchMode::kExclusive);
          if (!r.ok()) {
            fail(std::string(r.status().ToString()));
            continue;
          }
          bump(*r);
          r->Mark(t + 1);
          ++mine;
        } else if (what < 99 && !kTsan) {  // two pages, in page order
          const PageNo q = kFirst + rng() % kPages;
          if (q == p) continue;
          absl::StatusOr<PageRef> a = c.Fetch(std::min(p, q), LatchMode::kExclusive);
          if (!a.ok()) {
            fail(std::string(a.status().ToString()));
            continue;
          }
          absl::StatusOr<PageRef> b = c.Fetch(std::max(p, q), LatchMode::kExclusive);
          if (!b.ok()) {
            fail(std::string(b.status().ToString()));
            continue;
          }
          bump(*a);
          bump(*b);
          a->Mark(t + 1);
          b->Mark(t + 1);
          mine += 2;
        } else {  // a commit-style flush, holding nothing
          const uint64_t txn = t + 1;
          if (absl::Status s = c.FlushTxns(std::span<const uint64_t>(&txn, 1)); !s.ok()) {
            fail(std::string(s.ToString()));
          }
        }
      }
      increments += mine;
    });
  }
  for (auto& th : threads) th.join();
  INFO((errors.empty() ? std::string() : errors[0]));
  REQUIRE(errors.empty());
  REQUIRE(increments.load() > 0);

  auto sum = [&](BufferCache& cc) {
    uint64_t s = 0;
    for (PageNo p = kFirst; p < kFirst + kPages; ++p) {
      PageRef r = VALUE_OR_FAIL(cc.Fetch(p, LatchMode::kShared));
      s += util::Get64(r.data() + kCounterOff);
    }
    return s;
  };
  CHECK(sum(c) == increments.load());
  REQUIRE_OK(c.FlushAll());
  db.Reopen();
  CHECK(sum(db.cache()) == increments.load());
}

// ---------------------------------------------------------------- PageSpace

// The first page PageSpace hands out: after the header, PIP 0 and the doublewrite area.
constexpr PageNo kFirstFree = page::DoublewriteEnd(kPs);
constexpr PageNo AlignUp(PageNo p, PageNo a) { return (p + a - 1) / a * a; }

TEST_CASE("page space: Allocate gives distinct zeroed pages, Free and IsFree", "[cache]") {
  TestDb db(Opts(64));
  BufferCache& c = db.cache();
  PageSpace space(&c, 2);
  CHECK(space.page_count() == 2);
  const PageNo b = kFirstFree;
  std::set<PageNo> got;
  for (int i = 0; i < 50; ++i) {
    PageRef r = VALUE_OR_FAIL(space.Allocate(1));
    CHECK(r.exclusive());
    CHECK(std::all_of(r.data(), r.data() + kPs, [](uint8_t x) { return x == 0; }));
    CHECK(r.page_no() >= b);
    CHECK(got.insert(r.page_no()).second);
    FillPage(r.data(), kPs, r.page_no(), 1);
    r.Mark(1);
  }
  CHECK(got.size() == 50);
  CHECK(*got.begin() == b);
  CHECK(*got.rbegin() == b + 49);  // so exactly pages b..b+49
  CHECK(space.page_count() == b + 50);
  for (PageNo p : got) CHECK(!VALUE_OR_FAIL(space.IsFree(p)));
  CHECK(!VALUE_OR_FAIL(space.IsFree(0)));
  CHECK(!VALUE_OR_FAIL(space.IsFree(1)));
  CHECK(!VALUE_OR_FAIL(space.IsFree(page::kDoublewriteFirst)));
  CHECK(!VALUE_OR_FAIL(space.IsFree(b - 1)));
  CHECK(VALUE_OR_FAIL(space.IsFree(b + 50)));  // beyond page_count

  REQUIRE_OK(space.Free(b + 28, 1));
  REQUIRE_OK(space.Free(b + 8, 1));
  CHECK(VALUE_OR_FAIL(space.IsFree(b + 8)));
  CHECK(VALUE_OR_FAIL(space.IsFree(b + 28)));
  CHECK(!VALUE_OR_FAIL(space.IsFree(b + 9)));
  CHECK(VALUE_OR_FAIL(space.Allocate(1)).page_no() == b + 8);  // lowest free first
  CHECK(VALUE_OR_FAIL(space.Allocate(1)).page_no() == b + 28);
  CHECK(VALUE_OR_FAIL(space.Allocate(1)).page_no() == b + 50);
  // Never allocated, so never freed: the header, PIP 0, the doublewrite area, pages past the end.
  for (PageNo p : {PageNo{0}, PageNo{1}, page::kDoublewriteFirst, b - 1, b + 500}) {
    INFO("page " << p);
    CHECK(absl::IsInvalidArgument(space.Free(p, 1)));
  }
  CHECK(!VALUE_OR_FAIL(space.IsFree(b - 1)));

  // The PIP state survives a flush and a reopen.
  REQUIRE_OK(space.Free(b + 18, 1));
  REQUIRE_OK(c.FlushAll());
  const uint32_t count = space.page_count();
  db.Reopen();
  PageSpace again(&db.cache(), count);
  CHECK(VALUE_OR_FAIL(again.IsFree(b + 18)));
  CHECK(!VALUE_OR_FAIL(again.IsFree(b + 19)));
  CHECK(VALUE_OR_FAIL(again.Allocate(1)).page_no() == b + 18);
  CHECK(VALUE_OR_FAIL(again.Allocate(1)).page_no() == count);
}

TEST_CASE(
    "page space: AllocateRun gives aligned runs of free pages, single pages fill the "
    "holes below, the PIP state survives a reopen",
    "[cache]") {
  TestDb db(Opts(256));
  BufferCache& c = db.cache();
  PageSpace space(&c, 2);
  const PageNo b = kFirstFree;
  for (int i = 0; i < 5; ++i) {  // pages b..b+4
    PageRef r = VALUE_OR_FAIL(space.Allocate(1));
    r.Mark(1);
  }
  const PageNo run = VALUE_OR_FAIL(space.AllocateRun(1, 16));
  CHECK(run == AlignUp(b + 5, 16));  // the first free aligned run
  CHECK(space.page_count() == run + 16);
  for (PageNo p = run; p < run + 16; ++p) {
    CHECK_FALSE(VALUE_OR_FAIL(space.IsFree(p)));
    PageRef r = VALUE_OR_FAIL(space.Claim(p));
    CHECK(r.exclusive());
    CHECK(std::all_of(r.data(), r.data() + kPs, [](uint8_t x) { return x == 0; }));
    FillPage(r.data(), kPs, p, 1);
    r.Mark(1);
  }
  // Single pages come from the hole below the run, then past it.
  std::vector<PageNo> want;
  for (PageNo p = b + 5; p < run && want.size() < 10; ++p) want.push_back(p);
  for (PageNo p = run + 16; want.size() < 10; ++p) want.push_back(p);
  std::vector<PageNo> singles;
  for (int i = 0; i < 10; ++i) {
    PageRef r = VALUE_OR_FAIL(space.Allocate(1));
    singles.push_back(r.page_no());
    r.Mark(1);
  }
  CHECK(singles == want);
  const PageNo end_of_singles = want.back() + 1;
  // A run skips a group with one page in use, and a freed page does not make a run.
  CHECK(VALUE_OR_FAIL(space.AllocateRun(1, 32)) == AlignUp(end_of_singles, 32));
  REQUIRE_OK(space.Free(run + 4, 1));
  const PageNo run8 = AlignUp(end_of_singles, 8);
  CHECK(VALUE_OR_FAIL(space.AllocateRun(1, 8)) == run8);
  CHECK(VALUE_OR_FAIL(space.Allocate(1)).page_no() == run + 4);
  CHECK(absl::IsInvalidArgument(space.AllocateRun(1, 12).status()));
  CHECK(absl::IsInvalidArgument(space.AllocateRun(1, 0).status()));
  // Runs past the first PIP's range come from a new PIP, and stay aligned.
  const uint32_t per_pip = page::PagesPerPip(kPs);
  for (;;) {
    const PageNo r = VALUE_OR_FAIL(space.AllocateRun(1, 64));
    CHECK(r % 64 == 0);
    if (r > per_pip) {
      CHECK(r == per_pip + 64);  // the new PIP is the first page of its range
      break;
    }
  }
  REQUIRE_OK(c.FlushAll());
  const uint32_t count = space.page_count();
  db.Reopen();
  PageSpace again(&db.cache(), count);
  CHECK_FALSE(VALUE_OR_FAIL(again.IsFree(run + 15)));
  CHECK_FALSE(VALUE_OR_FAIL(again.IsFree(per_pip + 64 + 63)));
  CHECK(VALUE_OR_FAIL(again.IsFree(per_pip + 1)));
  // The group of 8 after run8, below the 32-page run, was left free.
  CHECK(VALUE_OR_FAIL(again.AllocateRun(1, 8)) == run8 + 8);
}

TEST_CASE(
    "page space: a page allocated from a PIP goes out no earlier than the PIP, and a page "
    "linking to it only after both (and a sync)",
    "[cache]") {
  for (bool forced : {false, true}) {
    TestDb db(Opts(64, forced));
    BufferCache& c = db.cache();
    PageSpace space(&c, 2);
    PageNo link;
    {
      PageRef l = VALUE_OR_FAIL(space.Allocate(4));
      link = l.page_no();
      FillPage(l.data(), kPs, link, 1);
      l.Mark(4);
    }
    REQUIRE_OK(c.FlushAll());  // the linking page is on disk (reachable, say)
    db.file().ClearEvents();
    PageNo p;
    {
      PageRef r = VALUE_OR_FAIL(space.Allocate(4));
      p = r.page_no();
      FillPage(r.data(), kPs, p, 1);
      r.Mark(4);
    }
    {
      PageRef l = VALUE_OR_FAIL(c.Fetch(link, LatchMode::kExclusive));
      REQUIRE_OK(c.AddPrecedence(l, p));
      testing::SetStamp(l.data(), 2);
      l.Mark(4);
    }
    REQUIRE_OK(c.FlushTxns(std::vector<uint64_t>{4}));
    const std::vector<testing::IoEvent> ev = db.file().events();
    INFO("forced " << forced << ": " << testing::Describe(ev));
    // The new page is fresh: it may share the PIP's batch, never precede it.
    REQUIRE(testing::FirstWrite(ev, 1) >= 0);
    REQUIRE(testing::FirstWrite(ev, p) >= 0);
    CHECK(ev[testing::FirstWrite(ev, 1)].step <= ev[testing::FirstWrite(ev, p)].step);
    // The page that links to it follows both, after a sync.
    CHECK(CheckBefore(ev, p, link, forced) == "");
    CHECK(CheckBefore(ev, 1, link, forced) == "");
  }
}

TEST_CASE("page space: allocation goes on past the first PIP", "[cache]") {
  TestDb db(Opts(64));
  BufferCache& c = db.cache();
  PageSpace space(&c, 2);
  constexpr uint32_t kPer = page::PagesPerPip(kPs);
  static_assert(kPer == 32512);
  // PIP 0 covers pages [0, 32512): pages 0 and 1 and the doublewrite area are taken.
  PageNo expect = kFirstFree;
  for (uint32_t i = 0; i < kPer - kFirstFree; ++i, ++expect) {
    absl::StatusOr<PageRef> r = space.Allocate(1);
    if (!r.ok() || r->page_no() != expect) {
      FAIL("allocation " << i << ": "
                         << (r.ok() ? std::to_string(r->page_no())
                                    : std::string(r.status().ToString())));
    }
  }
  // The next one creates PIP 1 at page 32512 and returns the page after it.
  {
    PageRef r = VALUE_OR_FAIL(space.Allocate(1));
    CHECK(r.page_no() == kPer + 1);
    FillPage(r.data(), kPs, r.page_no(), 9);
    r.Mark(1);
  }
  CHECK(page::PipPageNo(1, kPs) == kPer);
  CHECK(space.page_count() == kPer + 2);
  CHECK(!VALUE_OR_FAIL(space.IsFree(kPer)));
  CHECK(!VALUE_OR_FAIL(space.IsFree(kPer + 1)));
  {
    PageRef pip1 = VALUE_OR_FAIL(c.Fetch(kPer, LatchMode::kShared));
    CHECK(page::GetType(pip1.data()) == page::PageType::kPip);
    CHECK(!page::PipIsFree(pip1.data(), kPs, kPer));
    CHECK(page::PipIsFree(pip1.data(), kPs, kPer + 2));
  }
  REQUIRE_OK(space.Free(kPer + 1, 1));
  CHECK(VALUE_OR_FAIL(space.IsFree(kPer + 1)));
  CHECK(VALUE_OR_FAIL(space.Allocate(1)).page_no() == kPer + 1);
  CHECK(absl::IsInvalidArgument(space.Free(kPer, 1)));  // PIP 1 itself
  REQUIRE_OK(space.Free(kFirstFree + 100, 1));
  CHECK(VALUE_OR_FAIL(space.IsFree(kFirstFree + 100)));
  CHECK(VALUE_OR_FAIL(space.Allocate(1)).page_no() == kFirstFree + 100);  // back in PIP 0
  CHECK(VALUE_OR_FAIL(space.Allocate(1)).page_no() == kPer + 2);

  // After a flush and a reopen both PIPs are read back from disk.
  REQUIRE_OK(c.FlushAll());
  const uint32_t count = space.page_count();
  CHECK(count == kPer + 3);
  db.Reopen();
  PageSpace again(&db.cache(), count);
  CHECK(!VALUE_OR_FAIL(again.IsFree(kFirstFree + 100)));
  CHECK(!VALUE_OR_FAIL(again.IsFree(kPer + 2)));
  REQUIRE_OK(again.Free(kPer + 1, 1));
  CHECK(VALUE_OR_FAIL(again.Allocate(1)).page_no() == kPer + 1);
  CHECK(VALUE_OR_FAIL(again.Allocate(1)).page_no() == kPer + 3);
}
