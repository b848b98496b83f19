// zstd compression of a stored BLOB's bytes, for columns that ask for it (Column::zstd_level).
//
// The BLOB is cut into frames of `frame_bytes` (kFrameBytes when written; the header records the
// size, so it may change without a format change); each frame is compressed on its own, or kept
// as it is when zstd does not make it smaller (already compressed media, random bytes). The
// stored stream (what the blob pages or the inline header hold) is the frames back to back, then
// the frame table: one u32 per frame, its stored size, with kRawFrame set for a frame kept raw.
// A read at any offset decompresses only the frame that holds it, so seeks stay cheap and a
// reader with a small buffer decompresses each frame once (the caller keeps the last frame).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct ZSTD_CCtx_s;
struct ZSTD_DCtx_s;

namespace ember::blob {

constexpr uint32_t kFrameBytes = 64 << 10;
constexpr uint32_t kMinFrameBytes = 4096;
constexpr uint32_t kMaxFrameBytes = 1 << 20;
constexpr uint32_t kRawFrame = 0x80000000u;
constexpr int kMaxZstdLevel = 19;  // above are zstd's "ultra" levels (hundreds of MB per context)

// Where each frame lies in the stored stream, from the frame table.
struct FrameTable {
  uint32_t frame_bytes = kFrameBytes;
  std::vector<uint64_t> starts;  // frames + 1 entries; starts.back() = where the table begins
  std::vector<bool> raw;

  size_t frames() const { return raw.size(); }
  // Uncompressed size of frame `f` of a BLOB of `length` bytes.
  size_t FrameSize(size_t f, uint64_t length) const {
    const uint64_t from = uint64_t{f} * frame_bytes;
    return static_cast<size_t>(std::min<uint64_t>(frame_bytes, length - from));
  }
};

// Number of frames of a BLOB of `length` bytes.
inline uint32_t FrameCount(uint64_t length, uint32_t frame_bytes) {
  return static_cast<uint32_t>((length + frame_bytes - 1) / frame_bytes);
}

// Checks a frame table (`table`: frames x u32) against the BLOB's length and its stored size.
absl::StatusOr<FrameTable> DecodeFrameTable(std::string_view table, uint64_t length,
                                            uint64_t stored_length, uint32_t frame_bytes);

class FrameCompressor {
 public:
  FrameCompressor();
  ~FrameCompressor();
  FrameCompressor(const FrameCompressor&) = delete;
  FrameCompressor& operator=(const FrameCompressor&) = delete;

  // Appends the stored form of one frame to `out`; returns its frame-table entry.
  absl::StatusOr<uint32_t> Compress(int level, std::string_view frame, std::string* out);
  static void AppendTable(const std::vector<uint32_t>& entries, std::string* out);

 private:
  ZSTD_CCtx_s* ctx_ = nullptr;
};

class FrameDecompressor {
 public:
  FrameDecompressor();
  ~FrameDecompressor();
  FrameDecompressor(const FrameDecompressor&) = delete;
  FrameDecompressor& operator=(const FrameDecompressor&) = delete;

  // The `size` bytes of a frame from its stored form; DataLoss if it does not decode to exactly
  // that many bytes.
  absl::Status Decompress(std::string_view stored, bool raw, size_t size, std::string* out);

 private:
  ZSTD_DCtx_s* ctx_ = nullptr;
};

}  // namespace ember::blob
