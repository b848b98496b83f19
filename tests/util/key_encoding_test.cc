// Key encoding: memcmp order of encodings must equal typed tuple order (checked on random tuples
// built from edge-case-heavy pools), decoders must round-trip, and malformed input must be refused.
#include "engine/util/key_encoding.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <variant>
#include <vector>

using namespace ember::util;

namespace {

using Value = std::variant<std::monostate, int64_t, double, std::string>;  // index == type tag
using Tuple = std::vector<Value>;

int Sign(int v) { return (v > 0) - (v < 0); }

// The order the encoding promises: NULL < int64 < double < string across types; NaN last and
// -0.0 == +0.0 among doubles; strings by unsigned bytes; tuples column by column, prefix first.
int CompareValue(const Value& a, const Value& b) {
  if (a.index() != b.index()) return a.index() < b.index() ? -1 : 1;
  switch (a.index()) {
    case 1: {
      const int64_t x = std::get<1>(a), y = std::get<1>(b);
      return (x > y) - (x < y);
    }
    case 2: {
      const double x = std::get<2>(a), y = std::get<2>(b);
      if (std::isnan(x) || std::isnan(y)) return std::isnan(x) - std::isnan(y);
      return (x > y) - (x < y);
    }
    case 3: return Sign(std::get<3>(a).compare(std::get<3>(b)));  // char_traits: unsigned bytes
    default: return 0;
  }
}

int CompareTuple(const Tuple& a, const Tuple& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (int c = CompareValue(a[i], b[i])) return c;
  }
  return (a.size() > b.size()) - (a.size() < b.size());
}

std::string Encode(const Tuple& t) {
  std::string key;
  for (const Value& v : t) {
    switch (v.index()) {
      case 0: AppendKeyNull(&key); break;
      case 1: AppendKeyInt64(&key, std::get<1>(v)); break;
      case 2: AppendKeyDouble(&key, std::get<2>(v)); break;
      case 3: AppendKeyString(&key, std::get<3>(v)); break;
    }
  }
  return key;
}

int CompareBytes(const std::string& a, const std::string& b) {
  const int c = std::memcmp(a.data(), b.data(), std::min(a.size(), b.size()));
  if (c != 0) return Sign(c);
  return (a.size() > b.size()) - (a.size() < b.size());
}

class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  Value MakeValue(size_t type) {
    switch (type) {
      case 1: {
        static const int64_t kEdges[] = {std::numeric_limits<int64_t>::min(),
                                         std::numeric_limits<int64_t>::min() + 1,
                                         -256,
                                         -1,
                                         0,
                                         1,
                                         255,
                                         256,
                                         std::numeric_limits<int64_t>::max() - 1,
                                         std::numeric_limits<int64_t>::max()};
        switch (rng_() % 3) {
          case 0: return kEdges[rng_() % std::size(kEdges)];
          case 1: return static_cast<int64_t>(rng_() % 21) - 10;
          default: return static_cast<int64_t>(rng_());
        }
      }
      case 2: {
        constexpr double kInf = std::numeric_limits<double>::infinity();
        static const double kEdges[] = {-kInf,
                                        std::numeric_limits<double>::lowest(),
                                        -1.5,
                                        -1.0,
                                        -std::numeric_limits<double>::denorm_min(),
                                        -0.0,
                                        0.0,
                                        std::numeric_limits<double>::denorm_min(),
                                        std::numeric_limits<double>::min(),
                                        1.0,
                                        1.5,
                                        std::numeric_limits<double>::max(),
                                        kInf,
                                        std::numeric_limits<double>::quiet_NaN(),
                                        -std::numeric_limits<double>::quiet_NaN()};
        switch (rng_() % 3) {
          case 0: return kEdges[rng_() % std::size(kEdges)];
          case 1: return static_cast<double>(static_cast<int>(rng_() % 9) - 4) / 2;
          default: {
            // Any bit pattern, which includes NaNs with payloads and subnormals.
            uint64_t bits = rng_();
            double d;
            std::memcpy(&d, &bits, 8);
            return d;
          }
        }
      }
      case 3: {
        // A tiny alphabet around the escape bytes makes ties, prefixes and 0x00 runs common.
        static const char kAlphabet[] = {'\0', '\x01', 'a', '\xFE', '\xFF'};
        std::string s(rng_() % 5, '\0');
        for (char& c : s) c = kAlphabet[rng_() % std::size(kAlphabet)];
        return s;
      }
      default: return std::monostate{};
    }
  }

  std::vector<size_t> Schema() {
    std::vector<size_t> types(1 + rng_() % 3);
    for (size_t& t : types) t = 1 + rng_() % 3;
    return types;
  }

  Tuple MakeTuple(const std::vector<size_t>& schema) {
    Tuple t;
    for (size_t type : schema) t.push_back(rng_() % 8 == 0 ? Value{} : MakeValue(type));
    return t;
  }

  uint64_t Next() { return rng_(); }

 private:
  std::mt19937_64 rng_;
};

