// Record format: version headers (plain and fragmented), the row encoding of every value type,
// ValidateRow, body compression (plain / run-length / zstd) and back-version deltas, including
// corrupt input, which must give DataLoss and never a crash.
#include "engine/record/record_format.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/util/coding.h"
#include "tests/support/engine_util.h"

using namespace ember;
using namespace ember::record;

namespace {

std::string RandomBytes(std::mt19937& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xFF);
  return s;
}

// Text-like, compressible bytes: words from a small vocabulary.
std::string Repetitive(std::mt19937& rng, size_t n) {
  static const char* kWords[] = {"ember ", "firebird ", "page ", "record ", "0000", "    "};
  std::string s;
  while (s.size() < n) s += kWords[rng() % 6];
  s.resize(n);
  return s;
}

bool SameValue(const Value& a, const Value& b) {
  if (a.index() != b.index()) return false;
  if (auto* d = std::get_if<double>(&a)) {  // bitwise, so NaN and -0.0 count
    double e = std::get<double>(b);
    return std::memcmp(d, &e, sizeof e) == 0;
  }
  return a == b;
}

std::string Varint(uint64_t v) {
  std::string s;
  util::PutVarint64(&s, v);
  return s;
}

}  // namespace

// ---------------------------------------------------------------- headers

TEST_CASE("record: header encode/decode, plain and fragmented", "[record]") {
  RecordHeader h;
  h.txn = 0x0123456789ABCDEFull;
  h.back_page = 0xDEADBEEF;
  h.back_line = 0xBEEF;
  h.flags = kRecDelta | kRecBackVersion;
  h.encoding = BodyEncoding::kRle;
  std::string out = "xy";  // EncodeHeader appends
  EncodeHeader(h, &out);
  // flags byte, a 9-byte varint (txn << 1 | 1 is below 2^63), the back pointer.
  REQUIRE(out.size() == 2 + 1 + 9 + kRecPointerSize);
  CHECK(h.size() == out.size() - 2);
  RecordHeader d;
  d.frag_page = 99;  // must be reset by the decoder
  REQUIRE(DecodeHeader(std::string_view(out).substr(2), &d));
  CHECK(d.txn == h.txn);
  CHECK(d.back_page == h.back_page);
  CHECK(d.back_line == h.back_line);
  CHECK(d.flags == h.flags);
  CHECK(d.encoding == h.encoding);
  CHECK(d.frag_page == 0);
  CHECK(d.frag_line == 0);

  RecordHeader f;
  f.txn = 7;
  f.flags = kRecFragmented;
  f.encoding = BodyEncoding::kZstd;
  f.frag_page = 123456;
  f.frag_line = 65535;
  std::string fo;
  EncodeHeader(f, &fo);
  fo += "body";
  REQUIRE(fo.size() == 1 + 1 + kRecPointerSize + 4);  // no back pointer: not stored
  CHECK(f.size() == fo.size() - 4);
  RecordHeader fd;
  fd.back_page = 5;  // must be reset by the decoder
  REQUIRE(DecodeHeader(fo, &fd));
  CHECK(fd.txn == 7);
  CHECK(fd.back_page == 0);
  CHECK(fd.flags == kRecFragmented);
  CHECK(fd.encoding == BodyEncoding::kZstd);
  CHECK(fd.frag_page == 123456);
  CHECK(fd.frag_line == 65535);
  CHECK(fd.size() == f.size());
  CHECK(fo.substr(fd.size()) == "body");

  // Every cut short of the whole header fails; so do a bad encoding (3), a back pointer to
  // page 0 and an over-long varint.
  for (const std::string& enc : {out.substr(2), fo.substr(0, f.size())}) {
    for (size_t n = 0; n < enc.size(); ++n) CHECK(!DecodeHeader(enc.substr(0, n), &d));
  }
  std::string bad = out.substr(2);
  bad[0] = static_cast<char>(bad[0] | 0xC0);
  CHECK(!DecodeHeader(bad, &d));
  RecordHeader z;
  z.txn = 1;
  z.back_page = 1;
  bad.clear();
  EncodeHeader(z, &bad);
  bad[2] = bad[3] = bad[4] = bad[5] = 0;  // has_back set, back_page 0
  CHECK(!DecodeHeader(bad, &d));
  bad = std::string(1, '\0') + std::string(10, static_cast<char>(0xFF)) + "x";
  CHECK(!DecodeHeader(bad, &d));
}

