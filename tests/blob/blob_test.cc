// Tests of the BLOB layer (engine/blob, engine/db/blob_api.cc; architecture.md "BLOBs and temp
// space"): round trips at every level boundary, streaming Seek/Read, Concat/Append semantics,
// where temporary BLOBs live under blob_temp_space 0/1/2 (and spilling), rollback and
// transaction end, Validate, concurrent readers, a full temp directory, and a crash in the middle
// of writing a BLOB.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ember/ember.h"
#include "engine/blob/blob_format.h"
#include "engine/db/database_impl.h"
#include "engine/io/file.h"
#include "engine/page/blob_page.h"
#include "engine/record/record_format.h"
#include "engine/record/relation.h"
#include "tests/support/blob_db_util.h"
#include "tests/support/blob_util.h"
#include "tests/support/db_util.h"
#include "tests/support/fault_file.h"

namespace ember::testing {
namespace {

// ---------------------------------------------------------------- helpers

size_t FilesIn(const std::string& dir) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    (void)e;
    ++n;
  }
  return n;
}

// ---------------------------------------------------------------- round trips

TEST_CASE("blob: round trips at every level boundary and page-size edge", "[blob]") {
  struct Config {
    uint32_t page_size;
    int mode;
  };
  const Config configs[] = {{4096, 1}, {4096, 2}, {16384, 1}};
  for (const Config cfg : configs) {
    const uint32_t ps = cfg.page_size;
    CAPTURE(ps, cfg.mode);
    const uint64_t cap = page::BlobPageCapacity(ps);
    const uint64_t level1_max = uint64_t{ps / 8} * cap;  // the last length kept at level 1
    std::vector<uint64_t> sizes = {0,       1,       ps / 4,     ps / 4 + 1,    cap,
                                   cap + 1, 2 * cap, level1_max, level1_max + 1};
    if (ps == 4096) REQUIRE(level1_max == 512u * 4064u);
    if (cfg.mode == 1) sizes.push_back(20u << 20);  // level 2 at 4096, level 1 at 16384
    if (cfg.mode == 2) sizes.push_back(3 * cap - 1);

    Scratch tdb;
    {
      std::unique_ptr<Database> db = OpenOrFail(tdb.path(), BlobOptions(ps, cfg.mode));
      Table docs = VALUE_OR_FAIL(db->CreateTable(DocsSchema()));
      std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
      for (size_t i = 0; i < sizes.size(); ++i) {
        CAPTURE(sizes[i]);
        const std::string data = Pattern(i + ps, sizes[i]);
        const BlobId temp = WriteBlob(t.get(), data);
        REQUIRE_BYTES(ReadAll(t.get(), temp), data);  // the temporary BLOB reads back
        const RecordId rid = VALUE_OR_FAIL(t->Insert(
            docs, Row{int64_t(i), std::string("blob ") + std::to_string(sizes[i]), temp}));
        // The row holds the stored BLOB now; the temporary one is gone.
        std::optional<Row> row = VALUE_OR_FAIL(t->Get(docs, rid));
        REQUIRE(row.has_value());
        const BlobId stored = BodyOf(*row);
        REQUIRE_FALSE(blob::IsTemp(stored.value));
        REQUIRE(IsError(t->OpenBlob(temp).status(), absl::StatusCode::kNotFound));
        if (sizes[i] == 0) {  // the empty BLOB: nothing is stored for it
          REQUIRE(stored.value == 0);
          continue;
        }
        REQUIRE(stored.value != 0);
        REQUIRE(LevelOf(db.get(), stored) == ExpectedLevel(ps, sizes[i]));
        REQUIRE(IsError(t->OpenBlob(temp).status(), absl::StatusCode::kNotFound));
        REQUIRE_BYTES(ReadAll(t.get(), stored), data);
      }
      REQUIRE_OK(t->Commit());
      RequireCleanValidate(db.get());
      REQUIRE_OK(db->Close());
    }
    // Reopen: every BLOB reads back from disk, at its level.
    Options o = BlobOptions(ps, cfg.mode);
    o.create_if_missing = false;
    std::unique_ptr<Database> db = OpenOrFail(tdb.path(), o);
    Table docs = VALUE_OR_FAIL(db->GetTable("docs"));
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    auto rows = VALUE_OR_FAIL(ScanAll(t.get(), docs));
    REQUIRE(rows.size() == sizes.size());
    for (const auto& [rid, row] : rows) {
      const int64_t i = std::get<int64_t>(row[0]);
      CAPTURE(i, sizes[i]);
      const BlobId id = BodyOf(row);
      REQUIRE((id.value == 0) == (sizes[i] == 0));
      if (id.value != 0) REQUIRE(LevelOf(db.get(), id) == ExpectedLevel(ps, sizes[i]));
      std::unique_ptr<BlobReader> r = VALUE_OR_FAIL(t->OpenBlob(id));
      REQUIRE(r->size() == sizes[i]);
      REQUIRE_BYTES(ReadAll(t.get(), id), Pattern(i + ps, sizes[i]));
    }
    REQUIRE_OK(t->Commit());
    RequireCleanValidate(db.get());
    REQUIRE_OK(db->Close());
  }
}

// ---------------------------------------------------------------- seek

// Random seeks and reads of `id` against `expected`, plus the edge cases of Seek.
void CheckSeeks(Transaction* t, BlobId id, const std::string& expected, uint32_t page_size,
                std::mt19937_64& rng) {
  std::unique_ptr<BlobReader> r = VALUE_OR_FAIL(t->OpenBlob(id));
  const uint64_t size = expected.size();
  REQUIRE(r->size() == size);
  REQUIRE(r->position() == 0);
  const uint64_t cap = page::BlobPageCapacity(page_size);
  std::vector<char> buf;
  auto read_at = [&](uint64_t pos, size_t n) {
    CAPTURE(pos, n, size);
    REQUIRE_OK(r->Seek(pos));
    REQUIRE(r->position() == pos);
    buf.assign(n, '\0');
    size_t got = 0;
    while (got < n) {
      const size_t k = VALUE_OR_FAIL(r->Read(buf.data() + got, n - got));
      if (k == 0) break;
      got += k;
    }
    REQUIRE(got == std::min<uint64_t>(n, size - pos));
    REQUIRE(r->position() == pos + got);
    REQUIRE(std::memcmp(buf.data(), expected.data() + pos, got) == 0);
  };
  // Across every page boundary within reach, and at the very edges.
  for (uint64_t b = cap; b < size && b < 40 * cap; b += cap) {
    read_at(b - 3, 10);
    read_at(b - 1, 1);
    read_at(b, 1);
    read_at(b - cap / 2, cap + 7);  // spans a boundary from mid-page to mid-page
  }
  for (int i = 0; i < 300; ++i) {
    const uint64_t pos = size == 0 ? 0 : rng() % (size + 1);
    const size_t lens[] = {1,    7, 100, static_cast<size_t>(cap), static_cast<size_t>(3 * cap + 5),
                           65536};
    read_at(pos, lens[rng() % std::size(lens)]);
  }
  // Seek to size(): Read gives 0. Past the end: OutOfRange and the position stays.
  REQUIRE_OK(r->Seek(size));
  char c;
  REQUIRE(VALUE_OR_FAIL(r->Read(&c, 1)) == 0);
  REQUIRE(r->position() == size);
  REQUIRE_OK(r->Seek(0));
  REQUIRE(IsError(r->Seek(size + 1), absl::StatusCode::kOutOfRange));
  REQUIRE(IsError(r->Seek(UINT64_MAX), absl::StatusCode::kOutOfRange));
  REQUIRE(r->position() == 0);
  if (size > 0) {
    REQUIRE(VALUE_OR_FAIL(r->Read(&c, 1)) == 1);
    REQUIRE(c == expected[0]);
  }
  // Backwards seeks after reading to the end.
  if (size > 10) {
    read_at(size - 10, 100);
    read_at(5, 5);
  }
}

