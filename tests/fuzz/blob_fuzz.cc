// libFuzzer target: what a stored BLOB's header record and its compressed stream hold: the
// BLOB header (level 0 inline bytes, level 1/2 page lists, the compressed flag and frame
// size), the frame table checked against the BLOB's length and stored size, and the frame
// decompressor. Bad bytes are an error; a frame that compresses decompresses back.
#include "engine/blob/blob_codec.h"
#include "engine/blob/blob_format.h"
#include "tests/fuzz/fuzz_util.h"

using namespace ember;

namespace {

std::vector<std::string> Seeds() {
  std::vector<std::string> out;
  blob::BlobHeader h;
  h.level = 0;
  h.length = 5;
  h.inline_data = "hello";
  std::string enc;
  blob::EncodeBlobHeader(h, &enc);
  out.push_back(std::string(1, 0) + enc);
  blob::BlobHeader h2;
  h2.level = 1;
  h2.length = 100000;
  h2.compressed = true;
  h2.stored_length = 3000;
  h2.frame_bytes = blob::kFrameBytes;
  h2.pages = {10, 11};
  enc.clear();
  blob::EncodeBlobHeader(h2, &enc);
  out.push_back(std::string(1, 0) + enc);
  // A compressed stream: two frames and their table.
  blob::FrameCompressor c;
  std::string stream;
  std::vector<uint32_t> entries;
  for (int f = 0; f < 2; ++f) {
    absl::StatusOr<uint32_t> e = c.Compress(3, std::string(blob::kMinFrameBytes, 'a' + f), &stream);
    if (e.ok()) entries.push_back(*e);
  }
  blob::FrameCompressor::AppendTable(entries, &stream);
  out.push_back(std::string(1, 1) + stream);
  out.push_back(std::string(1, 2) + std::string(300, 'z'));
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::MaybeWriteSeeds(Seeds());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const uint8_t mode = in.Byte();
  switch (mode % 3) {
    case 0: {  // a BLOB header record's body
      const std::string_view body = in.Rest();
      absl::StatusOr<blob::BlobHeader> h = blob::DecodeBlobHeader(body);
      if (h.ok()) {
        std::string again;
        blob::EncodeBlobHeader(*h, &again);
        absl::StatusOr<blob::BlobHeader> h2 = blob::DecodeBlobHeader(again);
        FUZZ_CHECK(h2.ok(), "a re-encoded BLOB header does not decode");
        FUZZ_CHECK(h2->length == h->length && h2->level == h->level && h2->pages == h->pages &&
                       h2->inline_data == h->inline_data,
                   "BLOB header round trip");
      }
      break;
    }
    case 1: {  // a compressed stream: frame table, then every frame
      const uint32_t frame_bytes = std::clamp<uint32_t>(in.U32() % (blob::kMaxFrameBytes + 1),
                                                        blob::kMinFrameBytes, blob::kMaxFrameBytes);
      const uint64_t length = in.U32() % (4u << 20);
      const std::string_view stream = in.Rest();
      const uint32_t frames = blob::FrameCount(length, frame_bytes);
      if (stream.size() < uint64_t{frames} * 4) break;
      const std::string_view table = stream.substr(stream.size() - uint64_t{frames} * 4);
      absl::StatusOr<blob::FrameTable> t =
          blob::DecodeFrameTable(table, length, stream.size(), frame_bytes);
      if (!t.ok()) break;
      FUZZ_CHECK(t->frames() == frames, "frame table with another frame count");
      FUZZ_CHECK(t->starts.size() == frames + 1, "frame table starts");
      blob::FrameDecompressor d;
      for (size_t f = 0; f < t->frames(); ++f) {
        FUZZ_CHECK(t->starts[f] <= t->starts[f + 1] && t->starts[f + 1] <= stream.size(),
                   "a frame outside the stream passed DecodeFrameTable");
        std::string out;
        const absl::Status s =
            d.Decompress(stream.substr(t->starts[f], t->starts[f + 1] - t->starts[f]), t->raw[f],
                         t->FrameSize(f, length), &out);
        if (s.ok()) FUZZ_CHECK(out.size() == t->FrameSize(f, length), "frame size");
      }
      break;
    }
    case 2: {                               // compress and decompress one frame of any bytes
      const int level = 1 + in.Byte() % 5;  // (the high levels cost seconds a frame)
      const std::string_view frame = in.Bytes(blob::kFrameBytes);
      blob::FrameCompressor c;
      std::string stored;
      absl::StatusOr<uint32_t> e = c.Compress(level, frame, &stored);
      FUZZ_CHECK(e.ok(), "Compress failed");
      blob::FrameDecompressor d;
      std::string out;
      const absl::Status s = d.Decompress(stored, (*e & blob::kRawFrame) != 0, frame.size(), &out);
      FUZZ_CHECK(s.ok(), std::string(s.message()));
      FUZZ_CHECK(out == frame, "frame round trip");
      break;
    }
  }
  return 0;
}