TEST_CASE("record: header size follows the transaction number and the pointers", "[record]") {
  // A head version of a young database: 2 bytes; the largest header fits kRecMaxHeaderSize.
  RecordHeader h;
  h.txn = 5;
  std::string e;
  EncodeHeader(h, &e);
  CHECK(e.size() == 2);
  CHECK(h.SizeWith(true, false) == 2 + kRecPointerSize);
  CHECK(h.SizeWith(true, true) == 2 + 2 * kRecPointerSize);
  for (uint64_t txn : {0ull, 1ull, 63ull, 64ull, 8191ull, 8192ull, 1ull << 40, (1ull << 63) - 1}) {
    for (int back = 0; back < 2; ++back) {
      for (int frag = 0; frag < 2; ++frag) {
        for (uint8_t enc = 0; enc < 3; ++enc) {
          RecordHeader x;
          x.txn = txn;
          x.back_page = back ? 0xFFFFFFFFu : 0;
          x.back_line = back ? 0x1234 : 0;
          x.flags = static_cast<uint8_t>((frag ? kRecFragmented : 0) | kRecBlob | kRecDeleted);
          x.frag_page = frag ? 77 : 0;
          x.frag_line = frag ? 9 : 0;
          x.encoding = static_cast<BodyEncoding>(enc);
          std::string o;
          EncodeHeader(x, &o);
          REQUIRE(o.size() == x.size());
          REQUIRE(o.size() <= kRecMaxHeaderSize);
          CHECK(x.SizeWith(back, frag) == x.size());
          RecordHeader y;
          REQUIRE(DecodeHeader(o + "tail", &y));
          CHECK(y.txn == x.txn);
          CHECK(y.back_page == x.back_page);
          CHECK(y.back_line == x.back_line);
          CHECK(y.flags == x.flags);
          CHECK(y.frag_page == x.frag_page);
          CHECK(y.frag_line == x.frag_line);
          CHECK(y.encoding == x.encoding);
          CHECK(y.size() == o.size());
        }
      }
    }
  }
  // Repointing a back or fragment pointer never changes the size (rewrites stay in place).
  RecordHeader a;
  a.txn = 300;
  a.back_page = 1;
  RecordHeader b = a;
  b.back_page = 0xFFFFFFFF;
  b.back_line = 0xFFFF;
  CHECK(a.size() == b.size());
}

// ---------------------------------------------------------------- rows

TEST_CASE("record: rows of every type round-trip, with NULLs and embedded zeros", "[record]") {
  const std::string zeros("a\0b\0\0c", 6);
  std::vector<Row> rows = {
      {},
      {std::monostate{}},
      {int64_t{0}, int64_t{-1}, int64_t{1}, std::numeric_limits<int64_t>::min(),
       std::numeric_limits<int64_t>::max()},
      {0.0, -0.0, 1.5, -1e300, std::numeric_limits<double>::infinity(),
       std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::denorm_min()},
      {std::string(), zeros, std::string(1, '\0'), std::string(100000, '\0'),
       std::string("\xFF\x80", 2)},
      {BlobId{0}, BlobId{1}, BlobId{~uint64_t{0}}},
      {std::monostate{}, int64_t{42}, std::monostate{}, 3.25, zeros, BlobId{77}, std::monostate{}},
  };
  for (const Row& row : rows) {
    std::string enc;
    EncodeRow(row, &enc);
    Row back{int64_t{5}};  // must be replaced, not appended to
    REQUIRE_OK(DecodeRow(enc, row.size(), &back));
    REQUIRE(back.size() == row.size());
    for (size_t i = 0; i < row.size(); ++i) {
      INFO("column " << i);
      CHECK(SameValue(back[i], row[i]));
    }
    // Any other column count, any truncation and any trailing byte is DataLoss.
    CHECK(absl::IsDataLoss(DecodeRow(enc, row.size() + 1, &back)));
    if (!row.empty()) CHECK(absl::IsDataLoss(DecodeRow(enc, row.size() - 1, &back)));
    for (size_t cut = 0; cut < enc.size() && cut < 64; ++cut) {
      INFO("cut at " << cut);
      CHECK(absl::IsDataLoss(DecodeRow(std::string_view(enc).substr(0, cut), row.size(), &back)));
    }
    CHECK(absl::IsDataLoss(DecodeRow(enc + "x", row.size(), &back)));
  }
  // An unknown value tag.
  std::string enc;
  EncodeRow({int64_t{1}}, &enc);
  enc[1] = 9;
  Row back;
  CHECK(absl::IsDataLoss(DecodeRow(enc, 1, &back)));
}