// Decodes a whole key back into values; false if any column is malformed.
bool DecodeTuple(std::string_view in, Tuple* out) {
  out->clear();
  while (!in.empty()) {
    KeyColumnType type;
    if (!PeekKeyColumnType(in, &type)) return false;
    switch (type) {
      case KeyColumnType::kNull:
        if (!DecodeKeyNull(&in)) return false;
        out->push_back(std::monostate{});
        break;
      case KeyColumnType::kInt64: {
        int64_t v;
        if (!DecodeKeyInt64(&in, &v)) return false;
        out->push_back(v);
        break;
      }
      case KeyColumnType::kDouble: {
        double v;
        if (!DecodeKeyDouble(&in, &v)) return false;
        out->push_back(v);
        break;
      }
      case KeyColumnType::kString: {
        std::string v;
        if (!DecodeKeyString(&in, &v)) return false;
        out->push_back(std::move(v));
        break;
      }
    }
  }
  return true;
}

}  // namespace

TEST_CASE("key encoding: memcmp order equals typed order", "[util][key_encoding]") {
  Generator gen(12345);
  for (int i = 0; i < 20000; ++i) {
    const std::vector<size_t> schema = gen.Schema();
    const Tuple a = gen.MakeTuple(schema);
    // Mostly the same schema (one index's keys); sometimes a different arity or column type.
    Tuple b = gen.Next() % 4 == 0 ? gen.MakeTuple(gen.Schema()) : gen.MakeTuple(schema);
    if (gen.Next() % 4 == 0) {
      b = a;  // share a prefix, then differ in the last column (or not at all)
      b.back() = gen.MakeValue(schema.back());
    }
    const std::string ea = Encode(a), eb = Encode(b);
    INFO("pair " << i);
    REQUIRE(CompareBytes(ea, eb) == CompareTuple(a, b));
  }
}

TEST_CASE("key encoding: edge values sort correctly", "[util][key_encoding]") {
  auto key = [](Value v) { return Encode(Tuple{std::move(v)}); };
  constexpr double kInf = std::numeric_limits<double>::infinity();
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  const std::vector<Value> ascending = {std::monostate{},
                                        std::numeric_limits<int64_t>::min(),
                                        int64_t{-1},
                                        int64_t{0},
                                        int64_t{1},
                                        std::numeric_limits<int64_t>::max(),
                                        -kInf,
                                        std::numeric_limits<double>::lowest(),
                                        -1.0,
                                        -std::numeric_limits<double>::denorm_min(),
                                        0.0,
                                        std::numeric_limits<double>::denorm_min(),
                                        1.0,
                                        std::numeric_limits<double>::max(),
                                        kInf,
                                        kNaN,
                                        std::string(),
                                        std::string(1, '\0'),
                                        std::string("\0\0", 2),
                                        std::string("\0a", 2),
                                        std::string("\x01"),
                                        std::string("a"),
                                        std::string("a\0", 2),
                                        std::string("a\x01"),
                                        std::string("ab"),
                                        std::string("\xFF")};
  for (size_t i = 1; i < ascending.size(); ++i) {
    INFO("position " << i);
    CHECK(key(ascending[i - 1]) < key(ascending[i]));
  }
  CHECK(key(-0.0) == key(0.0));
  CHECK(key(kNaN) == key(-kNaN));
  // Multi-column: the first column decides, even when a later one would say otherwise.
  CHECK(Encode({std::string("a"), int64_t{9}}) < Encode({std::string("a\0", 2), int64_t{0}}));
  CHECK(Encode({std::string("a"), int64_t{9}}) < Encode({std::string("ab"), int64_t{0}}));
  CHECK(Encode({int64_t{1}}) < Encode({int64_t{1}, std::monostate{}}));
}

TEST_CASE("key encoding: decoders round-trip", "[util][key_encoding]") {
  Generator gen(777);
  for (int i = 0; i < 5000; ++i) {
    const Tuple t = gen.MakeTuple(gen.Schema());
    const std::string key = Encode(t);
    Tuple back;
    REQUIRE(DecodeTuple(key, &back));
    REQUIRE(back.size() == t.size());
    for (size_t c = 0; c < t.size(); ++c) {
      REQUIRE(back[c].index() == t[c].index());
      if (t[c].index() == 2) {
        const double x = std::get<2>(t[c]), y = std::get<2>(back[c]);
        if (std::isnan(x)) {
          REQUIRE(std::isnan(y));
        } else {
          REQUIRE(x == y);
          if (x == 0.0) REQUIRE_FALSE(std::signbit(y));  // -0.0 comes back as +0.0
        }
      } else {
        REQUIRE(CompareValue(back[c], t[c]) == 0);
      }
    }
  }
  std::string key;
  AppendKeyString(&key, std::string("x\0y\0", 4));
  std::string_view in = key;
  std::string s;
  REQUIRE(DecodeKeyString(&in, &s));
  CHECK(s == std::string("x\0y\0", 4));
  CHECK(in.empty());
}

