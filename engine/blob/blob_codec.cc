// Framed zstd compression of stored BLOBs (see blob_codec.h).
#include "engine/blob/blob_codec.h"

#include <zstd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/util/coding.h"

namespace ember::blob {

absl::StatusOr<FrameTable> DecodeFrameTable(std::string_view table, uint64_t length,
                                            uint64_t stored_length, uint32_t frame_bytes) {
  auto bad = [](const char* what) {
    return absl::DataLossError(absl::StrCat("corrupt compressed BLOB: ", what));
  };
  if (frame_bytes < kMinFrameBytes || frame_bytes > kMaxFrameBytes) return bad("frame size");
  const uint64_t frames = FrameCount(length, frame_bytes);
  if (table.size() != frames * 4 || stored_length < table.size()) return bad("frame table size");
  FrameTable t;
  t.frame_bytes = frame_bytes;
  t.starts.reserve(frames + 1);
  t.raw.reserve(frames);
  uint64_t at = 0;
  for (uint64_t f = 0; f < frames; ++f) {
    const uint32_t e = util::Get32(table.data() + 4 * f);
    const uint32_t size = e & ~kRawFrame;
    const bool raw = (e & kRawFrame) != 0;
    const size_t want = t.FrameSize(f, length);
    // A raw frame is exactly its bytes; a compressed one is never larger than them.
    if (size == 0 || size > want || (raw && size != want)) return bad("frame table entry");
    t.starts.push_back(at);
    t.raw.push_back(raw);
    at += size;
  }
  t.starts.push_back(at);
  if (at + table.size() != stored_length) return bad("frames do not fill the stored size");
  return t;
}

FrameCompressor::FrameCompressor() : ctx_(ZSTD_createCCtx()) {}
FrameCompressor::~FrameCompressor() { ZSTD_freeCCtx(ctx_); }

absl::StatusOr<uint32_t> FrameCompressor::Compress(int level, std::string_view frame,
                                                   std::string* out) {
  if (ctx_ == nullptr) return absl::ResourceExhaustedError("zstd: out of memory for a context");
  const size_t at = out->size();
  out->resize(at + ZSTD_compressBound(frame.size()));
  const size_t n = ZSTD_compressCCtx(ctx_, out->data() + at, out->size() - at, frame.data(),
                                     frame.size(), level);
  if (!ZSTD_isError(n) && n < frame.size()) {
    out->resize(at + n);
    return static_cast<uint32_t>(n);
  }
  // Incompressible (or zstd failed): the frame as it is reads back just as well.
  out->resize(at);
  out->append(frame);
  return static_cast<uint32_t>(frame.size()) | kRawFrame;
}

void FrameCompressor::AppendTable(const std::vector<uint32_t>& entries, std::string* out) {
  const size_t at = out->size();
  out->resize(at + 4 * entries.size());
  for (size_t i = 0; i < entries.size(); ++i) util::Put32(out->data() + at + 4 * i, entries[i]);
}

FrameDecompressor::FrameDecompressor() : ctx_(ZSTD_createDCtx()) {}
FrameDecompressor::~FrameDecompressor() { ZSTD_freeDCtx(ctx_); }

absl::Status FrameDecompressor::Decompress(std::string_view stored, bool raw, size_t size,
                                           std::string* out) {
  auto bad = [] { return absl::DataLossError("corrupt compressed BLOB: a frame does not decode"); };
  if (raw) {
    if (stored.size() != size) return bad();
    out->assign(stored);
    return absl::OkStatus();
  }
  if (ctx_ == nullptr) return absl::ResourceExhaustedError("zstd: out of memory for a context");
  if (ZSTD_getFrameContentSize(stored.data(), stored.size()) != size) return bad();
  out->resize(size);
  const size_t n = ZSTD_decompressDCtx(ctx_, out->data(), size, stored.data(), stored.size());
  if (ZSTD_isError(n) || n != size) return bad();
  return absl::OkStatus();
}

}  // namespace ember::blob
