// CRC32C: standard check values, chaining, and the SSE4.2 path against the table path.
#include "engine/util/crc32c.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/util/crc32c_internal.h"

using ember::util::Crc32c;
using ember::util::Crc32cExtend;
namespace internal = ember::util::internal;

namespace {

uint32_t Crc(const std::string& s) { return Crc32c(s.data(), s.size()); }

using CrcFn = uint32_t (*)(uint32_t, const void*, size_t);

// Both implementations, so every vector test covers both (hardware only where the CPU has it).
std::vector<CrcFn> Implementations() {
  std::vector<CrcFn> fns = {&Crc32cExtend, &internal::Crc32cExtendPortable};
  if (internal::Crc32cHardwareAvailable()) fns.push_back(&internal::Crc32cExtendHardware);
  return fns;
}

}  // namespace

TEST_CASE("crc32c: standard check values", "[util][crc32c]") {
  // RFC 3720 appendix B.4 and the common "123456789" check value.
  std::string zeros(32, '\0'), ones(32, '\xFF'), inc(32, 0), dec(32, 0);
  for (int i = 0; i < 32; ++i) {
    inc[i] = static_cast<char>(i);
    dec[i] = static_cast<char>(31 - i);
  }
  const unsigned char iscsi[48] = {// an iSCSI read command PDU
                                   0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                   0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00,
                                   0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00,
                                   0x00, 0x18, 0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                   0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  for (CrcFn fn : Implementations()) {
    auto crc = [fn](const std::string& s) { return fn(0, s.data(), s.size()); };
    CHECK(crc("") == 0u);
    CHECK(crc("a") == 0xC1D04330u);
    CHECK(crc("123456789") == 0xE3069283u);
    CHECK(crc(zeros) == 0x8A9136AAu);
    CHECK(crc(ones) == 0x62A8AB43u);
    CHECK(crc(inc) == 0x46DD794Eu);
    CHECK(crc(dec) == 0x113FDB5Cu);
    CHECK(fn(0, iscsi, sizeof(iscsi)) == 0xD9963A56u);
  }
  CHECK(Crc("123456789") == 0xE3069283u);
}

TEST_CASE("crc32c: extending chains like one pass", "[util][crc32c]") {
  std::mt19937_64 rng(42);
  std::string data(4096, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  const uint32_t whole = Crc(data);
  for (CrcFn fn : Implementations()) {
    for (size_t split = 0; split <= data.size(); split += (split < 64 ? 1 : 97)) {
      const uint32_t a = fn(0, data.data(), split);
      CHECK(fn(a, data.data() + split, data.size() - split) == whole);
    }
    // Extending by nothing changes nothing.
    CHECK(fn(whole, data.data(), 0) == whole);
  }
  CHECK(Crc32cExtend(Crc("1234"), "56789", 5) == 0xE3069283u);
}

TEST_CASE("crc32c: hardware and table paths agree", "[util][crc32c]") {
  if (!internal::Crc32cHardwareAvailable()) {
    WARN("CPU has no SSE4.2: only the table path is tested");
    return;
  }
  std::mt19937_64 rng(7);
  std::vector<unsigned char> buf(70000);
  for (auto& b : buf) b = static_cast<unsigned char>(rng());
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 300; ++n) lengths.push_back(n);
  // Around the three-stripe block (3 x 512 bytes) of the hardware path, and page sizes.
  for (size_t n : {511, 512, 513, 1535, 1536, 1537, 3079, 4095, 4096, 4097, 8192, 65536}) {
    lengths.push_back(n);
  }
  for (size_t n : lengths) {
    for (size_t align = 0; align < 16; ++align) {
      const uint32_t seed = static_cast<uint32_t>(rng());
      const unsigned char* p = buf.data() + align;
      INFO("length " << n << " alignment " << align);
      REQUIRE(internal::Crc32cExtendHardware(seed, p, n) ==
              internal::Crc32cExtendPortable(seed, p, n));
    }
  }
}