TEST_CASE("blob: random Seek and Read against the expected bytes", "[blob]") {
  const uint32_t ps = 4096;
  const uint64_t cap = page::BlobPageCapacity(ps);
  Scratch tdb;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), BlobOptions(ps, 1, 64));
  Table docs = VALUE_OR_FAIL(db->CreateTable(DocsSchema()));
  std::mt19937_64 rng(12345);
  const std::vector<uint64_t> sizes = {0, 1, 700, ps / 4 + 1, 3 * cap + 1234, 600 * cap + 17};
  std::vector<std::string> data;
  for (size_t i = 0; i < sizes.size(); ++i) data.push_back(Pattern(100 + i, sizes[i]));

  std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
  SECTION("temporary BLOBs in pages and in temp space, then stored ones") {
    for (size_t i = 0; i < sizes.size(); ++i) {
      CAPTURE(sizes[i]);
      const BlobId paged = WriteBlob(t.get(), data[i]);  // mode 1: database pages
      CheckSeeks(t.get(), paged, data[i], ps, rng);
      const BlobId in_temp = VALUE_OR_FAIL(t->Concat(paged, BlobId{}));  // temp space
      CheckSeeks(t.get(), in_temp, data[i], ps, rng);
      VALUE_OR_FAIL(t->Insert(docs, Row{int64_t(i), std::monostate{}, paged}));
    }
    REQUIRE_OK(t->Commit());
    std::unique_ptr<Transaction> t2 = VALUE_OR_FAIL(db->Begin());
    for (size_t i = 0; i < sizes.size(); ++i) {
      CAPTURE(sizes[i]);
      CheckSeeks(t2.get(), FindBody(t2.get(), docs, int64_t(i)), data[i], ps, rng);
    }
    REQUIRE_OK(t2->Commit());
  }
  SECTION("the empty BLOB") {
    std::unique_ptr<BlobReader> r = VALUE_OR_FAIL(t->OpenBlob(BlobId{}));
    REQUIRE(r->size() == 0);
    REQUIRE_OK(r->Seek(0));
    char c;
    REQUIRE(VALUE_OR_FAIL(r->Read(&c, 1)) == 0);
    REQUIRE(IsError(r->Seek(1), absl::StatusCode::kOutOfRange));
    REQUIRE_OK(t->Rollback());
  }
}

// ---------------------------------------------------------------- Concat / Append

TEST_CASE("blob: Concat and Append semantics", "[blob]") {
  const int mode = GENERATE(0, 1, 2);
  CAPTURE(mode);
  const uint32_t ps = 4096;
  Scratch tdb;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), BlobOptions(ps, mode, 64));
  Table docs = VALUE_OR_FAIL(db->CreateTable(DocsSchema()));
  const std::string A = Pattern(1, 10000), B = Pattern(2, 5000), S = Pattern(3, 300);
  const std::string Big = Pattern(4, 600 * 4064 + 5);  // level 2 once stored

  std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
  const BlobId a = WriteBlob(t.get(), A);
  const BlobId b = WriteBlob(t.get(), B);
  REQUIRE(a.value != b.value);

  // Concat(a, b): a new BLOB, a's bytes then b's; a and b unchanged.
  const BlobId c = VALUE_OR_FAIL(t->Concat(a, b));
  REQUIRE(c.value != a.value);
  REQUIRE(c.value != b.value);
  REQUIRE(blob::IsTemp(c.value));
  REQUIRE_BYTES(ReadAll(t.get(), c), A + B);
  REQUIRE_BYTES(ReadAll(t.get(), a), A);
  REQUIRE_BYTES(ReadAll(t.get(), b), B);
  REQUIRE_BYTES(ReadAll(t.get(), VALUE_OR_FAIL(t->Concat(b, a))), B + A);
  REQUIRE_BYTES(ReadAll(t.get(), VALUE_OR_FAIL(t->Concat(a, a))), A + A);

  // With the empty BLOB.
  const BlobId a0 = VALUE_OR_FAIL(t->Concat(a, BlobId{}));
  REQUIRE(a0.value != a.value);
  REQUIRE_BYTES(ReadAll(t.get(), a0), A);
  REQUIRE_BYTES(ReadAll(t.get(), VALUE_OR_FAIL(t->Concat(BlobId{}, b))), B);
  const BlobId e = VALUE_OR_FAIL(t->Concat(BlobId{}, BlobId{}));
  REQUIRE(VALUE_OR_FAIL(t->OpenBlob(e))->size() == 0);

  // Concat with bytes.
  REQUIRE_BYTES(ReadAll(t.get(), VALUE_OR_FAIL(t->Concat(a, "xyz"))), A + "xyz");
  REQUIRE_BYTES(ReadAll(t.get(), VALUE_OR_FAIL(t->Concat(a, std::string_view()))), A);
  REQUIRE_BYTES(ReadAll(t.get(), VALUE_OR_FAIL(t->Concat(BlobId{}, "xyz"))), "xyz");
  REQUIRE_BYTES(ReadAll(t.get(), a), A);

  // Append in place: same id, grows.
  BlobId grow = c;
  REQUIRE_OK(t->Append(&grow, "tail"));
  REQUIRE(grow.value == c.value);
  REQUIRE_BYTES(ReadAll(t.get(), c), A + B + "tail");

  // Append to BlobId{} makes one; many pieces of odd sizes (crossing pages and growing extents).
  BlobId built{};
  std::string expect_built;
  REQUIRE_OK(t->Append(&built, "first"));
  REQUIRE(built.value != 0);
  REQUIRE(blob::IsTemp(built.value));
  expect_built = "first";
  const BlobId built_id = built;
  for (size_t i = 0; i < 400; ++i) {
    const std::string piece = Pattern(1000 + i, kSegments[i % std::size(kSegments)] % 20000);
    REQUIRE_OK(t->Append(&built, piece));
    expect_built += piece;
  }
  REQUIRE(built.value == built_id.value);
  REQUIRE_BYTES(ReadAll(t.get(), built), expect_built);

  // Append to a BLOB of another kind than temporary-of-this-transaction: NotFound for junk.
  BlobId junk{blob::kTempBit | 999999};
  REQUIRE(IsError(t->Append(&junk, "x"), absl::StatusCode::kNotFound));
  REQUIRE(IsError(t->Concat(junk, a).status(), absl::StatusCode::kNotFound));

  // Store some: a, b, a big one, a small one; and a Concat result via Update.
  const BlobId big = WriteBlob(t.get(), Big);
  const RecordId ra = VALUE_OR_FAIL(t->Insert(docs, Row{int64_t(1), std::monostate{}, a}));
  VALUE_OR_FAIL(t->Insert(docs, Row{int64_t(2), std::monostate{}, b}));
  VALUE_OR_FAIL(t->Insert(docs, Row{int64_t(3), std::monostate{}, big}));
  VALUE_OR_FAIL(t->Insert(docs, Row{int64_t(4), std::monostate{}, WriteBlob(t.get(), S)}));
  VALUE_OR_FAIL(t->Insert(docs, Row{int64_t(5), std::monostate{}, built}));
  VALUE_OR_FAIL(t->Insert(docs, Row{int64_t(6), std::monostate{}, BlobId{}}));
  // a was stored: Concat of it as a temporary BLOB no longer works (NotFound), c still does.
  REQUIRE(IsError(t->Concat(a, b).status(), absl::StatusCode::kNotFound));
  REQUIRE_OK(t->Update(docs, ra, Row{int64_t(1), std::string("updated"), c}));
  REQUIRE_OK(t->Commit());

  // Stored BLOBs as operands.
  std::unique_ptr<Transaction> t2 = VALUE_OR_FAIL(db->Begin());
  const BlobId sa = FindBody(t2.get(), docs, 1);  // now A+B+"tail" (the update)
  const BlobId sb = FindBody(t2.get(), docs, 2);
  const BlobId sbig = FindBody(t2.get(), docs, 3);
  const BlobId ss = FindBody(t2.get(), docs, 4);
  const std::string C = A + B + "tail";
  for (BlobId s : {sa, sb, sbig, ss}) REQUIRE_FALSE(blob::IsTemp(s.value));
  REQUIRE(LevelOf(db.get(), sbig) == 2);
  REQUIRE(LevelOf(db.get(), ss) == 0);
  REQUIRE_BYTES(ReadAll(t2.get(), FindBody(t2.get(), docs, 5)), expect_built);
  REQUIRE(FindBody(t2.get(), docs, 6).value == 0);

  const BlobId cat = VALUE_OR_FAIL(t2->Concat(sa, sb));
  REQUIRE_BYTES(ReadAll(t2.get(), cat), C + B);
  const BlobId cat2 = VALUE_OR_FAIL(t2->Concat(ss, sbig));
  REQUIRE_BYTES(ReadAll(t2.get(), cat2), S + Big);
  const BlobId cat3 = VALUE_OR_FAIL(t2->Concat(sbig, "!"));
  REQUIRE_BYTES(ReadAll(t2.get(), cat3), Big + "!");
  const BlobId mixed = VALUE_OR_FAIL(t2->Concat(cat, ss));  // temporary + stored
  REQUIRE_BYTES(ReadAll(t2.get(), mixed), C + B + S);
  REQUIRE_BYTES(ReadAll(t2.get(), VALUE_OR_FAIL(t2->Concat(BlobId{}, ss))), S);

  // Append to a stored BLOB: a temporary copy grows, the stored one is unchanged.
  BlobId x = sb;
  REQUIRE_OK(t2->Append(&x, "more"));
  REQUIRE(x.value != sb.value);
  REQUIRE(blob::IsTemp(x.value));
  REQUIRE_BYTES(ReadAll(t2.get(), x), B + "more");
  REQUIRE_OK(t2->Append(&x, "again"));
  REQUIRE_BYTES(ReadAll(t2.get(), x), B + "moreagain");
  REQUIRE_BYTES(ReadAll(t2.get(), sb), B);
  REQUIRE_BYTES(ReadAll(t2.get(), sa), C);
  REQUIRE_BYTES(ReadAll(t2.get(), sbig), Big);
  VALUE_OR_FAIL(t2->Insert(docs, Row{int64_t(7), std::monostate{}, cat2}));
  VALUE_OR_FAIL(t2->Insert(docs, Row{int64_t(8), std::monostate{}, x}));
  REQUIRE_OK(t2->Commit());
  RequireCleanValidate(db.get());
  REQUIRE_OK(db->Close());

  // After reopen everything is as stored.
  Options o = BlobOptions(ps, mode, 64);
  o.create_if_missing = false;
  db = OpenOrFail(tdb.path(), o);
  docs = VALUE_OR_FAIL(db->GetTable("docs"));
  std::unique_ptr<Transaction> t3 = VALUE_OR_FAIL(db->Begin());
  REQUIRE_BYTES(ReadAll(t3.get(), FindBody(t3.get(), docs, 1)), C);
  REQUIRE_BYTES(ReadAll(t3.get(), FindBody(t3.get(), docs, 2)), B);
  REQUIRE_BYTES(ReadAll(t3.get(), FindBody(t3.get(), docs, 3)), Big);
  REQUIRE_BYTES(ReadAll(t3.get(), FindBody(t3.get(), docs, 4)), S);
  REQUIRE_BYTES(ReadAll(t3.get(), FindBody(t3.get(), docs, 5)), expect_built);
  REQUIRE_BYTES(ReadAll(t3.get(), FindBody(t3.get(), docs, 7)), S + Big);
  REQUIRE_BYTES(ReadAll(t3.get(), FindBody(t3.get(), docs, 8)), B + "moreagain");
  REQUIRE_OK(t3->Commit());
  RequireCleanValidate(db.get());
}