TEST_CASE("key encoding: malformed input is refused", "[util][key_encoding]") {
  KeyColumnType type;
  int64_t i;
  double d;
  std::string s;
  CHECK_FALSE(PeekKeyColumnType("", &type));
  CHECK_FALSE(PeekKeyColumnType("\x04", &type));
  CHECK_FALSE(PeekKeyColumnType("\xFF", &type));

  auto refused = [](std::string bytes, auto decode) {
    std::string_view in = bytes;
    const bool ok = decode(&in);
    return !ok && in.size() == bytes.size();  // nothing consumed on failure
  };
  auto int64 = [&](std::string_view* in) { return DecodeKeyInt64(in, &i); };
  auto dbl = [&](std::string_view* in) { return DecodeKeyDouble(in, &d); };
  auto str = [&](std::string_view* in) { return DecodeKeyString(in, &s); };
  auto null = [&](std::string_view* in) { return DecodeKeyNull(in); };

  CHECK(refused("", null));
  CHECK(refused("\x01", null));
  CHECK(refused("", int64));
  CHECK(refused(std::string("\x01\0\0\0\0\0\0\0", 8), int64));    // 7 payload bytes
  CHECK(refused(std::string("\x02\0\0\0\0\0\0\0\0", 9), int64));  // wrong tag
  CHECK(refused(std::string("\x02\0\0\0", 4), dbl));
  CHECK(refused("", str));
  CHECK(refused("\x03", str));  // no terminator
  CHECK(
      refused("\x03"
              "abc",
              str));  // no terminator
  CHECK(refused(std::string("\x03"
                            "a\0",
                            3),
                str));  // lone 0x00 at the end
  CHECK(refused(std::string("\x03"
                            "a\0\x01",
                            4),
                str));                                          // bad escape
  CHECK(refused(std::string("\x01\0\0\0\0\0\0\0\0", 9), str));  // wrong tag

  // Random garbage never crashes the decoders (the sanitizer builds watch this).
  Generator gen(99);
  for (int n = 0; n < 20000; ++n) {
    std::string bytes(gen.Next() % 16, '\0');
    for (char& c : bytes) c = static_cast<char>(gen.Next() % 5 == 0 ? gen.Next() % 4 : gen.Next());
    Tuple out;
    (void)DecodeTuple(bytes, &out);
  }
}

TEST_CASE("key encoding: skipping a column steps exactly over what a decoder reads",
          "[util][key_encoding]") {
  Generator gen(7);
  for (int n = 0; n < 20000; ++n) {
    // Well-formed tuples: skipping each column ends where decoding it ends.
    const std::string key = Encode(gen.MakeTuple(gen.Schema())) + "tail";
    std::string_view skipped = key, decoded = key;
    while (skipped.size() > 4) {
      REQUIRE(SkipKeyColumn(&skipped));
      KeyColumnType type;
      REQUIRE(PeekKeyColumnType(decoded, &type));
      int64_t i;
      double d;
      std::string s;
      switch (type) {
        case KeyColumnType::kNull: REQUIRE(DecodeKeyNull(&decoded)); break;
        case KeyColumnType::kInt64: REQUIRE(DecodeKeyInt64(&decoded, &i)); break;
        case KeyColumnType::kDouble: REQUIRE(DecodeKeyDouble(&decoded, &d)); break;
        case KeyColumnType::kString: REQUIRE(DecodeKeyString(&decoded, &s)); break;
      }
      REQUIRE(skipped.size() == decoded.size());
    }
    REQUIRE(skipped == "tail");
    // Garbage: skipping accepts exactly what decoding accepts, and never reads past the end.
    std::string bytes(gen.Next() % 16, '\0');
    for (char& c : bytes) c = static_cast<char>(gen.Next() % 5 == 0 ? gen.Next() % 4 : gen.Next());
    std::string_view a = bytes;
    Tuple out;
    const bool decodes = DecodeTuple(bytes, &out);
    bool skips = true;
    while (skips && !a.empty()) skips = SkipKeyColumn(&a);
    REQUIRE(skips == decodes);
  }
  std::string_view empty;
  CHECK_FALSE(SkipKeyColumn(&empty));
  std::string_view cut(
      "\x03"
      "ab\0",
      4);
  CHECK_FALSE(SkipKeyColumn(&cut));
  std::string_view bad_escape(
      "\x03"
      "a\0\x01\0\0",
      6);
  CHECK_FALSE(SkipKeyColumn(&bad_escape));
}
