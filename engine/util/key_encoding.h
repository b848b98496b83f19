// Order-preserving key encoding for B+tree keys: memcmp order of the encoded bytes equals the
// order of the typed values, column by column, so the B+tree compares plain byte strings.
//   NULL      -> 0x00                       (NULLs sort first)
//   int64     -> 0x01, 8 bytes big-endian with the sign bit flipped
//   double    -> 0x02, 8 bytes: IEEE bits, sign flipped for positives, all bits flipped for
//                negatives (-0.0 is normalised to +0.0; NaN sorts last)
//   string    -> 0x03, bytes with 0x00 escaped as 0x00 0xFF, then terminator 0x00 0x00, so a
//                prefix sorts before its extensions and multi-column keys stay ordered.
// A descending column would invert every byte; not needed yet.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace ember::util {

void AppendKeyNull(std::string* key);
void AppendKeyInt64(std::string* key, int64_t v);
void AppendKeyDouble(std::string* key, double v);
void AppendKeyString(std::string* key, std::string_view v);

// Decoders for tools and tests: each reads one column from the front of `*in` and advances it.
// They return false on malformed input (never crash).
enum class KeyColumnType : uint8_t { kNull = 0, kInt64 = 1, kDouble = 2, kString = 3 };
bool PeekKeyColumnType(std::string_view in, KeyColumnType* type);
bool DecodeKeyNull(std::string_view* in);
bool DecodeKeyInt64(std::string_view* in, int64_t* v);
bool DecodeKeyDouble(std::string_view* in, double* v);
bool DecodeKeyString(std::string_view* in, std::string* v);
// Steps over one column of any type without decoding it (false on malformed input).
bool SkipKeyColumn(std::string_view* in);

}  // namespace ember::util