TEST_CASE("record: random bytes never crash DecodeRow", "[record]") {
  std::mt19937 rng(3);
  Row row;
  for (int i = 0; i < 20000; ++i) {
    const std::string junk = RandomBytes(rng, rng() % 40);
    const absl::Status s = DecodeRow(junk, rng() % 4, &row);
    REQUIRE((s.ok() || absl::IsDataLoss(s)));
  }
}

TEST_CASE("record: ValidateRow checks count, types and NOT NULL", "[record]") {
  const std::vector<Column> cols = {
      {"id", ColumnType::kInt64, false},   {"score", ColumnType::kDouble, true},
      {"name", ColumnType::kString, true}, {"raw", ColumnType::kBytes, false},
      {"doc", ColumnType::kBlob, true},
  };
  const Row good = {int64_t{1}, 2.5, std::string("n"), std::string("\0", 1), BlobId{3}};
  CHECK_OK(ValidateRow(cols, good));
  CHECK_OK(ValidateRow(
      cols, {int64_t{1}, std::monostate{}, std::monostate{}, std::string(), std::monostate{}}));

  absl::Status s = ValidateRow(cols, {int64_t{1}});
  CHECK(absl::IsInvalidArgument(s));
  CHECK(std::string(s.message()).find("1 values") != std::string::npos);
  CHECK(absl::IsInvalidArgument(ValidateRow(cols, Row(6, std::monostate{}))));
  CHECK(absl::IsInvalidArgument(ValidateRow({}, good)));
  CHECK_OK(ValidateRow({}, {}));

  auto with = [&](size_t i, Value v) {
    Row r = good;
    r[i] = std::move(v);
    return ValidateRow(cols, r);
  };
  s = with(0, std::monostate{});
  CHECK(absl::IsInvalidArgument(s));
  CHECK(std::string(s.message()).find("id") != std::string::npos);
  CHECK(std::string(s.message()).find("NOT NULL") != std::string::npos);
  CHECK(absl::IsInvalidArgument(with(3, std::monostate{})));
  s = with(0, std::string("1"));
  CHECK(absl::IsInvalidArgument(s));
  CHECK(std::string(s.message()).find("int64") != std::string::npos);
  CHECK(absl::IsInvalidArgument(with(0, 1.0)));
  CHECK(absl::IsInvalidArgument(with(1, int64_t{2})));
  CHECK(absl::IsInvalidArgument(with(2, BlobId{1})));
  CHECK(absl::IsInvalidArgument(with(3, int64_t{1})));
  CHECK(absl::IsInvalidArgument(with(4, std::string("blob"))));
  CHECK(absl::IsInvalidArgument(with(4, int64_t{4})));
}

// ---------------------------------------------------------------- compression

TEST_CASE("record: CompressBody picks plain, RLE or zstd and DecompressBody round-trips",
          "[record]") {
  std::mt19937 rng(11);
  auto round_trip = [](std::string_view raw) {
    std::string stored;
    const BodyEncoding enc = CompressBody(raw, &stored);
    CHECK(stored.size() <= raw.size());
    std::string back = "junk";
    REQUIRE_OK(DecompressBody(enc, stored, &back));
    CHECK(back == raw);
    return std::make_pair(enc, stored.size());
  };
  // Small bodies stay plain whatever they hold.
  for (size_t n : {0, 1, 10, 63, 64}) {
    INFO("size " << n);
    CHECK(round_trip(std::string(n, 'a')).first == BodyEncoding::kPlain);
  }
  // Mid-sized runs: RLE (zstd is not tried up to 512 bytes).
  for (size_t n : {65, 100, 300, 512}) {
    INFO("size " << n);
    auto [enc, size] = round_trip(std::string(n, '\0'));
    CHECK(enc == BodyEncoding::kRle);
    CHECK(size < 16);
  }
  // Incompressible bodies stay plain, at any size.
  for (size_t n : {65, 1000, 5000, 100000}) {
    INFO("size " << n);
    CHECK(round_trip(RandomBytes(rng, n)).first == BodyEncoding::kPlain);
  }
  // Large text-like bodies: zstd, and much smaller.
  for (size_t n : {2000, 20000, 100000}) {
    INFO("size " << n);
    auto [enc, size] = round_trip(Repetitive(rng, n));
    CHECK(enc == BodyEncoding::kZstd);
    CHECK(size < n / 4);
  }
  // Everything in between: random mixtures of runs and noise, sizes 0..100 KB.
  for (int i = 0; i < 300; ++i) {
    const size_t n = i < 200 ? rng() % 2048 : rng() % 100001;
    std::string raw;
    while (raw.size() < n) {
      const size_t piece = 1 + rng() % 300;
      switch (rng() % 3) {
        case 0: raw += std::string(piece, static_cast<char>(rng())); break;
        case 1: raw += RandomBytes(rng, piece % 20); break;
        default: raw += Repetitive(rng, piece); break;
      }
    }
    raw.resize(n);
    INFO("body " << i << " of " << n << " bytes");
    round_trip(raw);
  }
  // A run-length body with literal runs longer than 128 bytes and runs longer than 130.
  std::string mixed = RandomBytes(rng, 300) + std::string(1000, 'z') + RandomBytes(rng, 3);
  round_trip(mixed);
}

