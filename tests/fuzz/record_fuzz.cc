// libFuzzer target: the record layer's decoders, which read what a data page holds: the record
// header, the stored body (plain, RLE, zstd), the row encoding, delta back versions; and the
// index key decoders. Every decoder must refuse bad bytes with an error, and what decodes must
// encode back to the same thing.
#include <cmath>
#include <cstring>

#include "engine/record/record_format.h"
#include "engine/util/key_encoding.h"
#include "tests/fuzz/fuzz_util.h"

using namespace ember;

namespace {

bool SameValue(const Value& a, const Value& b) {
  if (a.index() != b.index()) return false;
  if (const double* d = std::get_if<double>(&a)) {  // NaN payloads round-trip bit for bit
    const double e = std::get<double>(b);
    return std::memcmp(d, &e, sizeof e) == 0;
  }
  return a == b;
}

void RowTarget(std::string_view body, size_t ncols) {
  Row row;
  if (!record::DecodeRow(body, ncols, &row).ok()) return;
  FUZZ_CHECK(row.size() == ncols, "DecodeRow gave another column count");
  std::string again;
  record::EncodeRow(row, &again);
  Row row2;
  FUZZ_CHECK(record::DecodeRow(again, ncols, &row2).ok(), "a re-encoded row does not decode");
  for (size_t i = 0; i < ncols; ++i) FUZZ_CHECK(SameValue(row[i], row2[i]), "row round trip");
}

void BodyTarget(std::string_view raw) {
  // Compression round trip of any bytes, and decompression of any bytes as each encoding.
  std::string stored, back;
  const record::BodyEncoding enc = record::CompressBody(raw, &stored);
  FUZZ_CHECK(record::DecompressBody(enc, stored, &back).ok(), "stored body does not decompress");
  FUZZ_CHECK(back == raw, "body round trip");
  for (auto e :
       {record::BodyEncoding::kPlain, record::BodyEncoding::kRle, record::BodyEncoding::kZstd}) {
    std::string out;
    (void)record::DecompressBody(e, raw, &out);
  }
}

void DeltaTarget(std::string_view newer, std::string_view older, std::string_view junk) {
  std::string delta, back;
  if (record::MakeDelta(newer, older, &delta)) {
    FUZZ_CHECK(record::ApplyDelta(newer, delta, &back).ok(), "a made delta does not apply");
    FUZZ_CHECK(back == older, "delta round trip");
  }
  std::string out;
  (void)record::ApplyDelta(newer, junk, &out);  // any bytes as a delta: an error, no crash
}

void KeyTarget(std::string_view key) {
  // Walk the columns as the tools do; every decoder must stop at the end of the bytes.
  std::string_view in = key;
  for (int guard = 0; guard < 64 && !in.empty(); ++guard) {
    util::KeyColumnType t;
    if (!util::PeekKeyColumnType(in, &t)) break;
    std::string_view skip = in;
    if (!util::SkipKeyColumn(&skip)) break;
    bool ok = false;
    std::string rebuilt;
    switch (t) {
      case util::KeyColumnType::kNull:
        ok = util::DecodeKeyNull(&in);
        if (ok) util::AppendKeyNull(&rebuilt);
        break;
      case util::KeyColumnType::kInt64: {
        int64_t v;
        ok = util::DecodeKeyInt64(&in, &v);
        if (ok) util::AppendKeyInt64(&rebuilt, v);
        break;
      }
      case util::KeyColumnType::kDouble: {
        double v;
        ok = util::DecodeKeyDouble(&in, &v);
        if (ok) util::AppendKeyDouble(&rebuilt, v);
        break;
      }
      case util::KeyColumnType::kString: {
        std::string v;
        ok = util::DecodeKeyString(&in, &v);
        if (ok) util::AppendKeyString(&rebuilt, v);
        break;
      }
    }
    if (!ok) break;
    FUZZ_CHECK(in.data() == skip.data(), "SkipKeyColumn and the decoder disagree on a length");
    // (Doubles: -0.0 and NaNs may be canonical in keys; the rest re-encode byte for byte.)
    if (t != util::KeyColumnType::kDouble) {
      const size_t used = static_cast<size_t>(in.data() - key.data());
      FUZZ_CHECK(key.substr(used - rebuilt.size(), rebuilt.size()) == rebuilt,
                 "a decoded key column re-encodes differently");
    }
  }
}

std::vector<std::string> Seeds() {
  std::vector<std::string> out;
  Row row{int64_t{42}, 3.5, std::string("hello world"), std::monostate{}, BlobId{7}};
  std::string body;
  record::EncodeRow(row, &body);
  out.push_back(std::string(1, 5 * 4) + body);  // mode 0: a row of 5 columns
  std::string rle(200, 'x');
  out.push_back(std::string(1, '\x01') + rle);                               // mode 1: a body
  out.push_back(std::string(1, '\x02') + std::string(1, 11) + body + body);  // mode 2: delta
  std::string key;
  util::AppendKeyInt64(&key, -5);
  util::AppendKeyString(&key, "abc");
  util::AppendKeyNull(&key);
  util::AppendKeyDouble(&key, 2.25);
  out.push_back(std::string(1, '\x03') + key);  // mode 3: a key
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
  switch (mode % 4) {
    case 0: {
      const size_t ncols = mode / 4 % 40;
      std::string_view rec = in.Rest();
      record::RecordHeader h;
      if (record::DecodeHeader(rec, &h)) {
        FUZZ_CHECK(h.size() <= rec.size(), "DecodeHeader accepted a header longer than the record");
      }
      RowTarget(rec, ncols);
      break;
    }
    case 1: BodyTarget(in.Rest()); break;
    case 2: {
      const std::string_view rest = in.Rest();
      const size_t cut = rest.empty() ? 0 : static_cast<uint8_t>(rest[0]) % (rest.size());
      DeltaTarget(rest.substr(0, cut), rest.substr(cut), rest);
      break;
    }
    case 3: KeyTarget(in.Rest()); break;
  }
  return 0;
}
