// Tests for the database header page (engine/page/header_page.h).
#include "engine/page/header_page.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/util/coding.h"

namespace ember::page {
namespace {

constexpr const char* kFile = "/tmp/x.edb";

bool Contains(const absl::Status& s, const std::string& needle) {
  return std::string(s.message()).find(needle) != std::string::npos;
}

HeaderFields SampleFields(uint32_t ps) {
  HeaderFields h;
  h.page_size = ps;
  h.next_txn = 0x1122334455667788ull;
  h.oit = 1001;
  h.oat = 1002;
  h.ost = 1003;
  h.page_count = 0xABCDEF;
  h.first_tip = 2;
  h.catalog_pp = 3;
  h.flags = kHeaderFlagCleanShutdown;
  h.create_time_us = 1700000000123456ull;
  h.dw_first = 2;
  h.dw_slots = 256;
  h.sweep_interval = 0x0102030405060708ull;
  return h;
}

std::vector<uint8_t> MakeHeader(const HeaderFields& h) {
  std::vector<uint8_t> page(h.page_size);
  InitPage(page.data(), h.page_size, PageType::kHeader, 0);
  WriteHeader(page.data(), h);
  SealPage(page.data(), h.page_size);
  return page;
}

TEST_CASE("header page: round trip", "[page]") {
  for (uint32_t ps : {4096u, 8192u, 16384u, 32768u}) {
    const HeaderFields h = SampleFields(ps);
    auto page = MakeHeader(h);
    REQUIRE(VerifyPage(page.data(), ps, 0, kFile).ok());
    HeaderFields r;
    REQUIRE(ReadHeader(page.data(), &r, kFile).ok());
    CHECK(r.format_version == kFormatVersion);
    CHECK(r.page_size == ps);
    CHECK(r.next_txn == h.next_txn);
    CHECK(r.oit == h.oit);
    CHECK(r.oat == h.oat);
    CHECK(r.ost == h.ost);
    CHECK(r.page_count == h.page_count);
    CHECK(r.first_tip == h.first_tip);
    CHECK(r.catalog_pp == h.catalog_pp);
    CHECK(r.flags == (h.flags | kHeaderFlagSweepInterval));  // every write stores the interval
    CHECK(r.sweep_interval == h.sweep_interval);
    CHECK(r.create_time_us == h.create_time_us);
    CHECK(r.dw_first == h.dw_first);
    CHECK(r.dw_slots == h.dw_slots);
    uint32_t peeked = 0;
    REQUIRE(PeekPageSize(page.data(), kMinPageSize, &peeked, kFile).ok());
    CHECK(peeked == ps);
  }
}

TEST_CASE("header page: fields at the documented offsets", "[page]") {
  auto page = MakeHeader(SampleFields(8192));
  const uint8_t* p = page.data();
  CHECK(std::memcmp(p + 16, "EMBERDB\0", 8) == 0);
  CHECK(util::Get32(p + 24) == kFormatVersion);
  CHECK(util::Get32(p + 28) == 8192);
  CHECK(util::Get64(p + 32) == 0x1122334455667788ull);
  CHECK(util::Get64(p + 40) == 1001);
  CHECK(util::Get64(p + 48) == 1002);
  CHECK(util::Get64(p + 56) == 1003);
  CHECK(util::Get32(p + 64) == 0xABCDEF);
  CHECK(util::Get32(p + 68) == 2);
  CHECK(util::Get32(p + 72) == 3);
  CHECK(util::Get32(p + 76) == (kHeaderFlagCleanShutdown | kHeaderFlagSweepInterval));
  CHECK(util::Get64(p + 80) == 1700000000123456ull);
  CHECK(util::Get32(p + 88) == 2);
  CHECK(util::Get32(p + 92) == 256);
  CHECK(util::Get64(p + 96) == 0x0102030405060708ull);
  for (size_t i = 104; i < 8192; ++i) REQUIRE(p[i] == 0);
}

// Format 6 files written before the sweep interval was stored: zeros at 96 and flags bit 1
// clear. They read as the default, and an explicit 0 (no automatic sweep) stays 0.
TEST_CASE("header page: a header without the sweep interval reads as the default", "[page]") {
  HeaderFields h = SampleFields(4096);
  auto page = MakeHeader(h);
  util::Put32(page.data() + 76, kHeaderFlagCleanShutdown);
  util::Put64(page.data() + 96, 0);
  SealPage(page.data(), 4096);
  HeaderFields r;
  REQUIRE(ReadHeader(page.data(), &r, kFile).ok());
  CHECK(r.sweep_interval == kDefaultSweepInterval);
  CHECK(kDefaultSweepInterval == 20000);
  h.sweep_interval = 0;
  page = MakeHeader(h);
  REQUIRE(ReadHeader(page.data(), &r, kFile).ok());
  CHECK(r.sweep_interval == 0);
}

TEST_CASE("header page: bad magic is not an EmberDB database", "[page]") {
  auto page = MakeHeader(SampleFields(4096));
  page[16] = 'X';
  HeaderFields r;
  absl::Status s = ReadHeader(page.data(), &r, kFile);
  REQUIRE(absl::IsInvalidArgument(s));
  CHECK(Contains(s, "not an EmberDB database"));
  CHECK(Contains(s, kFile));
  uint32_t ps = 0;
  s = PeekPageSize(page.data(), 4096, &ps, kFile);
  REQUIRE(absl::IsInvalidArgument(s));
  CHECK(Contains(s, "not an EmberDB database"));

  // A file of zeros, or of text, is not ours either.
  std::vector<uint8_t> zeros(4096, 0);
  CHECK(absl::IsInvalidArgument(ReadHeader(zeros.data(), &r, kFile)));
  std::vector<uint8_t> text(4096, 'a');
  CHECK(absl::IsInvalidArgument(PeekPageSize(text.data(), text.size(), &ps, kFile)));
}

TEST_CASE("header page: the right magic on a page of another type is rejected", "[page]") {
  auto page = MakeHeader(SampleFields(4096));
  page[0] = static_cast<uint8_t>(PageType::kData);
  HeaderFields r;
  CHECK(absl::IsInvalidArgument(ReadHeader(page.data(), &r, kFile)));
}

TEST_CASE("header page: an older format version names the upgrade", "[page]") {
  HeaderFields h = SampleFields(4096);
  h.format_version = kFormatVersion - 1;
  auto page = MakeHeader(h);
  HeaderFields r;
  absl::Status s = ReadHeader(page.data(), &r, kFile);
  REQUIRE(absl::IsFailedPrecondition(s));
  CHECK(Contains(s, absl::StrCat("format version ", kFormatVersion - 1, " is older")));
  CHECK(Contains(s, "ember-bak -b"));
  CHECK(Contains(s, "ember-bak -c"));
  CHECK(Contains(s, kFile));
}

TEST_CASE("header page: unsupported format version", "[page]") {
  HeaderFields h = SampleFields(4096);
  h.format_version = kFormatVersion + 1;
  auto page = MakeHeader(h);
  HeaderFields r;
  absl::Status s = ReadHeader(page.data(), &r, kFile);
  REQUIRE(absl::IsFailedPrecondition(s));
  CHECK(Contains(s, absl::StrCat("format version ", kFormatVersion + 1, " not supported")));
  CHECK(Contains(s, kFile));
  uint32_t ps = 0;
  CHECK(absl::IsFailedPrecondition(PeekPageSize(page.data(), 4096, &ps, kFile)));
  h.format_version = 0;
  page = MakeHeader(h);
  CHECK(absl::IsFailedPrecondition(ReadHeader(page.data(), &r, kFile)));
}

TEST_CASE("header page: PeekPageSize rejects bad sizes and short input", "[page]") {
  for (uint32_t bad : {0u, 1u, 512u, 2048u, 4095u, 4097u, 6144u, 12288u, 65536u, 0xFFFFFFFFu}) {
    INFO("page size " << bad);
    std::vector<uint8_t> page(4096);
    InitPage(page.data(), 4096, PageType::kHeader, 0);
    HeaderFields h = SampleFields(4096);
    h.page_size = bad;
    WriteHeader(page.data(), h);
    uint32_t ps = 12345;
    absl::Status s = PeekPageSize(page.data(), 4096, &ps, kFile);
    CHECK(absl::IsDataLoss(s));
    CHECK(Contains(s, "invalid page size " + std::to_string(bad)));
    CHECK(ps == 12345);  // untouched on error
    HeaderFields r;
    CHECK(absl::IsDataLoss(ReadHeader(page.data(), &r, kFile)));
  }
  auto page = MakeHeader(SampleFields(4096));
  uint32_t ps = 0;
  CHECK(PeekPageSize(page.data(), 96, &ps, kFile).ok());
  absl::Status s = PeekPageSize(page.data(), 95, &ps, kFile);
  CHECK(absl::IsInvalidArgument(s));
  CHECK(Contains(s, "not an EmberDB database"));
  CHECK(absl::IsInvalidArgument(PeekPageSize(page.data(), 0, &ps, kFile)));
}

}  // namespace
}  // namespace ember::page