// ---------------------------------------------------------------- blob_temp_space modes

TEST_CASE("blob: Concat chains in temp space share extents and stay independent", "[blob]") {
  // b = Concat(b, piece) keeps every intermediate BLOB valid. In temp space they share extents,
  // so the whole chain takes space linear in the final size; appending to any of them (in place
  // past the end of a shared extent, or in a new one) never changes another.
  const int mode = GENERATE(1, 2);
  CAPTURE(mode);
  Scratch tdb;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), BlobOptions(4096, mode, 64));
  std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
  std::mt19937_64 rng(5);
  std::vector<BlobId> chain{BlobId{}};
  std::vector<std::string> expected{std::string()};
  const size_t piece = 10000, n = 200;
  for (size_t i = 0; i < n; ++i) {
    const std::string bytes = Pattern(1000 + i, piece);
    chain.push_back(VALUE_OR_FAIL(t->Concat(chain.back(), bytes)));
    expected.push_back(expected.back() + bytes);
  }
  CHECK(TempAllocated(db.get()) <= 4 * n * piece);  // copying would take about n*n*piece/2
  // Appends and concatenations on earlier links, in random order.
  for (int k = 0; k < 60; ++k) {
    const size_t i = rng() % chain.size();
    const std::string more = Pattern(5000 + k, 1 + rng() % 20000);
    if (chain[i].value == 0 || rng() % 2) {
      chain.push_back(VALUE_OR_FAIL(t->Concat(chain[i], more)));
      expected.push_back(expected[i] + more);
    } else {
      REQUIRE_OK(t->Append(&chain[i], more));
      expected[i] += more;
    }
  }
  for (size_t i = 0; i < chain.size(); ++i) {
    CAPTURE(i);
    if (chain[i].value == 0) continue;
    REQUIRE_BYTES(ReadAll(t.get(), chain[i]), expected[i]);
  }
  // A concatenation of two chain links, and of a link with itself.
  const BlobId both = VALUE_OR_FAIL(t->Concat(chain[50], chain[120]));
  REQUIRE_BYTES(ReadAll(t.get(), both), expected[50] + expected[120]);
  const BlobId twice = VALUE_OR_FAIL(t->Concat(chain[7], chain[7]));
  REQUIRE_BYTES(ReadAll(t.get(), twice), expected[7] + expected[7]);
  REQUIRE_OK(t->Rollback());
  REQUIRE(TempAllocated(db.get()) == 0);
}

TEST_CASE("blob: blob_temp_space 0 keeps Concat results in database pages", "[blob]") {
  Scratch tdb;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), BlobOptions(4096, 0, 64));
  const std::string A = Pattern(7, 1 << 20);
  std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
  const DatabaseStats s0 = db->stats();
  const BlobId a = WriteBlob(t.get(), A);
  const DatabaseStats s1 = db->stats();
  REQUIRE(s1.page_count >= s0.page_count + (1 << 20) / 4064);
  const BlobId c = VALUE_OR_FAIL(t->Concat(a, a));
  const DatabaseStats s2 = db->stats();
  // 2 MB more in pages, through a 64-page cache: the pages reach the file.
  REQUIRE(s2.page_count >= s1.page_count + (2 << 20) / 4064);
  REQUIRE(s2.pages.marks > s1.pages.marks);
  REQUIRE(s2.pages.writes > s1.pages.writes);
  REQUIRE(s2.temp_bytes_in_memory == 0);
  REQUIRE(s2.temp_bytes_on_disk == 0);
  REQUIRE(s2.temp_spills == 0);
  REQUIRE(TempAllocated(db.get()) == 0);
  BlobId app{};
  REQUIRE_OK(t->Append(&app, A));
  REQUIRE(db->stats().page_count >= s2.page_count + (1 << 20) / 4064);
  REQUIRE(db->stats().temp_bytes_in_memory == 0);
  REQUIRE_BYTES(ReadAll(t.get(), c), A + A);
  REQUIRE_BYTES(ReadAll(t.get(), app), A);
  REQUIRE_OK(t->Commit());  // the unassigned temporary BLOBs' pages are freed
  RequireCleanValidate(db.get());
}