TEST_CASE("record: corrupt compressed bodies give DataLoss, never a crash", "[record]") {
  std::mt19937 rng(5);
  std::string rle_body = std::string(200, 'q') + "tail" + std::string(100, 'r');
  std::string zstd_body = Repetitive(rng, 20000);
  std::string rle, zs;
  REQUIRE(CompressBody(rle_body, &rle) == BodyEncoding::kRle);
  REQUIRE(CompressBody(zstd_body, &zs) == BodyEncoding::kZstd);
  std::string out;
  for (auto [enc, stored] :
       {std::pair{BodyEncoding::kRle, rle}, std::pair{BodyEncoding::kZstd, zs}}) {
    INFO("encoding " << static_cast<int>(enc));
    // Truncated anywhere: always DataLoss.
    for (size_t cut = 0; cut < stored.size(); cut += 1 + stored.size() / 200) {
      INFO("cut " << cut);
      CHECK(absl::IsDataLoss(DecompressBody(enc, std::string_view(stored).substr(0, cut), &out)));
    }
    // A wrong declared length (the leading varint): DataLoss.
    std::string_view body = stored;
    uint64_t len;
    REQUIRE(util::GetVarint64(&body, &len));
    for (uint64_t wrong : {len - 1, len + 1, len * 2, uint64_t{1} << 31, uint64_t{1} << 32,
                           uint64_t{1} << 40, ~uint64_t{0}}) {
      INFO("declared length " << wrong);
      std::string fresh;
      CHECK(absl::IsDataLoss(DecompressBody(enc, Varint(wrong) + std::string(body), &fresh)));
      CHECK(fresh.capacity() < (size_t{64} << 20));  // did not allocate the declared length
    }
    // Random byte flips: DataLoss, or (zstd without a checksum) some bytes; never a crash.
    for (int i = 0; i < 2000; ++i) {
      std::string bad = stored;
      for (int k = 0; k <= i % 4; ++k) {
        bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
      }
      const absl::Status s = DecompressBody(enc, bad, &out);
      REQUIRE((s.ok() || absl::IsDataLoss(s)));
    }
  }
  // Pure garbage of every encoding.
  for (int i = 0; i < 5000; ++i) {
    const std::string junk = RandomBytes(rng, rng() % 64);
    for (BodyEncoding enc : {BodyEncoding::kRle, BodyEncoding::kZstd}) {
      const absl::Status s = DecompressBody(enc, junk, &out);
      REQUIRE((s.ok() || absl::IsDataLoss(s)));
    }
  }
  // A huge declared length with a tiny body must fail without allocating the declared length.
  for (BodyEncoding enc : {BodyEncoding::kRle, BodyEncoding::kZstd}) {
    std::string fresh;
    CHECK(absl::IsDataLoss(DecompressBody(enc, Varint(uint64_t{1} << 32) + "\x80x", &fresh)));
    CHECK(fresh.capacity() < (size_t{64} << 20));
  }
}

// ---------------------------------------------------------------- deltas

