// Order-preserving B+tree key encoding (format documented in key_encoding.h). Decoders leave
// `*in` untouched when they fail, so a caller can report where a malformed key starts.
#include "engine/util/key_encoding.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace ember::util {
namespace {

constexpr uint64_t kSignBit = uint64_t{1} << 63;
constexpr uint64_t kCanonicalNaN = 0x7FF8000000000000;

void AppendBigEndian(std::string* key, uint64_t v) {
  char buf[8];
  for (int i = 7; i >= 0; --i, v >>= 8) buf[i] = static_cast<char>(v & 0xFF);
  key->append(buf, 8);
}

uint64_t ReadBigEndian(std::string_view in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(in[i]);
  return v;
}

bool HasTag(std::string_view in, KeyColumnType type) {
  return !in.empty() && static_cast<uint8_t>(in[0]) == static_cast<uint8_t>(type);
}

// Checks the tag and that 8 payload bytes follow; returns the payload.
bool ReadFixed(std::string_view in, KeyColumnType type, uint64_t* v) {
  if (in.size() < 9 || !HasTag(in, type)) return false;
  *v = ReadBigEndian(in.substr(1, 8));
  return true;
}

}  // namespace

void AppendKeyNull(std::string* key) { key->push_back(static_cast<char>(KeyColumnType::kNull)); }

void AppendKeyInt64(std::string* key, int64_t v) {
  key->push_back(static_cast<char>(KeyColumnType::kInt64));
  // Flipping the sign bit maps two's complement order onto unsigned order.
  AppendBigEndian(key, static_cast<uint64_t>(v) ^ kSignBit);
}

void AppendKeyDouble(std::string* key, double v) {
  key->push_back(static_cast<char>(KeyColumnType::kDouble));
  uint64_t bits;
  if (std::isnan(v)) {
    bits = kCanonicalNaN;  // one NaN, positive, so every NaN sorts last and equal
  } else if (v == 0.0) {
    bits = 0;  // -0.0 == +0.0
  } else {
    bits = std::bit_cast<uint64_t>(v);
  }
  // Positives: setting the sign bit puts them above all negatives. Negatives: inverting all bits
  // reverses their magnitude order.
  bits = (bits & kSignBit) ? ~bits : (bits | kSignBit);
  AppendBigEndian(key, bits);
}

void AppendKeyString(std::string* key, std::string_view v) {
  key->push_back(static_cast<char>(KeyColumnType::kString));
  for (char c : v) {
    key->push_back(c);
    if (c == '\0') key->push_back('\xFF');
  }
  key->append("\0\0", 2);
}

bool PeekKeyColumnType(std::string_view in, KeyColumnType* type) {
  if (in.empty()) return false;
  const uint8_t tag = static_cast<uint8_t>(in[0]);
  if (tag > static_cast<uint8_t>(KeyColumnType::kString)) return false;
  *type = static_cast<KeyColumnType>(tag);
  return true;
}

bool DecodeKeyNull(std::string_view* in) {
  if (!HasTag(*in, KeyColumnType::kNull)) return false;
  in->remove_prefix(1);
  return true;
}

bool DecodeKeyInt64(std::string_view* in, int64_t* v) {
  uint64_t bits;
  if (!ReadFixed(*in, KeyColumnType::kInt64, &bits)) return false;
  *v = static_cast<int64_t>(bits ^ kSignBit);
  in->remove_prefix(9);
  return true;
}

bool DecodeKeyDouble(std::string_view* in, double* v) {
  uint64_t bits;
  if (!ReadFixed(*in, KeyColumnType::kDouble, &bits)) return false;
  bits = (bits & kSignBit) ? (bits & ~kSignBit) : ~bits;
  *v = std::bit_cast<double>(bits);
  in->remove_prefix(9);
  return true;
}

bool DecodeKeyString(std::string_view* in, std::string* v) {
  if (!HasTag(*in, KeyColumnType::kString)) return false;
  std::string out;
  for (size_t i = 1; i < in->size(); ++i) {
    const char c = (*in)[i];
    if (c != '\0') {
      out.push_back(c);
      continue;
    }
    if (i + 1 >= in->size()) return false;  // a lone 0x00 at the end: cut short
    const uint8_t next = static_cast<uint8_t>((*in)[++i]);
    if (next == 0x00) {
      *v = std::move(out);
      in->remove_prefix(i + 1);
      return true;
    }
    if (next != 0xFF) return false;  // 0x00 must be followed by 0xFF (escape) or 0x00 (end)
    out.push_back('\0');
  }
  return false;  // no terminator
}

bool SkipKeyColumn(std::string_view* in) {
  KeyColumnType type;
  if (!PeekKeyColumnType(*in, &type)) return false;
  switch (type) {
    case KeyColumnType::kNull: in->remove_prefix(1); return true;
    case KeyColumnType::kInt64:
    case KeyColumnType::kDouble:
      if (in->size() < 9) return false;
      in->remove_prefix(9);
      return true;
    case KeyColumnType::kString:
      for (size_t i = 1; i + 1 < in->size(); ++i) {
        if ((*in)[i] != '\0') continue;
        const uint8_t next = static_cast<uint8_t>((*in)[++i]);
        if (next == 0x00) {
          in->remove_prefix(i + 1);
          return true;
        }
        if (next != 0xFF) return false;
      }
      return false;
  }
  return false;
}

}  // namespace ember::util