TEST_CASE("blob: blob_temp_space 1 puts engine-made BLOBs in temp space, written ones in pages",
          "[blob]") {
  Scratch tdb;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), BlobOptions(4096, 1, 64));
  Table docs = VALUE_OR_FAIL(db->CreateTable(DocsSchema()));
  const std::string A = Pattern(8, 1 << 20);
  std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
  const DatabaseStats s0 = db->stats();
  const BlobId a = WriteBlob(t.get(), A);
  const DatabaseStats s1 = db->stats();
  REQUIRE(s1.page_count >= s0.page_count + (1 << 20) / 4064);
  REQUIRE(s1.temp_bytes_in_memory == 0);
  REQUIRE(TempAllocated(db.get()) == 0);
  const BlobId c = VALUE_OR_FAIL(t->Concat(a, a));
  const DatabaseStats s2 = db->stats();
  REQUIRE(s2.page_count == s1.page_count);
  REQUIRE(s2.temp_bytes_in_memory >= (2u << 20));
  REQUIRE(TempAllocated(db.get()) >= (2u << 20));
  BlobId app{};
  REQUIRE_OK(t->Append(&app, A));  // engine-made too
  REQUIRE(db->stats().page_count == s1.page_count);
  REQUIRE(TempAllocated(db.get()) >= (3u << 20));
  REQUIRE_BYTES(ReadAll(t.get(), c), A + A);
  REQUIRE_BYTES(ReadAll(t.get(), app), A);
  // Storing the temp-space BLOB writes it to pages and gives its temp space back.
  VALUE_OR_FAIL(t->Insert(docs, Row{int64_t(1), std::monostate{}, c}));
  REQUIRE(db->stats().page_count >= s1.page_count + (2 << 20) / 4064);
  REQUIRE(TempAllocated(db.get()) < (2u << 20));
  REQUIRE_OK(t->Commit());
  REQUIRE(TempAllocated(db.get()) == 0);
  std::unique_ptr<Transaction> t2 = VALUE_OR_FAIL(db->Begin());
  REQUIRE_BYTES(ReadAll(t2.get(), FindBody(t2.get(), docs, 1)), A + A);
  REQUIRE_OK(t2->Commit());
  RequireCleanValidate(db.get());
}

TEST_CASE("blob: blob_temp_space 2 puts every temporary BLOB in temp space", "[blob]") {
  Scratch tdb;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), BlobOptions(4096, 2, 64));
  Table docs = VALUE_OR_FAIL(db->CreateTable(DocsSchema()));
  const std::string A = Pattern(9, 1 << 20);
  std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
  const DatabaseStats s0 = db->stats();
  const BlobId a = WriteBlob(t.get(), A);
  const DatabaseStats s1 = db->stats();
  REQUIRE(s1.page_count == s0.page_count);
  REQUIRE(s1.temp_bytes_in_memory >= (1u << 20));
  REQUIRE(TempAllocated(db.get()) >= (1u << 20));
  const uint64_t allocated = TempAllocated(db.get());
  const BlobId c = VALUE_OR_FAIL(t->Concat(a, a));
  REQUIRE(db->stats().page_count == s0.page_count);
  // Concat of BLOBs in temp space shares their extents: no copy, no new space.
  REQUIRE(TempAllocated(db.get()) == allocated);
  REQUIRE_BYTES(ReadAll(t.get(), c), A + A);
  REQUIRE_BYTES(ReadAll(t.get(), a), A);
  VALUE_OR_FAIL(t->Insert(docs, Row{int64_t(1), std::monostate{}, c}));
  VALUE_OR_FAIL(t->Insert(docs, Row{int64_t(2), std::monostate{}, a}));
  REQUIRE_OK(t->Commit());
  REQUIRE(TempAllocated(db.get()) == 0);
  std::unique_ptr<Transaction> t2 = VALUE_OR_FAIL(db->Begin());
  REQUIRE_BYTES(ReadAll(t2.get(), FindBody(t2.get(), docs, 1)), A + A);
  REQUIRE_BYTES(ReadAll(t2.get(), FindBody(t2.get(), docs, 2)), A);
  REQUIRE_OK(t2->Commit());
  RequireCleanValidate(db.get());
}

TEST_CASE("blob: temp space spills to unlinked files past temp_cache_limit", "[blob]") {
  ScopedNoEmberTmp no_env;
  TempDir spill;
  REQUIRE(spill.ok());
  const std::string spill_dir = spill.File("spill");
  REQUIRE(std::filesystem::create_directory(spill_dir));
  Scratch tdb;
  Options o = BlobOptions(4096, 2, 64);
  o.temp_cache_limit = 64 << 10;
  o.temp_directories = {spill_dir};
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), o);
  Table docs = VALUE_OR_FAIL(db->CreateTable(DocsSchema()));
  const std::string A = Pattern(10, 3 << 20);
  std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
  const BlobId a = WriteBlob(t.get(), A);
  const BlobId c = VALUE_OR_FAIL(t->Concat(a, "spilled"));
  const DatabaseStats s = db->stats();
  REQUIRE(s.temp_bytes_on_disk > 0);
  REQUIRE(s.temp_spills > 0);
  REQUIRE(s.temp_bytes_in_memory <= (64u << 10));
  REQUIRE(FilesIn(spill_dir) == 0);  // unlinked as soon as created
  REQUIRE_BYTES(ReadAll(t.get(), a), A);
  REQUIRE_BYTES(ReadAll(t.get(), c), A + "spilled");
  std::mt19937_64 rng(5);
  CheckSeeks(t.get(), c, A + "spilled", 4096, rng);
  VALUE_OR_FAIL(t->Insert(docs, Row{int64_t(1), std::monostate{}, c}));
  REQUIRE_OK(t->Commit());
  REQUIRE(FilesIn(spill_dir) == 0);
  REQUIRE_OK(db->Close());
  db.reset();
  o.create_if_missing = false;
  db = OpenOrFail(tdb.path(), o);
  docs = VALUE_OR_FAIL(db->GetTable("docs"));
  std::unique_ptr<Transaction> t2 = VALUE_OR_FAIL(db->Begin());
  REQUIRE_BYTES(ReadAll(t2.get(), FindBody(t2.get(), docs, 1)), A + "spilled");
  REQUIRE_OK(t2->Commit());
  RequireCleanValidate(db.get());
  REQUIRE(FilesIn(spill_dir) == 0);
}

// ---------------------------------------------------------------- transaction end

// Big temporary BLOBs of every kind, none assigned.
void BuildTemps(Transaction* t, const std::string& A) {
  const BlobId a = WriteBlob(t, A);
  const BlobId c = VALUE_OR_FAIL(t->Concat(a, a));
  BlobId app{};
  for (size_t off = 0; off < A.size(); off += 100000) {
    REQUIRE_OK(t->Append(&app, std::string_view(A).substr(off, 100000)));
  }
  REQUIRE(VALUE_OR_FAIL(t->OpenBlob(c))->size() == 2 * A.size());
  REQUIRE_BYTES(ReadAll(t, app), A);
}

TEST_CASE("blob: rollback with blob_temp_space 0 frees the pages for reuse", "[blob]") {
  Scratch tdb;
  const std::string A = Pattern(11, 2 << 20);
  Options o = BlobOptions(4096, 0, 64);
  uint64_t pages1, file1;
  {
    std::unique_ptr<Database> db = OpenOrFail(tdb.path(), o);
    const uint64_t before = db->stats().page_count;
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    BuildTemps(t.get(), A);
    pages1 = db->stats().page_count;
    REQUIRE(pages1 >= before + (8u << 20) / 4064);
    REQUIRE_OK(t->Rollback());
    RequireCleanValidate(db.get());  // nothing leaked: every page is free again
    // Again before a restart: no growth.
    std::unique_ptr<Transaction> t2 = VALUE_OR_FAIL(db->Begin());
    BuildTemps(t2.get(), A);
    REQUIRE(db->stats().page_count <= pages1);
    REQUIRE_OK(t2->Rollback());
    REQUIRE_OK(db->Close());
    file1 = std::filesystem::file_size(tdb.path());
  }
  // And after reopen: the freed pages are found in the PIPs; the file does not grow.
  o.create_if_missing = false;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), o);
  const uint64_t pages_open = db->stats().page_count;  // max(header, file size)
  REQUIRE(pages_open >= pages1);
  std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
  BuildTemps(t.get(), A);
  REQUIRE(db->stats().page_count == pages_open);
  REQUIRE_OK(t->Rollback());
  RequireCleanValidate(db.get());
  REQUIRE_OK(db->Close());
  REQUIRE(std::filesystem::file_size(tdb.path()) <= file1);
}

