// The bytes of one sort entry, the same in a RunBuilder's arena and in a spilled run: a u16 key
// length, the key, a u64 value (host byte order: runs never outlive the process). A run is its
// entries back to back in (key, value) order, so a reader parses it without an index.
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace ember::sort {

inline constexpr size_t kEntryOverhead = 2 + 8;
inline constexpr size_t kMaxKeyBytes = 0xFFFF;
inline constexpr size_t kMaxEntryBytes = kEntryOverhead + kMaxKeyBytes;

inline size_t EntryBytes(size_t key_len) { return kEntryOverhead + key_len; }

inline void PutEntry(char* at, std::string_view key, uint64_t value) {
  const uint16_t len = static_cast<uint16_t>(key.size());
  std::memcpy(at, &len, 2);
  std::memcpy(at + 2, key.data(), key.size());
  std::memcpy(at + 2 + key.size(), &value, 8);
}

inline uint16_t EntryKeyLen(const char* at) {
  uint16_t len;
  std::memcpy(&len, at, 2);
  return len;
}
inline std::string_view EntryKey(const char* at) {
  return std::string_view(at + 2, EntryKeyLen(at));
}
inline uint64_t EntryValue(const char* at, size_t key_len) {
  uint64_t v;
  std::memcpy(&v, at + 2 + key_len, 8);
  return v;
}

// The key's first 8 bytes as a big-endian integer, zero-padded: integer order is memcmp order
// of the padded bytes, so only keys with equal prefixes need their bytes compared.
inline uint64_t KeyPrefix(std::string_view key) {
  uint64_t p = 0;
  std::memcpy(&p, key.data(), key.size() < 8 ? key.size() : 8);
  if constexpr (std::endian::native == std::endian::little) p = __builtin_bswap64(p);
  return p;
}

// KeyPrefix of the key of the entry at `at`, without a variable-length copy: the key is
// followed by the 8-byte value, so 8 bytes can always be read from its start.
inline uint64_t EntryPrefix(const char* at, size_t key_len) {
  uint64_t p;
  std::memcpy(&p, at + 2, 8);
  if constexpr (std::endian::native == std::endian::little) p = __builtin_bswap64(p);
  return key_len >= 8 ? p : p & ~(~uint64_t{0} >> (8 * key_len));
}

// Three-way (key, value) order: the total order of a sort's output.
inline int CompareEntry(std::string_view ka, uint64_t va, std::string_view kb, uint64_t vb) {
  if (const int c = ka.compare(kb); c != 0) return c;
  return va < vb ? -1 : va > vb ? 1 : 0;
}

}  // namespace ember::sort
