// Varint and zigzag coding: round trips at every length boundary, and rejection of truncated and
// over-long input.
#include "engine/util/coding.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace ember::util;

namespace {

std::vector<uint64_t> BoundaryValues() {
  std::vector<uint64_t> v = {0, 1, std::numeric_limits<uint64_t>::max()};
  for (int bits = 1; bits < 64; ++bits) {
    const uint64_t p = uint64_t{1} << bits;
    v.insert(v.end(), {p - 1, p, p + 1});
  }
  return v;
}

size_t ExpectedLength(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("varint: round trips at boundaries", "[util][coding]") {
  for (uint64_t v : BoundaryValues()) {
    std::string buf;
    PutVarint64(&buf, v);
    INFO("value " << v);
    CHECK(buf.size() == ExpectedLength(v));
    std::string_view in = buf;
    uint64_t got = ~v;
    REQUIRE(GetVarint64(&in, &got));
    CHECK(got == v);
    CHECK(in.empty());
  }
  std::string buf;
  PutVarint64(&buf, 127);
  CHECK(buf.size() == 1);
  PutVarint64(&buf, 128);
  CHECK(buf.size() == 3);
  buf.clear();
  PutVarint64(&buf, std::numeric_limits<uint64_t>::max());
  CHECK(buf.size() == 10);
}

TEST_CASE("varint: a sequence decodes in order", "[util][coding]") {
  std::mt19937_64 rng(1);
  std::vector<uint64_t> values;
  std::string buf;
  for (int i = 0; i < 10000; ++i) {
    const uint64_t v = rng() >> (rng() % 64);  // all lengths, not just 10-byte ones
    values.push_back(v);
    PutVarint64(&buf, v);
  }
  buf += "tail";
  std::string_view in = buf;
  for (uint64_t v : values) {
    uint64_t got;
    REQUIRE(GetVarint64(&in, &got));
    REQUIRE(got == v);
  }
  CHECK(in == "tail");
}

TEST_CASE("varint: truncated input is rejected without consuming", "[util][coding]") {
  for (uint64_t v : BoundaryValues()) {
    std::string buf;
    PutVarint64(&buf, v);
    for (size_t len = 0; len < buf.size(); ++len) {
      std::string_view in(buf.data(), len);
      uint64_t got;
      INFO("value " << v << " cut to " << len);
      CHECK_FALSE(GetVarint64(&in, &got));
      CHECK(in.size() == len);
    }
  }
}

TEST_CASE("varint: over-long input is rejected", "[util][coding]") {
  uint64_t got;
  // 11 bytes: ten continuation bytes then a terminator.
  std::string eleven(10, '\x80');
  eleven.push_back('\0');
  std::string_view in = eleven;
  CHECK_FALSE(GetVarint64(&in, &got));
  CHECK(in.size() == 11);
  // Ten bytes whose last byte carries bits beyond 64.
  std::string overflow(9, '\xFF');
  overflow.push_back('\x02');
  in = overflow;
  CHECK_FALSE(GetVarint64(&in, &got));
  // The largest legal ten-byte encoding still decodes.
  std::string max(9, '\xFF');
  max.push_back('\x01');
  in = max;
  REQUIRE(GetVarint64(&in, &got));
  CHECK(got == std::numeric_limits<uint64_t>::max());
}

TEST_CASE("zigzag: small magnitudes map to small codes", "[util][coding]") {
  CHECK(ZigZag(0) == 0);
  CHECK(ZigZag(-1) == 1);
  CHECK(ZigZag(1) == 2);
  CHECK(ZigZag(-2) == 3);
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{1}, int64_t{123456789}, int64_t{-987654321},
                    std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()}) {
    CHECK(UnZigZag(ZigZag(v)) == v);
  }
  CHECK(ZigZag(std::numeric_limits<int64_t>::min()) == std::numeric_limits<uint64_t>::max());
}

TEST_CASE("fixed-width helpers are little-endian", "[util][coding]") {
  unsigned char b[8];
  Put32(b, 0x01020304);
  CHECK(b[0] == 0x04);
  CHECK(b[3] == 0x01);
  CHECK(Get32(b) == 0x01020304u);
  Put64(b, 0x0102030405060708);
  CHECK(b[0] == 0x08);
  CHECK(Get64(b) == 0x0102030405060708u);
  Put16(b, 0xABCD);
  CHECK(Get16(b) == 0xABCD);
}