TEST_CASE("blob: rollback and commit give temp space back", "[blob]") {
  const int mode = GENERATE(1, 2);
  CAPTURE(mode);
  Scratch tdb;
  const std::string A = Pattern(12, 2 << 20);
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), BlobOptions(4096, mode, 64));
  Table docs = VALUE_OR_FAIL(db->CreateTable(DocsSchema()));
  std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
  BuildTemps(t.get(), A);
  // Mode 1: the written BLOB is in pages, so the Concat copies it twice, plus the appended one;
  // mode 2: the Concat shares the written BLOB's extent, plus the appended one.
  REQUIRE(TempAllocated(db.get()) >= (mode == 2 ? 2u : 3u) * A.size());
  const uint64_t mem1 = db->stats().temp_bytes_in_memory;
  REQUIRE(mem1 >= TempAllocated(db.get()));
  REQUIRE_OK(t->Rollback());
  REQUIRE(TempAllocated(db.get()) == 0);
  // The same again reuses the released space.
  std::unique_ptr<Transaction> t2 = VALUE_OR_FAIL(db->Begin());
  BuildTemps(t2.get(), A);
  REQUIRE(db->stats().temp_bytes_in_memory == mem1);
  VALUE_OR_FAIL(t2->Insert(docs, Row{int64_t(1), std::monostate{}, WriteBlob(t2.get(), "x")}));
  REQUIRE_OK(t2->Commit());  // the unassigned ones go at commit too
  REQUIRE(TempAllocated(db.get()) == 0);
  RequireCleanValidate(db.get());
}

TEST_CASE("blob: temporary BLOBs vanish at transaction end, ReleaseBlob frees one early",
          "[blob]") {
  const int mode = GENERATE(0, 1, 2);
  CAPTURE(mode);
  Scratch tdb;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), BlobOptions(4096, mode, 64));
  Table docs = VALUE_OR_FAIL(db->CreateTable(DocsSchema()));
  const std::string A = Pattern(13, 1 << 20);

  std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
  const BlobId kept = WriteBlob(t.get(), A);
  const BlobId made = VALUE_OR_FAIL(t->Concat(kept, "!"));
  // ReleaseBlob: gone at once, its space reused by the next BLOB of the same size.
  const uint64_t pages0 = db->stats().page_count;
  const uint64_t temp0 = TempAllocated(db.get());
  const BlobId r = WriteBlob(t.get(), A);
  const uint64_t pages1 = db->stats().page_count;
  REQUIRE_OK(t->ReleaseBlob(r));
  if (mode == 2) REQUIRE(TempAllocated(db.get()) == temp0);
  REQUIRE(IsError(t->OpenBlob(r).status(), absl::StatusCode::kNotFound));
  REQUIRE(IsError(t->ReleaseBlob(r), absl::StatusCode::kNotFound));
  REQUIRE(IsError(t->Insert(docs, Row{int64_t(9), std::monostate{}, r}).status(),
                  absl::StatusCode::kNotFound));
  const BlobId r2 = WriteBlob(t.get(), A);
  REQUIRE(db->stats().page_count == pages1);  // mode 0/1: the released pages again
  if (mode == 2) REQUIRE(db->stats().page_count == pages0);
  REQUIRE_BYTES(ReadAll(t.get(), r2), A);
  // Release of an engine-made one, and of a BLOB id that is not a temporary BLOB.
  const BlobId m2 = VALUE_OR_FAIL(t->Concat(made, "?"));
  REQUIRE_OK(t->ReleaseBlob(m2));
  REQUIRE(IsError(t->OpenBlob(m2).status(), absl::StatusCode::kNotFound));
  REQUIRE_BYTES(ReadAll(t.get(), made), A + "!");
  REQUIRE_FALSE(t->ReleaseBlob(BlobId{}).ok());
  REQUIRE_OK(t->Commit());
  REQUIRE(TempAllocated(db.get()) == 0);
  RequireCleanValidate(db.get());

  // In a new transaction the old temporary ids mean nothing.
  std::unique_ptr<Transaction> t2 = VALUE_OR_FAIL(db->Begin());
  for (BlobId id : {kept, made, r2}) {
    REQUIRE(IsError(t2->OpenBlob(id).status(), absl::StatusCode::kNotFound));
    REQUIRE(IsError(t2->Insert(docs, Row{int64_t(1), std::monostate{}, id}).status(),
                    absl::StatusCode::kNotFound));
  }
  REQUIRE_OK(t2->Rollback());

  // Rolled back the same way.
  std::unique_ptr<Transaction> t3 = VALUE_OR_FAIL(db->Begin());
  const BlobId gone = VALUE_OR_FAIL(t3->Concat(WriteBlob(t3.get(), A), "x"));
  REQUIRE_OK(t3->Rollback());
  std::unique_ptr<Transaction> t4 = VALUE_OR_FAIL(db->Begin());
  REQUIRE(IsError(t4->OpenBlob(gone).status(), absl::StatusCode::kNotFound));
  REQUIRE_OK(t4->Commit());
  REQUIRE(TempAllocated(db.get()) == 0);
  RequireCleanValidate(db.get());
}

// ---------------------------------------------------------------- Validate

TEST_CASE("blob: Validate is clean with BLOBs of every level, and after reopen", "[blob]") {
  const int mode = GENERATE(0, 1, 2);
  CAPTURE(mode);
  const uint32_t ps = 4096;
  const uint64_t cap = page::BlobPageCapacity(ps);
  Scratch tdb;
  Options o = BlobOptions(ps, mode, 64);
  const std::vector<uint64_t> sizes = {0,   1,       ps / 4,    ps / 4 + 1,
                                       cap, 5 * cap, 512 * cap, 512 * cap + 1};
  {
    std::unique_ptr<Database> db = OpenOrFail(tdb.path(), o);
    Table docs = VALUE_OR_FAIL(db->CreateTable(DocsSchema()));
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    std::vector<RecordId> ids;
    for (size_t i = 0; i < sizes.size(); ++i) {
      ids.push_back(VALUE_OR_FAIL(t->Insert(
          docs, Row{int64_t(i), std::monostate{}, WriteBlob(t.get(), Pattern(i, sizes[i]))})));
      // And an engine-made one of each size.
      const BlobId made = VALUE_OR_FAIL(t->Concat(BlobId{}, Pattern(50 + i, sizes[i])));
      VALUE_OR_FAIL(t->Insert(docs, Row{int64_t(100 + i), std::monostate{}, made}));
    }
    REQUIRE_OK(t->Commit());
    RequireCleanValidate(db.get());
    // Updates to new BLOBs, a delete, and a rolled-back insert of a level-2 BLOB.
    std::unique_ptr<Transaction> t2 = VALUE_OR_FAIL(db->Begin());
    REQUIRE_OK(
        t2->Update(docs, ids[1],
                   Row{int64_t(1), std::string("u"), WriteBlob(t2.get(), Pattern(77, 3 * cap))}));
    REQUIRE_OK(t2->Delete(docs, ids[5]));
    REQUIRE_OK(t2->Commit());
    std::unique_ptr<Transaction> t3 = VALUE_OR_FAIL(db->Begin());
    VALUE_OR_FAIL(t3->Insert(
        docs, Row{int64_t(1000), std::monostate{}, WriteBlob(t3.get(), Pattern(78, 600 * cap))}));
    REQUIRE_OK(t3->Rollback());
    RequireCleanValidate(db.get());
    REQUIRE_OK(db->Close());
  }
  o.create_if_missing = false;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), o);
  RequireCleanValidate(db.get());
  Table docs = VALUE_OR_FAIL(db->GetTable("docs"));
  std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
  auto rows = VALUE_OR_FAIL(ScanAll(t.get(), docs));
  REQUIRE(rows.size() == 2 * sizes.size() - 1);
  for (const auto& [rid, row] : rows) {
    const int64_t k = std::get<int64_t>(row[0]);
    CAPTURE(k);
    std::string expected;
    if (k == 1) expected = Pattern(77, 3 * cap);
    else if (k >= 100) expected = Pattern(50 + (k - 100), sizes[k - 100]);
    else expected = Pattern(k, sizes[k]);
    REQUIRE_BYTES(ReadAll(t.get(), BodyOf(row)), expected);
  }
  REQUIRE_OK(t->Commit());
}

// ---------------------------------------------------------------- long bytes values

// Whether the newest version of `rec` keeps column `col` out of line (a BLOB id in the record).
bool StoredOutOfLine(Database* d, const Table& table, RecordId rec, size_t col) {
  internal::TableState* t = Impl(d)->TableById(table.id());
  REQUIRE(t != nullptr);
  bool out_of_line = false;
  REQUIRE_OK(
      t->relation->ForEachVersion(rec.value, [&](uint64_t, bool deleted, std::string_view raw) {
        Row row;
        REQUIRE_FALSE(deleted);
        REQUIRE_OK(record::DecodeRow(raw, t->schema.columns.size(), &row));
        out_of_line = std::holds_alternative<BlobId>(row[col]);
        return false;
      }));
  return out_of_line;
}