TEST_CASE("record: MakeDelta/ApplyDelta round-trip on random pairs", "[record]") {
  std::mt19937 rng(17);
  auto check = [](const std::string& newer, const std::string& older) {
    std::string delta;
    const bool smaller = MakeDelta(newer, older, &delta);
    CHECK(smaller == (delta.size() < older.size()));
    std::string back = "junk";
    REQUIRE_OK(ApplyDelta(newer, delta, &back));
    CHECK(back == older);
  };
  check("", "");
  check("abc", "");
  check("", "abc");
  check("same", "same");
  for (int i = 0; i < 3000; ++i) {
    const size_t n = rng() % (i < 2500 ? 300 : 20000);
    std::string older = i % 2 ? Repetitive(rng, n) : RandomBytes(rng, n);
    std::string newer = older;
    switch (rng() % 5) {
      case 0: break;  // unchanged
      case 1:         // a few bytes changed in place
        for (int k = 0; k < 3 && !newer.empty(); ++k) newer[rng() % newer.size()] ^= 1;
        break;
      case 2:  // a field grew or shrank in the middle
        newer.insert(newer.size() / 2, RandomBytes(rng, rng() % 20));
        if (rng() % 2 && older.size() > 10) newer.erase(older.size() / 3, 5);
        break;
      case 3:  // a different record altogether
        newer = RandomBytes(rng, rng() % 300);
        break;
      default:  // prefix or suffix only
        newer = rng() % 2 ? older.substr(0, older.size() / 2) : older.substr(older.size() / 2);
        break;
    }
    INFO("pair " << i << ": " << newer.size() << " / " << older.size() << " bytes");
    check(newer, older);
    check(older, newer);
  }
}

TEST_CASE("record: an update that changes nothing (val + 0) gives a 3-byte delta", "[record]") {
  const Row row = {int64_t{7}, std::string(150, 'x'), 2.5, std::monostate{}};
  std::string raw;
  EncodeRow(row, &raw);
  REQUIRE(raw.size() >= 128);
  REQUIRE(raw.size() < 16384);
  std::string delta;
  CHECK(MakeDelta(raw, raw, &delta));
  CHECK(delta.size() == 3);
  std::string back;
  REQUIRE_OK(ApplyDelta(raw, delta, &back));
  CHECK(back == raw);
  // A small row: shorter still.
  std::string small;
  EncodeRow({int64_t{1}, int64_t{2}}, &small);
  CHECK(MakeDelta(small, small, &delta));
  CHECK(delta.size() <= 3);
  // One field changed: a few bytes, not the whole row.
  Row changed = row;
  changed[0] = int64_t{8};
  std::string raw2;
  EncodeRow(changed, &raw2);
  CHECK(MakeDelta(raw2, raw, &delta));
  CHECK(delta.size() <= 5);
  REQUIRE_OK(ApplyDelta(raw2, delta, &back));
  CHECK(back == raw);
}

TEST_CASE("record: corrupt deltas give DataLoss, never a crash", "[record]") {
  const std::string newer = "0123456789";
  std::string out;
  CHECK(absl::IsDataLoss(ApplyDelta(newer, "", &out)));
  CHECK(absl::IsDataLoss(ApplyDelta(newer, Varint(3), &out)));
  CHECK(absl::IsDataLoss(ApplyDelta(newer, Varint(11) + Varint(0), &out)));
  CHECK(absl::IsDataLoss(ApplyDelta(newer, Varint(6) + Varint(5), &out)));
  // Prefix and suffix that overflow when added.
  CHECK(absl::IsDataLoss(ApplyDelta(newer, Varint(1) + Varint(~uint64_t{0}), &out)));
  CHECK(absl::IsDataLoss(ApplyDelta(newer, Varint(~uint64_t{0}) + Varint(1), &out)));
  CHECK(absl::IsDataLoss(ApplyDelta(newer, Varint(~uint64_t{0}) + Varint(~uint64_t{0}), &out)));
  CHECK(absl::IsDataLoss(ApplyDelta(newer, "\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x01", &out)));
  REQUIRE_OK(ApplyDelta(newer, Varint(4) + Varint(6) + "mid", &out));
  CHECK(out == "0123mid456789");

  std::mt19937 rng(23);
  for (int i = 0; i < 20000; ++i) {
    const std::string junk = RandomBytes(rng, rng() % 24);
    const absl::Status s = ApplyDelta(newer, junk, &out);
    REQUIRE((s.ok() || absl::IsDataLoss(s)));
  }
}
