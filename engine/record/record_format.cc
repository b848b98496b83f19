// Record header, row encoding, body compression and back-version deltas (see record_format.h).
#include "engine/record/record_format.h"

#include <zstd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/util/coding.h"

namespace ember::record {

using util::GetVarint64;
using util::PutVarint64;

void EncodeHeader(const RecordHeader& h, std::string* out) {
  uint8_t buf[kRecMaxHeaderSize];
  buf[0] = static_cast<uint8_t>(h.flags | static_cast<uint8_t>(h.encoding) << 6);
  uint8_t* p = util::EncodeVarint64(buf + 1, h.txn << 1 | (h.back_page != 0 ? 1 : 0));
  if (h.back_page != 0) {
    util::Put32(p, h.back_page);
    util::Put16(p + 4, h.back_line);
    p += kRecPointerSize;
  }
  if (h.flags & kRecFragmented) {
    util::Put32(p, h.frag_page);
    util::Put16(p + 4, h.frag_line);
    p += kRecPointerSize;
  }
  out->append(reinterpret_cast<const char*>(buf), static_cast<size_t>(p - buf));
}

// ---------------------------------------------------------------- rows

namespace {
// kTagSpilled: a string/bytes value kept in a stored BLOB (EncodeRow's `spilled`).
enum Tag : uint8_t {
  kTagNull = 0,
  kTagInt = 1,
  kTagDouble = 2,
  kTagString = 3,
  kTagBlob = 5,
  kTagSpilled = 6,
};

const char* TypeName(ColumnType t) {
  switch (t) {
    case ColumnType::kInt64: return "int64";
    case ColumnType::kDouble: return "double";
    case ColumnType::kString: return "string";
    case ColumnType::kBytes: return "bytes";
    case ColumnType::kBlob: return "blob";
  }
  return "?";
}
}  // namespace

absl::Status ValidateRow(const std::vector<Column>& cols, const Row& row) {
  if (row.size() != cols.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("row has ", row.size(), " values, table has ", cols.size(), " columns"));
  }
  for (size_t i = 0; i < cols.size(); ++i) {
    const Value& v = row[i];
    bool ok = false;
    switch (cols[i].type) {
      case ColumnType::kInt64: ok = std::holds_alternative<int64_t>(v); break;
      case ColumnType::kDouble: ok = std::holds_alternative<double>(v); break;
      case ColumnType::kString:
      case ColumnType::kBytes: ok = std::holds_alternative<std::string>(v); break;
      case ColumnType::kBlob: ok = std::holds_alternative<BlobId>(v); break;
    }
    if (IsNull(v)) {
      if (!cols[i].nullable) {
        return absl::InvalidArgumentError(absl::StrCat("column ", cols[i].name, " is NOT NULL"));
      }
      continue;
    }
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("column ", cols[i].name, " expects ", TypeName(cols[i].type)));
    }
  }
  return absl::OkStatus();
}

void EncodeRow(const Row& row, std::string* out, const std::vector<uint64_t>* spilled) {
  PutVarint64(out, row.size());
  for (size_t i = 0; i < row.size(); ++i) {
    const Value& v = row[i];
    if (spilled && (*spilled)[i] != 0) {
      out->push_back(kTagSpilled);
      PutVarint64(out, (*spilled)[i]);
    } else if (IsNull(v)) {
      out->push_back(kTagNull);
    } else if (auto* i = std::get_if<int64_t>(&v)) {
      out->push_back(kTagInt);
      PutVarint64(out, util::ZigZag(*i));
    } else if (auto* d = std::get_if<double>(&v)) {
      out->push_back(kTagDouble);
      char b[8];
      std::memcpy(b, d, 8);
      out->append(b, 8);
    } else if (auto* s = std::get_if<std::string>(&v)) {
      out->push_back(kTagString);
      PutVarint64(out, s->size());
      out->append(*s);
    } else if (auto* b = std::get_if<BlobId>(&v)) {
      out->push_back(kTagBlob);
      PutVarint64(out, b->value);
    }
  }
}

absl::Status DecodeRow(std::string_view in, size_t ncols, Row* row) {
  auto bad = [](const char* what) {
    return absl::DataLossError(absl::StrCat("corrupt record: ", what));
  };
  uint64_t n;
  if (!GetVarint64(&in, &n)) return bad("column count");
  if (n != ncols) return bad("column count does not match the table");
  // Values are assigned over the row's old ones: a string keeps its buffer, so decoding row
  // after row into the same Row (scans, mass updates) does not allocate per value.
  row->resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    if (in.empty()) return bad("truncated");
    uint8_t tag = static_cast<uint8_t>(in[0]);
    in.remove_prefix(1);
    Value& v = (*row)[i];
    switch (tag) {
      case kTagNull: v = std::monostate{}; break;
      case kTagInt: {
        uint64_t z;
        if (!GetVarint64(&in, &z)) return bad("int64");
        v = util::UnZigZag(z);
        break;
      }
      case kTagDouble: {
        if (in.size() < 8) return bad("double");
        double d;
        std::memcpy(&d, in.data(), 8);
        in.remove_prefix(8);
        v = d;
        break;
      }
      case kTagString: {
        uint64_t len;
        if (!GetVarint64(&in, &len) || len > in.size()) return bad("string");
        if (auto* s = std::get_if<std::string>(&v)) {
          s->assign(in.data(), len);
        } else {
          v.emplace<std::string>(in.substr(0, len));
        }
        in.remove_prefix(len);
        break;
      }
      case kTagBlob:
      case kTagSpilled: {
        uint64_t b;
        if (!GetVarint64(&in, &b)) return bad("blob id");
        v = BlobId{b};
        break;
      }
      default: return bad("value tag");
    }
  }
  if (!in.empty()) return bad("trailing bytes");
  return absl::OkStatus();
}