TEST_CASE("blob: long string and bytes values are stored out of line and read back whole",
          "[blob]") {
  const uint32_t ps = 4096;
  const size_t threshold = record::SpillThreshold(ps);
  Scratch tdb;
  Options o = BlobOptions(ps, 1);
  const TableSchema schema{"files",
                           {{"id", ColumnType::kInt64, false},
                            {"name", ColumnType::kString, true},
                            {"data", ColumnType::kBytes, true}}};
  // Sizes around the threshold and up to several MB (level-2 BLOBs).
  const std::vector<size_t> sizes = {0, threshold - 1, threshold, threshold + 1, 3 * ps, 600 * ps};
  std::vector<RecordId> ids;
  {
    std::unique_ptr<Database> db = OpenOrFail(tdb.path(), o);
    Table files = VALUE_OR_FAIL(db->CreateTable(schema));
    Index by_name =
        VALUE_OR_FAIL(db->CreateIndex(IndexSchema{"by_name", "files", {"name"}, false}));
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    for (size_t i = 0; i < sizes.size(); ++i) {
      ids.push_back(VALUE_OR_FAIL(t->Insert(
          files, Row{int64_t(i), std::string("f") + std::to_string(i), Pattern(i, sizes[i])})));
      CHECK(StoredOutOfLine(db.get(), files, ids.back(), 2) == (sizes[i] >= threshold));
      CHECK_FALSE(StoredOutOfLine(db.get(), files, ids.back(), 1));
    }
    // Read back in the same transaction, by Get and through the index.
    for (size_t i = 0; i < sizes.size(); ++i) {
      std::optional<Row> r = VALUE_OR_FAIL(t->Get(files, ids[i]));
      REQUIRE(r.has_value());
      REQUIRE_BYTES(std::get<std::string>((*r)[2]), Pattern(i, sizes[i]));
      auto found = VALUE_OR_FAIL(t->Lookup(by_name, Row{std::string("f") + std::to_string(i)}));
      REQUIRE(found.has_value());
      REQUIRE_BYTES(std::get<std::string>(found->second[2]), Pattern(i, sizes[i]));
    }
    REQUIRE_OK(t->Commit());
    // An update changing only the short column keeps the long value; one replacing the long
    // value stores the new one.
    std::unique_ptr<Transaction> t2 = VALUE_OR_FAIL(db->Begin());
    REQUIRE_OK(
        t2->Update(files, ids[4], Row{int64_t(4), std::string("renamed"), Pattern(4, sizes[4])}));
    REQUIRE_OK(t2->Update(files, ids[5], Row{int64_t(5), std::string("f5"), Pattern(99, 2 * ps)}));
    REQUIRE_OK(t2->Commit());
    // A long string in an indexed column is refused by the index (too long a key), not spilled
    // into it, and the failed insert leaves nothing behind.
    std::unique_ptr<Transaction> t3 = VALUE_OR_FAIL(db->Begin());
    absl::StatusOr<RecordId> bad =
        t3->Insert(files, Row{int64_t(9), std::string(threshold + 10, 'n'), std::string("x")});
    CHECK_FALSE(bad.ok());
    REQUIRE(VALUE_OR_FAIL(ScanAll(t3.get(), files)).size() == sizes.size());
    REQUIRE_OK(t3->Commit());
    RequireCleanValidate(db.get());
    REQUIRE_OK(db->Close());
  }
  o.create_if_missing = false;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), o);
  RequireCleanValidate(db.get());
  Table files = VALUE_OR_FAIL(db->GetTable("files"));
  std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
  auto rows = VALUE_OR_FAIL(ScanAll(t.get(), files));
  REQUIRE(rows.size() == sizes.size());
  for (const auto& [rid, row] : rows) {
    const int64_t k = std::get<int64_t>(row[0]);
    CAPTURE(k);
    const std::string expected = k == 5 ? Pattern(99, 2 * ps) : Pattern(k, sizes[k]);
    REQUIRE_BYTES(std::get<std::string>(row[2]), expected);
    CHECK(std::get<std::string>(row[1]) == (k == 4 ? "renamed" : "f" + std::to_string(k)));
  }
  REQUIRE_OK(t->Commit());
}

// ---------------------------------------------------------------- reclaiming BLOB space

TEST_CASE("blob: space of deleted and replaced BLOBs is reused after garbage collection",
          "[blob][gc]") {
  // Deleting rows (BLOB columns and long bytes values alike), collecting the garbage and storing
  // the same again must not grow the file: the BLOBs' pages went back to the free list.
  const uint32_t ps = 4096;
  const int mode = GENERATE(0, 1);
  CAPTURE(mode);
  Scratch tdb;
  // Without the background collector, so that what CollectGarbage frees is all there is to
  // free when the next round stores (the collector thread may still hold a batch otherwise).
  Options o = BlobOptions(ps, mode);
  o.gc_policy = GcPolicy::kCooperative;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), o);
  const TableSchema schema{"files",
                           {{"id", ColumnType::kInt64, false},
                            {"data", ColumnType::kBytes, true},
                            {"body", ColumnType::kBlob, true}}};
  Table files = VALUE_OR_FAIL(db->CreateTable(schema));
  const size_t n = 12, size = 300 * 1024;  // level-2 BLOBs at 4 KiB pages
  std::vector<uint64_t> pages;             // file size in pages after each round's store
  for (int round = 0; round < 4; ++round) {
    CAPTURE(round);
    std::vector<RecordId> ids;
    {
      std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
      for (size_t i = 0; i < n; ++i) {
        ids.push_back(VALUE_OR_FAIL(
            t->Insert(files, Row{int64_t(i), Pattern(round * 100 + i, size),
                                 WriteBlob(t.get(), Pattern(round * 100 + 50 + i, size))})));
      }
      REQUIRE_OK(t->Commit());
    }
    {
      std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
      auto rows = VALUE_OR_FAIL(ScanAll(t.get(), files));
      REQUIRE(rows.size() == n);
      for (const auto& [rid, row] : rows) {
        const int64_t i = std::get<int64_t>(row[0]);
        REQUIRE_BYTES(std::get<std::string>(row[1]), Pattern(round * 100 + i, size));
        REQUIRE_BYTES(ReadAll(t.get(), BodyOf(row)), Pattern(round * 100 + 50 + i, size));
      }
      REQUIRE_OK(t->Commit());
    }
    // Later rounds store the same amount into the space the previous round freed (a round
    // stores about as many pages as the file had after the first; without reuse each round
    // would add that much again). Which pages are free when differs with the background
    // collector's timing, so the bound has some slack.
    pages.push_back(db->stats().page_count);
    CHECK(pages.back() <= pages[0] + pages[0] / 4);
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    for (RecordId id : ids) REQUIRE_OK(t->Delete(files, id));
    REQUIRE_OK(t->Commit());
    REQUIRE_OK(db->CollectGarbage());
    RequireCleanValidate(db.get());
  }
  // Steady from the second round on.
  CHECK(pages[3] <= pages[1] + pages[0] / 20);
}

