// CRC32C (Castagnoli): SSE4.2 crc32 instruction when the CPU has it, slicing-by-8 tables
// otherwise. Both paths keep the standard pre/post inversion inside, so callers chain finished
// CRCs: Crc32cExtend(Crc32c(a), b) == Crc32c(a + b).
#include "engine/util/crc32c.h"

#include <array>
#include <cstring>

#include "engine/util/crc32c_internal.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#define EMBER_CRC32C_X86 1
#endif

namespace ember::util {
namespace internal {
namespace {

constexpr uint32_t kPoly = 0x82F63B78;  // reflected Castagnoli polynomial

// tables[k][b] is the CRC of byte b followed by k zero bytes, which lets the loop fold eight
// input bytes with eight independent lookups instead of a serial chain.
using Tables = std::array<std::array<uint32_t, 256>, 8>;
constexpr Tables MakeTables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c >> 1) ^ ((c & 1) ? kPoly : 0);
    t[0][b] = c;
  }
  for (uint32_t b = 0; b < 256; ++b) {
    for (int k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
  }
  return t;
}
constexpr Tables kTables = MakeTables();

}  // namespace

uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);  // little-endian host (asserted in coding.h)
    w ^= c;
    c = kTables[7][w & 0xFF] ^ kTables[6][(w >> 8) & 0xFF] ^ kTables[5][(w >> 16) & 0xFF] ^
        kTables[4][(w >> 24) & 0xFF] ^ kTables[3][(w >> 32) & 0xFF] ^ kTables[2][(w >> 40) & 0xFF] ^
        kTables[1][(w >> 48) & 0xFF] ^ kTables[0][w >> 56];
  }
  for (; n > 0; ++p, --n) c = (c >> 8) ^ kTables[0][(c ^ *p) & 0xFF];
  return ~c;
}

#if EMBER_CRC32C_X86
namespace {

// The crc32 instruction has a latency of three cycles and a throughput of one, so one stream
// of 8-byte steps runs at a third of its speed. Three streams over adjacent blocks of
// kStripe bytes run together, and their registers are then joined: the register after
// A || B is shift(reg(A), |B|) ^ reg(0, B), where shift appends |B| zero bytes (linear).
constexpr size_t kStripe = 512;

// shift(x) = the register x after kStripe zero bytes, as four byte-indexed tables.
struct ShiftTables {
  std::array<std::array<uint32_t, 256>, 4> t;
  ShiftTables() {
    for (int k = 0; k < 4; ++k) {
      for (uint32_t b = 0; b < 256; ++b) {
        uint32_t c = b << (8 * k);
        for (size_t i = 0; i < kStripe; ++i) c = (c >> 8) ^ kTables[0][c & 0xFF];
        t[k][b] = c;
      }
    }
  }
  uint32_t Shift(uint32_t x) const {
    return t[0][x & 0xFF] ^ t[1][(x >> 8) & 0xFF] ^ t[2][(x >> 16) & 0xFF] ^ t[3][x >> 24];
  }
};

const ShiftTables& Shifts() {
  static const ShiftTables tables;
  return tables;
}

}  // namespace

__attribute__((target("sse4.2"))) uint32_t Crc32cExtendHardware(uint32_t crc, const void* data,
                                                                size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t c = ~crc;
  // Align so the 8-byte loads in the main loop never straddle a cache line.
  for (; n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0; ++p, --n) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p);
  }
  if (n >= 3 * kStripe) {
    const ShiftTables& shifts = Shifts();
    for (; n >= 3 * kStripe; p += 3 * kStripe, n -= 3 * kStripe) {
      uint64_t c1 = 0, c2 = 0;
      for (size_t i = 0; i < kStripe; i += 8) {
        uint64_t w0, w1, w2;
        std::memcpy(&w0, p + i, 8);
        std::memcpy(&w1, p + kStripe + i, 8);
        std::memcpy(&w2, p + 2 * kStripe + i, 8);
        c = _mm_crc32_u64(c, w0);
        c1 = _mm_crc32_u64(c1, w1);
        c2 = _mm_crc32_u64(c2, w2);
      }
      c = shifts.Shift(shifts.Shift(static_cast<uint32_t>(c)) ^ static_cast<uint32_t>(c1)) ^
          static_cast<uint32_t>(c2);
    }
  }
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
  }
  for (; n > 0; ++p, --n) c = _mm_crc32_u8(static_cast<uint32_t>(c), *p);
  return ~static_cast<uint32_t>(c);
}

bool Crc32cHardwareAvailable() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#else
uint32_t Crc32cExtendHardware(uint32_t crc, const void* data, size_t n) {
  return Crc32cExtendPortable(crc, data, n);
}
bool Crc32cHardwareAvailable() { return false; }
#endif

}  // namespace internal

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n) {
  // Resolved once: the function-local static makes the CPU check thread-safe and one-time.
  using Fn = uint32_t (*)(uint32_t, const void*, size_t);
  static const Fn fn = internal::Crc32cHardwareAvailable() ? internal::Crc32cExtendHardware
                                                           : internal::Crc32cExtendPortable;
  return fn(crc, data, n);
}

}  // namespace ember::util
