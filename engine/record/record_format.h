// The record format: the header every stored record version carries on a data page, the
// encoding of a row's values into a body, body compression (run-length for mid-sized bodies,
// zstd for large ones) and the delta a back version may be stored as.
//
// Record header (little-endian), docs/format.md "Record format":
//   offset size field
//   0      8    txn         transaction that wrote this version (0 for fragments)
//   8      4    back_page   page of the next older version (0 = none)
//   12     2    back_line   its line
//   14     1    flags       RecordFlag bits
//   15     1    encoding    BodyEncoding of the body
//   -- only with kRecFragmented:
//   16     4    frag_page   page of the next fragment
//   20     2    frag_line   its line
//   22     2    reserved
//   then the body bytes (for a fragmented record: the first part of the stored body)
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

namespace ember::record {

enum RecordFlag : uint8_t {
  kRecDeleted = 0x01,     // a delete stub: no body
  kRecDelta = 0x02,       // body is a delta against the newer version
  kRecFragmented = 0x04,  // the body continues in fragments (frag_page/frag_line)
  kRecFragment = 0x08,    // this line is a fragment of another record, not a version
  kRecBackVersion = 0x10, // an older version: not a primary record (scans skip it)
  kRecBlob = 0x20,        // a BLOB header record (engine/blob), not a version
};
// Lines that are not primary records: scans, record numbers and version walks skip them.
constexpr uint8_t kRecNotPrimary = kRecBackVersion | kRecFragment | kRecBlob;

enum class BodyEncoding : uint8_t { kPlain = 0, kRle = 1, kZstd = 2 };

constexpr size_t kRecHeaderSize = 16;
constexpr size_t kRecFragHeaderSize = 24;

struct RecordHeader {
  uint64_t txn = 0;
  uint32_t back_page = 0;
  uint16_t back_line = 0;
  uint8_t flags = 0;
  BodyEncoding encoding = BodyEncoding::kPlain;
  uint32_t frag_page = 0;
  uint16_t frag_line = 0;
  size_t size() const { return (flags & kRecFragmented) ? kRecFragHeaderSize : kRecHeaderSize; }
};

void EncodeHeader(const RecordHeader& h, std::string* out);  // appends
// Parses the header at the front of `rec`; false if too short or inconsistent.
bool DecodeHeader(std::string_view rec, RecordHeader* h);

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