TEST_CASE("blob: updates keep, copy and free BLOBs so that every row reads its own bytes",
          "[blob][gc]") {
  const uint32_t ps = 4096;
  Scratch tdb;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), BlobOptions(ps, 1));
  Table docs = VALUE_OR_FAIL(db->CreateTable(DocsSchema()));
  const size_t size = 100 * 1024;
  RecordId a, b;
  BlobId a_body;
  {
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    a_body = WriteBlob(t.get(), Pattern(1, size));
    a = VALUE_OR_FAIL(t->Insert(docs, Row{int64_t(1), std::string("a"), a_body}));
    a_body = FindBody(t.get(), docs, 1);
    // A second row naming the first row's stored BLOB gets its own copy.
    b = VALUE_OR_FAIL(t->Insert(docs, Row{int64_t(2), std::string("b"), a_body}));
    CHECK_FALSE(FindBody(t.get(), docs, 2) == a_body);
    REQUIRE_OK(t->Commit());
  }
  {
    // An update of another column keeps the BLOB (same id); the old version's going frees nothing.
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    REQUIRE_OK(t->Update(docs, a, Row{int64_t(1), std::string("a2"), a_body}));
    CHECK(FindBody(t.get(), docs, 1) == a_body);
    REQUIRE_OK(t->Commit());
  }
  REQUIRE_OK(db->CollectGarbage());
  {
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    REQUIRE_BYTES(ReadAll(t.get(), FindBody(t.get(), docs, 1)), Pattern(1, size));
    REQUIRE_BYTES(ReadAll(t.get(), FindBody(t.get(), docs, 2)), Pattern(1, size));
    // Replacing the BLOB, with a snapshot still reading the old one.
    std::unique_ptr<Transaction> reader = VALUE_OR_FAIL(db->Begin());
    REQUIRE_OK(t->Update(docs, a,
                         Row{int64_t(1), std::string("a3"), WriteBlob(t.get(), Pattern(3, size))}));
    REQUIRE_OK(t->Commit());
    REQUIRE_OK(db->CollectGarbage());
    REQUIRE_BYTES(ReadAll(reader.get(), FindBody(reader.get(), docs, 1)), Pattern(1, size));
    REQUIRE_OK(reader->Commit());
  }
  REQUIRE_OK(db->CollectGarbage());
  // Deleting the first row and collecting leaves the second row's copy intact.
  {
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    REQUIRE_BYTES(ReadAll(t.get(), FindBody(t.get(), docs, 1)), Pattern(3, size));
    REQUIRE_OK(t->Delete(docs, a));
    REQUIRE_OK(t->Commit());
  }
  REQUIRE_OK(db->CollectGarbage());
  RequireCleanValidate(db.get());
  std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
  REQUIRE_BYTES(ReadAll(t.get(), FindBody(t.get(), docs, 2)), Pattern(1, size));
  REQUIRE_OK(t->Commit());
}

TEST_CASE("blob: rolled-back inserts and savepoints give their BLOB pages back", "[blob]") {
  const uint32_t ps = 4096;
  Scratch tdb;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), BlobOptions(ps, 1));
  Table docs = VALUE_OR_FAIL(db->CreateTable(DocsSchema()));
  const size_t size = 200 * 1024;
  uint64_t pages_after_first = 0;
  for (int round = 0; round < 4; ++round) {
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    REQUIRE_OK(t->Savepoint("s"));
    for (int i = 0; i < 5; ++i) {
      VALUE_OR_FAIL(t->Insert(
          docs, Row{int64_t(i), std::string(5000, 'x'), WriteBlob(t.get(), Pattern(i, size))}));
    }
    REQUIRE_OK(t->RollbackToSavepoint("s"));
    for (int i = 0; i < 5; ++i) {
      VALUE_OR_FAIL(t->Insert(docs, Row{int64_t(i), std::string(5000, 'y'),
                                        WriteBlob(t.get(), Pattern(10 + i, size))}));
    }
    REQUIRE_OK(t->Rollback());
    if (round == 0) pages_after_first = db->stats().page_count;
    CHECK(db->stats().page_count <= pages_after_first + pages_after_first / 10);
  }
  RequireCleanValidate(db.get());
}

// ---------------------------------------------------------------- concurrent readers

TEST_CASE("blob: concurrent readers with random seeks get the right bytes", "[blob]") {
  const uint32_t ps = 4096;
  const uint64_t cap = page::BlobPageCapacity(ps);
  Scratch tdb;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), BlobOptions(ps, 1, 64));
  Table docs = VALUE_OR_FAIL(db->CreateTable(DocsSchema()));
  const std::vector<std::string> data = {Pattern(20, 500), Pattern(21, 75 * cap + 3),
                                         Pattern(22, 540 * cap + 99)};
  {
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    for (size_t i = 0; i < data.size(); ++i) {
      VALUE_OR_FAIL(
          t->Insert(docs, Row{int64_t(i), std::monostate{}, WriteBlob(t.get(), data[i])}));
    }
    REQUIRE_OK(t->Commit());
  }
  std::vector<BlobId> ids;
  {
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    for (size_t i = 0; i < data.size(); ++i) ids.push_back(FindBody(t.get(), docs, int64_t(i)));
    REQUIRE_OK(t->Commit());
  }
  ErrorLog log;
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&, th] {
      std::mt19937_64 rng(1000 + th);
      absl::StatusOr<std::unique_ptr<Transaction>> t = db->Begin();
      if (!t.ok()) return log.Add(t.status().ToString());
      std::vector<std::unique_ptr<BlobReader>> readers(ids.size());
      std::vector<char> buf;
      for (int i = 0; i < 400; ++i) {
        const size_t b = rng() % ids.size();
        if (!readers[b] || rng() % 8 == 0) {
          absl::StatusOr<std::unique_ptr<BlobReader>> r = (*t)->OpenBlob(ids[b]);
          if (!r.ok()) return log.Add(r.status().ToString());
          readers[b] = std::move(*r);
        }
        BlobReader* r = readers[b].get();
        const std::string& e = data[b];
        if (r->size() != e.size()) return log.Add("wrong size");
        const uint64_t pos = rng() % (e.size() + 1);
        const size_t n = 1 + rng() % (3 * cap);
        if (absl::Status s = r->Seek(pos); !s.ok()) return log.Add(s.ToString());
        buf.resize(n);
        absl::StatusOr<size_t> k = r->Read(buf.data(), n);
        if (!k.ok()) return log.Add(k.status().ToString());
        if (*k != std::min<uint64_t>(n, e.size() - pos) ||
            std::memcmp(buf.data(), e.data() + pos, *k) != 0) {
          return log.Add("thread " + std::to_string(th) + ": wrong bytes at " +
                         std::to_string(pos) + " of blob " + std::to_string(b));
        }
      }
      if (absl::Status s = (*t)->Commit(); !s.ok()) log.Add(s.ToString());
    });
  }
  for (std::thread& th : threads) th.join();
  RequireNoErrors(log);
  RequireCleanValidate(db.get());
}

// ---------------------------------------------------------------- a full temp directory

TEST_CASE("blob: a temp directory that cannot be used gives ResourceExhausted", "[blob]") {
  ScopedNoEmberTmp no_env;
  Scratch tdb;
  const std::string A = Pattern(30, 50000);
  {  // some stored BLOBs first, with a working temp space
    std::unique_ptr<Database> db = OpenOrFail(tdb.path(), BlobOptions(4096, 0));
    Table docs = VALUE_OR_FAIL(db->CreateTable(DocsSchema()));
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    VALUE_OR_FAIL(t->Insert(docs, Row{int64_t(1), std::monostate{}, WriteBlob(t.get(), A)}));
    VALUE_OR_FAIL(t->Insert(docs, Row{int64_t(2), std::monostate{}, WriteBlob(t.get(), "small")}));
    REQUIRE_OK(t->Commit());
    REQUIRE_OK(db->Close());
  }
  const int mode = GENERATE(1, 2);
  CAPTURE(mode);
  Options o = BlobOptions(4096, mode);
  o.create_if_missing = false;
  o.temp_directories = {"/nonexistent/dir"};
  o.temp_cache_limit = 0;
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), o);
  Table docs = VALUE_OR_FAIL(db->GetTable("docs"));
  auto exhausted = [](const absl::Status& s) {
    CAPTURE(s.ToString());
    CHECK(IsError(s, absl::StatusCode::kResourceExhausted, "temp space full"));
    CHECK(IsError(s, absl::StatusCode::kResourceExhausted, "/nonexistent/dir"));
  };

  std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
  const BlobId sa = FindBody(t.get(), docs, 1);
  const BlobId ss = FindBody(t.get(), docs, 2);
  std::unique_ptr<BlobWriter> w = VALUE_OR_FAIL(t->CreateBlob());
  if (mode == 2) {
    exhausted(w->Write("x"));
    exhausted(w->Write(A));  // again: still a clear error
  } else {
    REQUIRE_OK(w->Write(A));  // mode 1: written BLOBs live in pages
  }
  exhausted(t->Concat(sa, ss).status());
  exhausted(t->Concat(BlobId{}, "abc").status());
  exhausted(t->Concat(ss, "abc").status());
  BlobId x = sa;
  exhausted(t->Append(&x, "more"));
  BlobId y{};
  exhausted(t->Append(&y, "more"));
  // Operations that need no temp space still work.
  REQUIRE(VALUE_OR_FAIL(t->Concat(BlobId{}, BlobId{})).value != 0);
  REQUIRE_BYTES(ReadAll(t.get(), sa), A);
  REQUIRE_OK(t->Rollback());

  // Other transactions work, and one that met the error can still commit its other work.
  std::unique_ptr<Transaction> t2 = VALUE_OR_FAIL(db->Begin());
  exhausted(t2->Concat(sa, "x").status());
  VALUE_OR_FAIL(t2->Insert(docs, Row{int64_t(3), std::string("no blob"), BlobId{}}));
  if (mode == 1) {
    VALUE_OR_FAIL(t2->Insert(docs, Row{int64_t(4), std::monostate{}, WriteBlob(t2.get(), A)}));
  }
  REQUIRE_OK(t2->Commit());
  std::unique_ptr<Transaction> t3 = VALUE_OR_FAIL(db->Begin());
  REQUIRE_BYTES(ReadAll(t3.get(), FindBody(t3.get(), docs, 1)), A);
  REQUIRE_BYTES(ReadAll(t3.get(), FindBody(t3.get(), docs, 2)), "small");
  REQUIRE(FindBody(t3.get(), docs, 3).value == 0);
  if (mode == 1) REQUIRE_BYTES(ReadAll(t3.get(), FindBody(t3.get(), docs, 4)), A);
  REQUIRE_OK(t3->Commit());
  RequireCleanValidate(db.get());
  REQUIRE_OK(db->Close());
}

