// The torn-write model of the power-loss tests (reorder_file.h): that it really tears. A torn
// write must be whole 4096- or 512-byte units, some new and some old; ReorderFile must leave such
// pages in the file after a power loss, whichever path (pwrite, io_uring) wrote them; and a
// database page torn that way must fail its checksum: only the doublewrite area's repair at open
// (tests/crash/torn_page_test.cc, the crash tests) makes such a page whole again.
#include <algorithm>
#include <catch2/catch.hpp>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/io/file.h"
#include "engine/page/page.h"
#include "tests/support/crash_util.h"
#include "tests/support/reorder_file.h"
#include "tests/support/temp_dir.h"

namespace ember::testing {
namespace {

// Per unit of `torn`: 1 when it equals `after` there, 0 when it equals `before`, -1 otherwise.
std::vector<int> UnitSources(const std::string& before, const std::string& after,
                             const std::string& torn, size_t unit) {
  std::vector<int> out;
  for (size_t off = 0; off < torn.size(); off += unit) {
    const std::string piece = torn.substr(off, unit);
    out.push_back(piece == after.substr(off, unit)    ? 1
                  : piece == before.substr(off, unit) ? 0
                                                      : -1);
  }
  return out;
}

std::string Bytes(size_t len, std::mt19937_64& rng) {
  std::string s(len, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

TEST_CASE("tear model: a torn write is whole units, some new and some old", "[crash][tear]") {
  std::mt19937_64 rng(7);
  for (const size_t unit : kTearUnits) {
    for (const size_t len : {size_t{8192}, size_t{16384}, size_t{32768}}) {
      CAPTURE(unit, len);
      int prefixes = 0, suffixes = 0, others = 0;
      for (int i = 0; i < 300; ++i) {
        const std::string before = Bytes(len, rng), after = Bytes(len, rng);
        const std::vector<int> src =
            UnitSources(before, after, TearWrite(before, after, unit, rng), unit);
        REQUIRE(std::count(src.begin(), src.end(), -1) == 0);  // no unit is cut inside
        const auto fresh = std::count(src.begin(), src.end(), 1);
        REQUIRE(fresh > 0);                              // something of the write landed
        REQUIRE(fresh < static_cast<long>(src.size()));  // and not all of it
        const bool prefix = std::is_sorted(src.rbegin(), src.rend());  // 1..1 0..0
        const bool suffix = std::is_sorted(src.begin(), src.end());    // 0..0 1..1
        prefixes += prefix;
        suffixes += suffix;
        others += !prefix && !suffix;
      }
      CHECK(prefixes > 0);
      CHECK(suffixes > 0);
      if (len / unit > 2) CHECK(others > 0);
    }
  }
  // One unit cannot tear.
  const std::string a(4096, 'a'), b(4096, 'b');
  CHECK(TearWrite(a, b, 4096, rng) == b);
}

TEST_CASE("tear model: ReorderFile leaves torn pages after a power loss, on either write path",
          "[crash][tear]") {
  const bool uring = GENERATE(false, true);
  CAPTURE(uring);
  constexpr size_t kPage = 8192;
  constexpr int kPages = 16;
  testing::TempDir dir;
  REQUIRE(dir.ok());
  io::FileOptions fo;
  fo.mode = io::OpenMode::kCreateNew;
  fo.use_io_uring = uring;
  auto base = io::OpenPosixFile(dir.File("t.edb"), fo);
  REQUIRE(base.ok());
  ReorderFile f(std::make_unique<NoSyncFile>(std::move(*base)));
  std::mt19937_64 rng(11);
  std::vector<std::string> old_pages, new_pages;
  std::vector<io::WriteRequest> reqs;
  for (int i = 0; i < kPages; ++i) old_pages.push_back(Bytes(kPage, rng));
  for (int i = 0; i < kPages; ++i) reqs.push_back({i * kPage, old_pages[i].data(), kPage});
  REQUIRE(f.WriteBatch(reqs).ok());
  REQUIRE(f.Sync().ok());
  for (int i = 0; i < kPages; ++i) new_pages.push_back(Bytes(kPage, rng));
  for (int i = 0; i < kPages; ++i) reqs[i].data = new_pages[i].data();
  REQUIRE(f.WriteBatch(reqs).ok());
  RequireWritePath(uring, f.write_path_counts(), true);

  f.set_tear_percent(100);
  REQUIRE(f.PowerLoss(rng).ok());
  CHECK(f.torn() > 0);
  int torn_pages = 0;
  for (int i = 0; i < kPages; ++i) {
    std::string got(kPage, '\0');
    REQUIRE(f.Read(i * kPage, got.data(), kPage).ok());
    // Whatever the unit of the tear, every 512 bytes are wholly old or wholly new.
    const std::vector<int> src = UnitSources(old_pages[i], new_pages[i], got, 512);
    INFO("page " << i);
    REQUIRE(std::count(src.begin(), src.end(), -1) == 0);
    const auto fresh = std::count(src.begin(), src.end(), 1);
    torn_pages += fresh > 0 && fresh < static_cast<long>(src.size());
  }
  CHECK(torn_pages > 0);
}

// Two versions of each page of a real database, then tears of them: a tear that is neither
// version must fail VerifyPage (a checksum DataLoss).
TEST_CASE("tear model: a database page torn at a 4096 or 512 boundary fails its checksum",
          "[crash][tear]") {
  constexpr uint32_t kPageSize = 8192;
  ScratchDir dir("ember-tear");
  REQUIRE(dir.ok());
  const std::string path = dir.File("tear.edb");
  auto snapshot = [&] {
    std::unique_ptr<io::File> f =
        ValueOr(io::OpenPosixFile(path, io::FileOptions{}), "open the file");
    std::string bytes(ValueOr(f->Size(), "Size"), '\0');
    CRASH_REQUIRE_OK(f->Read(0, bytes.data(), bytes.size()));
    return bytes;
  };
  Options opts;
  opts.page_size = kPageSize;
  opts.create_if_missing = true;
  {
    std::unique_ptr<Database> db = ValueOr(Database::Open(path, opts), "create");
    const Table t =
        ValueOr(db->CreateTable(
                    {"t", {{"id", ColumnType::kInt64, false}, {"v", ColumnType::kBytes, false}}}),
                "CreateTable");
    std::unique_ptr<Transaction> tx = ValueOr(db->Begin(), "Begin");
    for (int64_t id = 0; id < 200; ++id) {
      CRASH_REQUIRE_OK(tx->Insert(t, Row{id, std::string(100, 'a' + id % 26)}).status());
    }
    CRASH_REQUIRE_OK(tx->Commit());
    CRASH_REQUIRE_OK(db->Close());
  }
  const std::string before = snapshot();
  {
    std::unique_ptr<Database> db = ValueOr(Database::Open(path, opts), "reopen");
    const Table t = ValueOr(db->GetTable("t"), "GetTable");
    std::unique_ptr<Transaction> tx = ValueOr(db->Begin(), "Begin");
    std::unique_ptr<Cursor> c = ValueOr(tx->Scan(t), "Scan");
    std::vector<std::pair<RecordId, Row>> rows;
    while (c->Valid()) {
      rows.emplace_back(c->id(), c->row());
      CRASH_REQUIRE_OK(c->Next());
    }
    for (auto& [rec, row] : rows) {
      CRASH_REQUIRE_OK(tx->Update(t, rec, Row{row[0], std::string(100, 'z')}));
    }
    CRASH_REQUIRE_OK(tx->Commit());
    CRASH_REQUIRE_OK(db->Close());
  }
  const std::string after = snapshot();
  std::mt19937_64 rng(3);
  int checked = 0;
  for (size_t off = 0; off + kPageSize <= std::min(before.size(), after.size()); off += kPageSize) {
    const std::string old_page = before.substr(off, kPageSize),
                      new_page = after.substr(off, kPageSize);
    const page::PageNo no = static_cast<page::PageNo>(off / kPageSize);
    const auto* o = reinterpret_cast<const uint8_t*>(old_page.data());
    const auto* n = reinterpret_cast<const uint8_t*>(new_page.data());
    if (old_page == new_page || !page::VerifyPage(o, kPageSize, no, "before").ok() ||
        !page::VerifyPage(n, kPageSize, no, "after").ok()) {
      continue;
    }
    for (int i = 0; i < 40; ++i) {
      const std::string torn = TearWrite(old_page, new_page, kTearUnits[i % 2], rng);
      if (torn == old_page || torn == new_page) continue;  // the units that differ all agree
      CAPTURE(no, i);
      const absl::Status s =
          page::VerifyPage(reinterpret_cast<const uint8_t*>(torn.data()), kPageSize, no, "torn");
      INFO(s.ToString());
      REQUIRE(absl::IsDataLoss(s));
      ++checked;
    }
  }
  CHECK(checked > 50);
}

}  // namespace
}  // namespace ember::testing
