// LEB128 varints for on-disk formats (see coding.h); the fixed-width helpers are inline there.
#include "engine/util/coding.h"

#include <algorithm>

namespace ember::util {

void PutVarint64Slow(std::string* dst, uint64_t v) {
  char buf[10];
  size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  dst->append(buf, n);
}

bool GetVarint64Slow(std::string_view* in, uint64_t* v) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(in->data());
  const size_t lim = std::min<size_t>(in->size(), 10);
  uint64_t result = 0;
  for (size_t i = 0; i < lim; ++i) {
    const uint64_t byte = p[i];
    // The 10th byte may only carry bit 63; anything more would silently overflow.
    if (i == 9 && byte > 1) return false;
    result |= (byte & 0x7F) << (7 * i);
    if ((byte & 0x80) == 0) {
      *v = result;
      in->remove_prefix(i + 1);
      return true;
    }
  }
  return false;  // truncated, or a continuation bit on the 10th byte
}

}  // namespace ember::util
