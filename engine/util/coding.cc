// LEB128 varints for on-disk formats (see coding.h): the out-of-line part of decoding.
#include "engine/util/coding.h"

namespace ember::util {

const uint8_t* DecodeVarint64Slow(const uint8_t* p, const uint8_t* end, uint64_t* v) {
  uint64_t result = 0;
  for (size_t i = 0; i < 10 && p + i < end; ++i) {
    const uint64_t byte = p[i];
    // The 10th byte may only carry bit 63; anything more would silently overflow.
    if (i == 9 && byte > 1) return nullptr;
    result |= (byte & 0x7F) << (7 * i);
    if ((byte & 0x80) == 0) {
      *v = result;
      return p + i + 1;
    }
  }
  return nullptr;  // truncated, or a continuation bit on the 10th byte
}

}  // namespace ember::util