// ---------------------------------------------------------------- compression

namespace {

// Run-length: control byte c < 0x80 -> c+1 literal bytes follow; c >= 0x80 -> the next byte
// repeated (c - 0x80 + 3) times. Firebird's record compression is the same idea.
void RleEncode(std::string_view in, std::string* out) {
  size_t i = 0;
  std::string lit;
  auto flush_lit = [&] {
    for (size_t p = 0; p < lit.size(); p += 128) {
      size_t n = std::min<size_t>(128, lit.size() - p);
      out->push_back(static_cast<char>(n - 1));
      out->append(lit, p, n);
    }
    lit.clear();
  };
  while (i < in.size()) {
    size_t run = 1;
    while (i + run < in.size() && in[i + run] == in[i] && run < 130) ++run;
    if (run >= 3) {
      flush_lit();
      out->push_back(static_cast<char>(0x80 + run - 3));
      out->push_back(in[i]);
      i += run;
    } else {
      lit.push_back(in[i]);
      ++i;
    }
  }
  flush_lit();
}

bool RleDecode(std::string_view in, size_t raw_len, std::string* out) {
  out->clear();
  out->reserve(raw_len);
  size_t i = 0;
  while (i < in.size()) {
    uint8_t c = static_cast<uint8_t>(in[i++]);
    if (c < 0x80) {
      size_t n = size_t{c} + 1;
      if (i + n > in.size()) return false;
      out->append(in.data() + i, n);
      i += n;
    } else {
      if (i >= in.size()) return false;
      out->append(size_t{c} - 0x80 + 3, in[i++]);
    }
    if (out->size() > raw_len) return false;
  }
  return out->size() == raw_len;
}

}  // namespace

BodyEncoding CompressBody(std::string_view raw, std::string* out) {
  out->assign(raw);
  BodyEncoding best = BodyEncoding::kPlain;
  if (raw.size() > 64) {
    std::string rle;
    PutVarint64(&rle, raw.size());
    RleEncode(raw, &rle);
    if (rle.size() < out->size()) {
      *out = std::move(rle);
      best = BodyEncoding::kRle;
    }
  }
  if (raw.size() > 512) {
    std::string z;
    PutVarint64(&z, raw.size());
    size_t head = z.size();
    z.resize(head + ZSTD_compressBound(raw.size()));
    size_t n = ZSTD_compress(z.data() + head, z.size() - head, raw.data(), raw.size(), 1);
    if (!ZSTD_isError(n) && head + n < out->size()) {
      z.resize(head + n);
      *out = std::move(z);
      best = BodyEncoding::kZstd;
    }
  }
  return best;
}

absl::Status DecompressBody(BodyEncoding enc, std::string_view stored, std::string* raw) {
  if (enc == BodyEncoding::kPlain) {
    raw->assign(stored);
    return absl::OkStatus();
  }
  uint64_t len;
  if (!GetVarint64(&stored, &len) || len > (1ull << 32)) {
    return absl::DataLossError("corrupt record: compressed length");
  }
  if (enc == BodyEncoding::kRle) {
    // Two stored bytes expand to at most 130: a longer declared length is corrupt (and must not
    // be reserved).
    if (len > uint64_t{stored.size()} * 65 || !RleDecode(stored, len, raw)) {
      return absl::DataLossError("corrupt record: run-length body");
    }
    return absl::OkStatus();
  }
  // The zstd frame records its content size (ZSTD_compress writes it): it must agree before
  // `len` bytes are allocated, and be one the frame can hold (a block of at least 4 bytes, an
  // RLE block, expands to at most ZSTD_BLOCKSIZE_MAX = 128 KB), so a damaged length cannot
  // ask for gigabytes.
  if (len > uint64_t{stored.size()} * (128 << 10) / 4 ||
      ZSTD_getFrameContentSize(stored.data(), stored.size()) != len) {
    return absl::DataLossError("corrupt record: zstd body");
  }
  raw->resize(len);
  size_t n = ZSTD_decompress(raw->data(), len, stored.data(), stored.size());
  if (ZSTD_isError(n) || n != len) return absl::DataLossError("corrupt record: zstd body");
  return absl::OkStatus();
}

// ---------------------------------------------------------------- deltas

// A delta is: varint prefix, varint suffix, then the middle bytes of the older version: older =
// newer[0, prefix) + middle + newer[size - suffix, size). Updates that change a few fields give
// a few bytes; `val = val + 0` gives three.
bool MakeDelta(std::string_view newer, std::string_view older, std::string* delta) {
  size_t p = 0;
  const size_t lim = std::min(newer.size(), older.size());
  while (p < lim && newer[p] == older[p]) ++p;
  size_t s = 0;
  while (s < lim - p && newer[newer.size() - 1 - s] == older[older.size() - 1 - s]) ++s;
  delta->clear();
  PutVarint64(delta, p);
  PutVarint64(delta, s);
  delta->append(older.substr(p, older.size() - p - s));
  return delta->size() < older.size();
}

absl::Status ApplyDelta(std::string_view newer, std::string_view delta, std::string* older) {
  uint64_t p, s;
  if (!GetVarint64(&delta, &p) || !GetVarint64(&delta, &s) || p > newer.size() ||
      s > newer.size() - p) {  // (not p + s > size: that sum can overflow)
    return absl::DataLossError("corrupt record: delta");
  }
  older->assign(newer.substr(0, p));
  older->append(delta);
  older->append(newer.substr(newer.size() - s));
  return absl::OkStatus();
}

}  // namespace ember::record
