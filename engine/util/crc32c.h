// CRC32C (Castagnoli) checksums for pages. Abseil 20220623 has none, so this uses the SSE4.2
// crc32 instruction when the CPU has it (checked once at run time) and a table otherwise.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ember::util {

// Extends `crc` (0 to start) with `n` bytes at `data`. Thread-safe.
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);
inline uint32_t Crc32c(const void* data, size_t n) { return Crc32cExtend(0, data, n); }

}  // namespace ember::util
