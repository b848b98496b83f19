// BLOB header record encoding (see blob_format.h).
#include "engine/blob/blob_format.h"

#include "engine/util/coding.h"

namespace ember::blob {

void EncodeBlobHeader(const BlobHeader& h, std::string* out) {
  char b[9];
  b[0] = static_cast<char>(h.level | (h.compressed ? kCompressedFlag : 0));
  util::Put64(b + 1, h.length);
  out->append(b, 9);
  if (h.compressed) {
    char c[12];
    util::Put64(c, h.stored_length);
    util::Put32(c + 8, h.frame_bytes);
    out->append(c, 12);
  }
  if (h.level == 0) {
    out->append(h.inline_data);
    return;
  }
  char c[4];
  util::Put32(c, static_cast<uint32_t>(h.pages.size()));
  out->append(c, 4);
  for (page::PageNo p : h.pages) {
    util::Put32(c, p);
    out->append(c, 4);
  }
}

absl::StatusOr<BlobHeader> DecodeBlobHeader(std::string_view body) {
  auto bad = [] { return absl::DataLossError("corrupt BLOB header record"); };
  if (body.size() < 9) return bad();
  BlobHeader h;
  h.compressed = (static_cast<uint8_t>(body[0]) & kCompressedFlag) != 0;
  h.level = static_cast<uint8_t>(body[0]) & ~kCompressedFlag;
  h.length = util::Get64(body.data() + 1);
  body.remove_prefix(9);
  if (h.compressed) {
    if (body.size() < 12) return bad();
    h.stored_length = util::Get64(body.data());
    h.frame_bytes = util::Get32(body.data() + 8);
    body.remove_prefix(12);
    if (h.frame_bytes == 0) return bad();
  }
  if (h.level == 0) {
    if (body.size() != h.stored_bytes()) return bad();
    h.inline_data.assign(body);
    return h;
  }
  if (h.level > 2 || body.size() < 4) return bad();
  const uint32_t n = util::Get32(body.data());
  body.remove_prefix(4);
  if (body.size() != uint64_t{n} * 4) return bad();
  h.pages.resize(n);
  for (uint32_t i = 0; i < n; ++i) h.pages[i] = util::Get32(body.data() + size_t{4} * i);
  return h;
}

}  // namespace ember::blob
