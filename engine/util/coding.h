// Little-endian fixed-width and varint encoding for on-disk formats. Every on-disk integer is
// little-endian regardless of the host, read and written through these helpers.
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace ember::util {

inline void Put16(void* p, uint16_t v) { std::memcpy(p, &v, 2); }
inline void Put32(void* p, uint32_t v) { std::memcpy(p, &v, 4); }
inline void Put64(void* p, uint64_t v) { std::memcpy(p, &v, 8); }
inline uint16_t Get16(const void* p) { uint16_t v; std::memcpy(&v, p, 2); return v; }
inline uint32_t Get32(const void* p) { uint32_t v; std::memcpy(&v, p, 4); return v; }
inline uint64_t Get64(const void* p) { uint64_t v; std::memcpy(&v, p, 8); return v; }
static_assert(std::endian::native == std::endian::little, "EmberDB assumes a little-endian host");

// Appends `v` as a LEB128 varint (1-10 bytes). Inline for the one-byte case (row encoding
// writes a varint per column).
void PutVarint64Slow(std::string* dst, uint64_t v);
inline void PutVarint64(std::string* dst, uint64_t v) {
  if (v < 0x80) {
    dst->push_back(static_cast<char>(v));
  } else {
    PutVarint64Slow(dst, v);
  }
}
// Bytes PutVarint64 writes for `v`.
inline size_t VarintLength(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}
// Decodes a varint from the front of `*in`, advancing it. False if truncated or over-long.
// Inline for the one-byte case (row decoding reads a varint per column).
bool GetVarint64Slow(std::string_view* in, uint64_t* v);
inline bool GetVarint64(std::string_view* in, uint64_t* v) {
  const size_t n = in->size();
  const uint8_t* p = reinterpret_cast<const uint8_t*>(in->data());
  if (n >= 1 && p[0] < 0x80) {
    *v = p[0];
    in->remove_prefix(1);
    return true;
  }
  if (n >= 2 && p[1] < 0x80) {
    *v = (p[0] & 0x7Fu) | uint64_t{p[1]} << 7;
    in->remove_prefix(2);
    return true;
  }
  return GetVarint64Slow(in, v);
}
// Zigzag mapping so small negative numbers encode short.
inline uint64_t ZigZag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
inline int64_t UnZigZag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

}  // namespace ember::util