// ---------------------------------------------------------------- crash

TEST_CASE("blob: a crash in the middle of writing a BLOB", "[blob]") {
  // Variant 1: nothing synced after the BLOB's pages were evicted to disk. Variant 2: another
  // transaction commits (an fsync) after the uncommitted BLOB and its row reached the file.
  const bool other_commit = GENERATE(false, true);
  CAPTURE(other_commit);
  Scratch dir;
  const std::string path = dir.File("crash.edb");
  Options opts = BlobOptions(4096, 0, 32);
  opts.use_io_uring = false;
  opts.forced_writes = true;  // the power-loss model: what the last fsync made durable
  const uint64_t cap = page::BlobPageCapacity(4096);
  const std::string committed = Pattern(40, 40 * cap + 11);
  const std::string small = Pattern(41, 900);
  const std::string big = Pattern(42, 700 * cap + 5);  // level 2
  {
    io::FileOptions fo;
    fo.mode = io::OpenMode::kCreateNew;
    fo.use_io_uring = false;
    auto owned = std::make_unique<io::FaultFile>(VALUE_OR_FAIL(io::OpenPosixFile(path, fo)));
    io::FaultFile* ff = owned.get();
    std::unique_ptr<db::DatabaseImpl> d =
        VALUE_OR_FAIL(db::DatabaseImpl::OpenFile(std::move(owned), opts, /*create=*/true));
    Table docs = VALUE_OR_FAIL(d->CreateTable(DocsSchema()));
    {
      std::unique_ptr<Transaction> t = VALUE_OR_FAIL(d->Begin(TransactionOptions{}));
      VALUE_OR_FAIL(
          t->Insert(docs, Row{int64_t(1), std::monostate{}, WriteBlob(t.get(), committed)}));
      VALUE_OR_FAIL(t->Insert(docs, Row{int64_t(2), std::monostate{}, WriteBlob(t.get(), small)}));
      REQUIRE_OK(t->Commit());
    }
    const uint64_t writes_before = ff->writes();
    std::unique_ptr<Transaction> t2 = VALUE_OR_FAIL(d->Begin(TransactionOptions{}));
    VALUE_OR_FAIL(t2->Insert(docs, Row{int64_t(10), std::monostate{}, WriteBlob(t2.get(), big)}));
    // A second BLOB, half written and never assigned.
    std::unique_ptr<BlobWriter> w = VALUE_OR_FAIL(t2->CreateBlob());
    REQUIRE_OK(w->Write(std::string_view(big).substr(0, 100 * cap)));
    REQUIRE(ff->writes() > writes_before);  // the small cache pushed BLOB pages to the file
    if (other_commit) {
      std::unique_ptr<Transaction> t3 = VALUE_OR_FAIL(d->Begin(TransactionOptions{}));
      VALUE_OR_FAIL(
          t3->Insert(docs, Row{int64_t(3), std::monostate{}, WriteBlob(t3.get(), small)}));
      REQUIRE_OK(t3->Commit());
    }
    d->TEST_SimulateCrash();
    REQUIRE_OK(ff->DropUnsynced());
    w.reset();
    t2.reset();  // a no-op rollback: the database is gone
    d.reset();
  }
  Options plain = opts;
  plain.create_if_missing = false;
  std::unique_ptr<Database> db = OpenOrFail(path, plain);
  {
    ValidationReport rep = VALUE_OR_FAIL(db->Validate());
    INFO("first error: " << (rep.errors.empty() ? "" : rep.errors[0]));
    REQUIRE(rep.ok());
    ValidationReport freed = VALUE_OR_FAIL(db->Validate(ValidateOptions{true}));
    REQUIRE(freed.ok());
    REQUIRE(freed.freed_pages == rep.unreachable_pages.size());
    RequireCleanValidate(db.get());
  }
  Table docs = VALUE_OR_FAIL(db->GetTable("docs"));
  {
    std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
    auto rows = VALUE_OR_FAIL(ScanAll(t.get(), docs));
    REQUIRE(rows.size() == (other_commit ? 3u : 2u));
    for (const auto& [rid, row] : rows) REQUIRE(std::get<int64_t>(row[0]) != 10);
    REQUIRE_BYTES(ReadAll(t.get(), FindBody(t.get(), docs, 1)), committed);
    REQUIRE_BYTES(ReadAll(t.get(), FindBody(t.get(), docs, 2)), small);
    if (other_commit) REQUIRE_BYTES(ReadAll(t.get(), FindBody(t.get(), docs, 3)), small);
    // The database goes on: a big BLOB again, over the freed pages.
    VALUE_OR_FAIL(t->Insert(docs, Row{int64_t(11), std::monostate{}, WriteBlob(t.get(), big)}));
    REQUIRE_OK(t->Commit());
  }
  std::unique_ptr<Transaction> t = VALUE_OR_FAIL(db->Begin());
  REQUIRE_BYTES(ReadAll(t.get(), FindBody(t.get(), docs, 11)), big);
  REQUIRE_BYTES(ReadAll(t.get(), FindBody(t.get(), docs, 1)), committed);
  REQUIRE_OK(t->Commit());
  RequireCleanValidate(db.get());
  REQUIRE_OK(db->Close());
}

}  // namespace
}  // namespace ember::testing

namespace ember::testing {
namespace {

TEST_CASE("blob: temporary BLOB ids are unique in the database, not per transaction", "[blob]") {
  Scratch tdb;
  const int mode = GENERATE(0, 1, 2);
  CAPTURE(mode);
  std::unique_ptr<Database> db = OpenOrFail(tdb.path(), BlobOptions(4096, mode, 64));
  std::unique_ptr<Transaction> t1 = VALUE_OR_FAIL(db->Begin());
  std::unique_ptr<Transaction> t2 = VALUE_OR_FAIL(db->Begin());
  const BlobId a = VALUE_OR_FAIL(t1->Concat(BlobId{}, std::string_view("one")));
  const BlobId b = VALUE_OR_FAIL(t2->Concat(BlobId{}, std::string_view("two")));
  REQUIRE(blob::IsTemp(a.value));
  REQUIRE(blob::IsTemp(b.value));
  REQUIRE(a.value != b.value);
  // Another transaction's temporary BLOB is not ours: it cannot be read, appended to or
  // released, and our own is untouched by the attempt.
  REQUIRE(IsError(t2->OpenBlob(a).status(), absl::StatusCode::kNotFound));
  BlobId a_copy = a;
  REQUIRE_FALSE(t2->Append(&a_copy, "x").ok());
  REQUIRE_FALSE(t2->ReleaseBlob(a).ok());
  REQUIRE_BYTES(ReadAll(t1.get(), a), std::string("one"));
  REQUIRE_BYTES(ReadAll(t2.get(), b), std::string("two"));
  REQUIRE_OK(t1->Commit());
  REQUIRE_OK(t2->Commit());
}

}  // namespace
}  // namespace ember::testing
