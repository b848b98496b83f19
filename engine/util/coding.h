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
inline uint16_t Get16(const void* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t Get32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t Get64(const void* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
static_assert(std::endian::native == std::endian::little, "EmberDB assumes a little-endian host");

// LEB128 varints (1-10 bytes). The raw-pointer forms are what page formats use; the string
// forms wrap them. One- and two-byte varints (lengths, small numbers) take the inline path.

// Writes `v` at `p` (room for 10 bytes); returns the byte after it.
inline uint8_t* EncodeVarint64(uint8_t* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}

// Bytes of `v` without its high zero bytes (at least one): the width of a value stored in
// minimal little- or big-endian form (B-tree values, index entries' record numbers).
inline size_t SignificantBytes(uint64_t v) {
  return v == 0 ? 1 : (64 - static_cast<size_t>(__builtin_clzll(v)) + 7) / 8;
}

// Bytes EncodeVarint64 writes for `v`.
inline size_t VarintLength(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}
// Reads a varint at `p`, not past `end`; returns the byte after it, or null when it is
// truncated or over-long (more than 10 bytes, or bits past 63).
const uint8_t* DecodeVarint64Slow(const uint8_t* p, const uint8_t* end, uint64_t* v);
inline const uint8_t* DecodeVarint64(const uint8_t* p, const uint8_t* end, uint64_t* v) {
  if (end - p >= 1 && p[0] < 0x80) {
    *v = p[0];
    return p + 1;
  }
  if (end - p >= 2 && p[1] < 0x80) {
    *v = (p[0] & 0x7Fu) | uint64_t{p[1]} << 7;
    return p + 2;
  }
  return DecodeVarint64Slow(p, end, v);
}

// Appends `v` as a varint.
inline void PutVarint64(std::string* dst, uint64_t v) {
  if (v < 0x80) {
    dst->push_back(static_cast<char>(v));
    return;
  }
  uint8_t buf[10];
  dst->append(reinterpret_cast<const char*>(buf), EncodeVarint64(buf, v) - buf);
}
// Decodes a varint from the front of `*in`, advancing it. False if truncated or over-long.
inline bool GetVarint64(std::string_view* in, uint64_t* v) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(in->data());
  const uint8_t* q = DecodeVarint64(p, p + in->size(), v);
  if (q == nullptr) return false;
  in->remove_prefix(static_cast<size_t>(q - p));
  return true;
}
// Zigzag mapping so small negative numbers encode short.
inline uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline int64_t UnZigZag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

}  // namespace ember::util
