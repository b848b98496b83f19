// Internal entry points of crc32c.cc, exposed so tests can check the SSE4.2 path and the portable
// table path against each other (the public Crc32cExtend only ever runs one of them).
#pragma once
#include <cstddef>
#include <cstdint>

namespace ember::util::internal {

// Both take and return a finished CRC (same convention as Crc32cExtend).
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t n);
// Only valid when Crc32cHardwareAvailable() is true.
uint32_t Crc32cExtendHardware(uint32_t crc, const void* data, size_t n);
bool Crc32cHardwareAvailable();

}  // namespace ember::util::internal
