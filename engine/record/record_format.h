// The record format: the header every stored record version carries on a data page, the
// encoding of a row's values into a body, body compression (run-length for mid-sized bodies,
// zstd for large ones) and the delta a back version may be stored as.
//
// Record header (little-endian, variable length), docs/format.md "Record format":
//   1 byte    flags (RecordFlag bits 0-5) | encoding << 6 (BodyEncoding of the body)
//   varint    txn << 1 | has_back   (txn: transaction that wrote this version, 0 for fragments)
//   -- only with has_back (back_page != 0), fixed width so repointing never changes the size:
//   u32 back_page, u16 back_line    the next older version
//   -- only with kRecFragmented, fixed width for the same reason:
//   u32 frag_page, u16 frag_line    the next fragment
//   then the body bytes (for a fragmented record: the first part of the stored body)
// A head version of a small row takes 2-4 header bytes instead of a fixed 16.
//
// A stored body is the row encoding, possibly compressed, or (kRecDelta) a delta against the
// next NEWER version's row encoding.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ember/schema.h"
#include "engine/util/coding.h"

namespace ember::record {

enum RecordFlag : uint8_t {
  kRecDeleted = 0x01,      // a delete stub: no body
  kRecDelta = 0x02,        // body is a delta against the newer version
  kRecFragmented = 0x04,   // the body continues in fragments (frag_page/frag_line)
  kRecFragment = 0x08,     // this line is a fragment of another record, not a version
  kRecBackVersion = 0x10,  // an older version: not a primary record (scans skip it)
  kRecBlob = 0x20,         // a BLOB header record (engine/blob), not a version
};
// Lines that are not primary records: scans, record numbers and version walks skip them.
constexpr uint8_t kRecNotPrimary = kRecBackVersion | kRecFragment | kRecBlob;

enum class BodyEncoding : uint8_t { kPlain = 0, kRle = 1, kZstd = 2 };

// The largest header: 1 + a 10-byte varint + back pointer + fragment pointer.
constexpr size_t kRecMaxHeaderSize = 23;
constexpr size_t kRecPointerSize = 6;  // u32 page + u16 line

struct RecordHeader {
  uint64_t txn = 0;
  uint32_t back_page = 0;
  uint16_t back_line = 0;
  uint8_t flags = 0;
  BodyEncoding encoding = BodyEncoding::kPlain;
  uint32_t frag_page = 0;
  uint16_t frag_line = 0;
  // Encoded size; depends on txn, on whether there is a back version and on kRecFragmented
  // (not on the pointers' values).
  size_t size() const { return SizeWith(back_page != 0, false); }
  // The size this header takes with a back pointer if `has_back` and a fragment pointer if
  // `fragmented` (or kRecFragmented): what a head being built will need before its pointers
  // are known. (The has_back bit never changes the varint's length.)
  size_t SizeWith(bool has_back, bool fragmented) const {
    return 1 + util::VarintLength(txn << 1) + (has_back ? kRecPointerSize : 0) +
           (fragmented || (flags & kRecFragmented) ? kRecPointerSize : 0);
  }
};

// Appends the header. `h.txn` must be below 2^63 (transaction numbers are).
void EncodeHeader(const RecordHeader& h, std::string* out);
// Parses the header at the front of `rec`; false if too short or inconsistent. Inline: every
// version read and written decodes one.
inline bool DecodeHeader(std::string_view rec, RecordHeader* h) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(rec.data());
  const uint8_t* const end = p + rec.size();
  if (rec.empty() || (p[0] >> 6) > 2) return false;
  h->flags = p[0] & 0x3F;
  h->encoding = static_cast<BodyEncoding>(p[0] >> 6);
  uint64_t word;
  p = util::DecodeVarint64(p + 1, end, &word);
  if (p == nullptr) return false;
  h->txn = word >> 1;
  const size_t need =
      ((word & 1) ? kRecPointerSize : 0) + ((h->flags & kRecFragmented) ? kRecPointerSize : 0);
  if (static_cast<size_t>(end - p) < need) return false;
  h->back_page = 0;
  h->back_line = 0;
  if (word & 1) {
    h->back_page = util::Get32(p);
    h->back_line = util::Get16(p + 4);
    if (h->back_page == 0) return false;
    p += kRecPointerSize;
  }
  h->frag_page = 0;
  h->frag_line = 0;
  if (h->flags & kRecFragmented) {
    h->frag_page = util::Get32(p);
    h->frag_line = util::Get16(p + 4);
  }
  return true;
}

// Row <-> row encoding, checked against the table's columns.
absl::Status ValidateRow(const std::vector<Column>& cols, const Row& row);
// `spilled`, when given (one entry per value), names values stored out of line: a non-zero
// entry i means string/bytes value i is kept in the stored BLOB with that id (TOAST-like), and
// only the id goes into the record. DecodeRow gives such a value back as that BlobId in a
// string/bytes column; UnspillRow-style callers (engine/db) read the bytes back.
void EncodeRow(const Row& row, std::string* out, const std::vector<uint64_t>* spilled = nullptr);
absl::Status DecodeRow(std::string_view in, size_t ncols, Row* row);
// String/bytes values at least this long are stored out of line, in a BLOB. Above the longest
// index key of every page size, so an indexed value is never spilled (its insert fails first).
constexpr size_t SpillThreshold(uint32_t page_size) { return page_size / 4; }

// Compression of a row encoding for storage: picks the smallest of plain, RLE (bodies over
// 64 bytes) and zstd (bodies over 512 bytes).
BodyEncoding CompressBody(std::string_view raw, std::string* out);
absl::Status DecompressBody(BodyEncoding enc, std::string_view stored, std::string* raw);

// Delta of `older` against `newer` (both raw row encodings): applying it to `newer` gives
// `older`. Returns false when the delta would not be smaller than `older` itself.
bool MakeDelta(std::string_view newer, std::string_view older, std::string* delta);
absl::Status ApplyDelta(std::string_view newer, std::string_view delta, std::string* older);

}  // namespace ember::record
