// BLOB ids and the BLOB header record.
//
// A BlobId is 64 bits: bit 63 set = a temporary BLOB (bits 0..62: a number unique in the open
// database, owned by one transaction); clear = a stored BLOB: bits 48..62 the relation id,
// bits 16..47 the page and bits 0..15 the line of its header record (on a secondary data page of
// the relation).
//
// Header record body (after the record header, flag kRecBlob):
//   u8 level (0, 1, 2; kCompressedFlag added for a compressed BLOB), u64 length, then
//   compressed only: u64 stored length, u32 frame size (blob_codec.h);
//   level 0: the stored bytes themselves;
//   level 1: u32 count, count x u32 blob data pages;
//   level 2: u32 count, count x u32 list pages (blob pages with kBlobListPage holding u32 data
//            page numbers).
// The stored bytes are the BLOB's bytes, or for a compressed BLOB its frames and frame table
// (blob_codec.h); `length` is always the BLOB's own (uncompressed) length.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/page/page.h"

namespace ember::blob {

constexpr uint64_t kTempBit = uint64_t{1} << 63;
inline bool IsTemp(uint64_t id) { return (id & kTempBit) != 0; }
inline uint64_t StoredId(uint32_t relation, page::PageNo p, uint16_t line) {
  return (uint64_t{relation & 0x7FFF} << 48) | (uint64_t{p} << 16) | line;
}
inline uint32_t IdRelation(uint64_t id) { return static_cast<uint32_t>((id >> 48) & 0x7FFF); }
inline page::PageNo IdPage(uint64_t id) { return static_cast<page::PageNo>(id >> 16); }
inline uint16_t IdLine(uint64_t id) { return static_cast<uint16_t>(id & 0xFFFF); }

constexpr uint8_t kCompressedFlag = 0x80;

struct BlobHeader {
  uint8_t level = 0;
  uint64_t length = 0;
  bool compressed = false;
  uint64_t stored_length = 0;       // compressed: bytes of frames and frame table
  uint32_t frame_bytes = 0;         // compressed: uncompressed bytes per frame
  std::string inline_data;          // level 0
  std::vector<page::PageNo> pages;  // level 1: data pages; level 2: list pages

  // Bytes held in the pages (or inline): the frames and table when compressed.
  uint64_t stored_bytes() const { return compressed ? stored_length : length; }
};

void EncodeBlobHeader(const BlobHeader& h, std::string* out);
absl::StatusOr<BlobHeader> DecodeBlobHeader(std::string_view body);

}  // namespace ember::blob
