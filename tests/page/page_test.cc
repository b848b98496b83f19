// Tests for the common page header, checksums and VerifyPage (engine/page/page.h).
#include "engine/page/page.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/util/coding.h"

namespace ember::page {
namespace {

constexpr uint32_t kAllSizes[] = {4096, 8192, 16384, 32768};
constexpr const char* kFile = "/path/db.edb";

// A sealed page with a recognisable body.
std::vector<uint8_t> MakeSealed(uint32_t ps, PageType type, PageNo no, uint32_t seed = 1) {
  std::vector<uint8_t> page(ps);
  InitPage(page.data(), ps, type, no);
  std::mt19937 rng(seed);
  for (uint32_t i = kPageHeaderSize; i < ps; ++i) page[i] = static_cast<uint8_t>(rng());
  SealPage(page.data(), ps);
  return page;
}

bool Contains(const absl::Status& s, const std::string& needle) {
  return std::string(s.message()).find(needle) != std::string::npos;
}

TEST_CASE("page: InitPage writes a fresh header over a zeroed page", "[page]") {
  for (uint32_t ps : kAllSizes) {
    std::vector<uint8_t> page(ps, 0xAB);
    InitPage(page.data(), ps, PageType::kData, 77);
    CHECK(GetType(page.data()) == PageType::kData);
    CHECK(GetPageNo(page.data()) == 77);
    CHECK(GetGeneration(page.data()) == 0);
    CHECK(GetFlags(page.data()) == 0);
    CHECK(util::Get32(page.data() + hdr::kChecksum) == 0);
    bool rest_zero = true;
    for (uint32_t i = kPageHeaderSize; i < ps; ++i) rest_zero &= page[i] == 0;
    CHECK(rest_zero);
    SetFlags(page.data(), 0x5A);
    CHECK(GetFlags(page.data()) == 0x5A);
    CHECK(page[1] == 0x5A);
  }
}

TEST_CASE("page: header fields sit at the documented offsets, little-endian", "[page]") {
  std::vector<uint8_t> page(4096);
  InitPage(page.data(), 4096, PageType::kPointer, 0x01020304);
  CHECK(page[0] == 4);
  CHECK(page[8] == 0x04);
  CHECK(page[9] == 0x03);
  CHECK(page[10] == 0x02);
  CHECK(page[11] == 0x01);
  SealPage(page.data(), 4096);
  CHECK(page[12] == 1);  // generation 1, LSB first
  CHECK(util::Get32(page.data() + 4) == ComputeChecksum(page.data(), 4096));
}

TEST_CASE("page: the checksum is standard CRC-32C over the page (known answer)", "[page]") {
  // Pins the on-disk rule of docs/format.md; the value was computed independently with a
  // bitwise CRC-32C (poly 0x82F63B78) over the page with the checksum field as zero.
  std::vector<uint8_t> page(4096);
  InitPage(page.data(), 4096, PageType::kData, 1);
  SealPage(page.data(), 4096);
  CHECK(util::Get32(page.data() + hdr::kChecksum) == 0x53CFCD68u);
}

TEST_CASE("page: seal/verify round trip for every page size", "[page]") {
  for (uint32_t ps : kAllSizes) {
    INFO("page size " << ps);
    auto page = MakeSealed(ps, PageType::kData, 123);
    CHECK(GetGeneration(page.data()) == 1);
    CHECK(VerifyPage(page.data(), ps, 123, kFile).ok());
    const uint32_t first_crc = util::Get32(page.data() + hdr::kChecksum);
    SealPage(page.data(), ps);
    CHECK(GetGeneration(page.data()) == 2);
    CHECK(util::Get32(page.data() + hdr::kChecksum) != first_crc);  // the generation changed
    CHECK(VerifyPage(page.data(), ps, 123, kFile).ok());
    CHECK(GetType(page.data()) == PageType::kData);
  }
}

TEST_CASE("page: the checksum ignores the stored checksum field", "[page]") {
  auto page = MakeSealed(8192, PageType::kBtree, 9);
  const uint32_t crc = ComputeChecksum(page.data(), 8192);
  CHECK(crc == util::Get32(page.data() + hdr::kChecksum));
  util::Put32(page.data() + hdr::kChecksum, 0xDEADBEEF);
  CHECK(ComputeChecksum(page.data(), 8192) == crc);
  util::Put32(page.data() + hdr::kChecksum, 0);
  CHECK(ComputeChecksum(page.data(), 8192) == crc);
}

TEST_CASE("page: one flipped bit anywhere is DataLoss", "[page]") {
  for (uint32_t ps : kAllSizes) {
    INFO("page size " << ps);
    auto page = MakeSealed(ps, PageType::kData, 123, ps);
    // Every bit of the smallest page; the header and a random sample of the others (the CRC's
    // single-bit guarantee does not depend on the size, the time does).
    std::vector<uint32_t> bits;
    if (ps == 4096) {
      for (uint32_t b = 0; b < ps * 8; ++b) bits.push_back(b);
    } else {
      std::mt19937 rng(ps);
      for (uint32_t b = 0; b < kPageHeaderSize * 8; ++b) bits.push_back(b);
      for (int i = 0; i < 3000; ++i) bits.push_back(rng() % (ps * 8));
      bits.push_back(ps * 8 - 1);
    }
    int failures = 0;
    uint32_t first_failed_bit = 0;
    for (uint32_t b : bits) {
      page[b / 8] ^= static_cast<uint8_t>(1u << (b % 8));
      absl::Status s = VerifyPage(page.data(), ps, 123, kFile);
      page[b / 8] ^= static_cast<uint8_t>(1u << (b % 8));
      if (!absl::IsDataLoss(s) || !Contains(s, "checksum mismatch")) {
        if (failures++ == 0) first_failed_bit = b;
      }
    }
    INFO("first undetected bit " << first_failed_bit);
    CHECK(failures == 0);
    CHECK(VerifyPage(page.data(), ps, 123, kFile).ok());
  }
}

TEST_CASE("page: the checksum error names the page, the file and both values", "[page]") {
  auto page = MakeSealed(4096, PageType::kData, 123);
  page[1000] ^= 0x10;
  absl::Status s = VerifyPage(page.data(), 4096, 123, kFile);
  REQUIRE(absl::IsDataLoss(s));
  CHECK(Contains(s, "page 123 of /path/db.edb: checksum mismatch (stored 0x"));
  CHECK(Contains(s, ", computed 0x"));
  char stored[16];
  std::snprintf(stored, sizeof stored, "0x%08x", util::Get32(page.data() + hdr::kChecksum));
  CHECK(Contains(s, stored));
}

TEST_CASE("page: a page sealed under another number is a misdirected write", "[page]") {
  for (uint32_t ps : kAllSizes) {
    auto page = MakeSealed(ps, PageType::kPip, 7);
    absl::Status s = VerifyPage(page.data(), ps, 8, kFile);
    REQUIRE(absl::IsDataLoss(s));
    CHECK(Contains(s, "page 8 of /path/db.edb"));
    CHECK(Contains(s, "holds page 7 (misdirected write)"));
  }
}

TEST_CASE("page: an all-zero page verifies and reads as free", "[page]") {
  for (uint32_t ps : kAllSizes) {
    std::vector<uint8_t> page(ps, 0);
    CHECK(VerifyPage(page.data(), ps, 42, kFile).ok());
    CHECK(GetType(page.data()) == PageType::kFree);
    // Any nonzero byte makes it a page that must carry a checksum.
    page[ps - 1] = 1;
    CHECK(absl::IsDataLoss(VerifyPage(page.data(), ps, 42, kFile)));
  }
}

TEST_CASE("page: an unknown page type with a valid checksum is DataLoss", "[page]") {
  std::vector<uint8_t> page(4096);
  InitPage(page.data(), 4096, static_cast<PageType>(200), 5);
  SealPage(page.data(), 4096);
  absl::Status s = VerifyPage(page.data(), 4096, 5, kFile);
  REQUIRE(absl::IsDataLoss(s));
  CHECK(Contains(s, "unknown page type 200"));
  CHECK(std::string(PageTypeName(static_cast<PageType>(200))) == "unknown");
}

TEST_CASE("page: every known type verifies and has a name", "[page]") {
  for (int t = 0; t <= static_cast<int>(PageType::kBlob); ++t) {
    auto page = MakeSealed(4096, static_cast<PageType>(t), 3);
    CHECK(VerifyPage(page.data(), 4096, 3, kFile).ok());
    CHECK(std::string(PageTypeName(static_cast<PageType>(t))) != "unknown");
  }
  CHECK(std::string(PageTypeName(PageType::kData)) == "data");
  CHECK(std::string(PageTypeName(PageType::kFree)) == "free");
}

TEST_CASE("page: page size validation", "[page]") {
  CHECK(ValidPageSize(4096));
  CHECK(ValidPageSize(8192));
  CHECK(ValidPageSize(16384));
  CHECK(ValidPageSize(32768));
  CHECK_FALSE(ValidPageSize(0));
  CHECK_FALSE(ValidPageSize(2048));
  CHECK_FALSE(ValidPageSize(5000));
  CHECK_FALSE(ValidPageSize(65536));
  std::vector<uint8_t> page(4096);
  CHECK(absl::IsInvalidArgument(VerifyPage(page.data(), 5000, 0, kFile)));
}

}  // namespace
}  // namespace ember::page
