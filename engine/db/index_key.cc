// Index keys (index_key.h).
#include "engine/db/index_key.h"

#include <charconv>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "engine/index/btree.h"
#include "engine/util/coding.h"
#include "engine/util/key_encoding.h"

namespace ember::internal {

namespace {

// Longest part of a string or bytes value a key's text shows.
constexpr size_t kKeyTextBytes = 64;

void AppendKeyValue(const Value& v, std::string* key) {
  if (IsNull(v)) util::AppendKeyNull(key);
  else if (auto* i = std::get_if<int64_t>(&v)) util::AppendKeyInt64(key, *i);
  else if (auto* d = std::get_if<double>(&v)) util::AppendKeyDouble(key, *d);
  else if (auto* s = std::get_if<std::string>(&v)) util::AppendKeyString(key, *s);
  else if (auto* b = std::get_if<BlobId>(&v))
    util::AppendKeyInt64(key, static_cast<int64_t>(b->value));
}

// The first `n` bytes of `s`, not cutting a UTF-8 sequence (a string column's usual content).
std::string_view CutUtf8(std::string_view s, size_t n) {
  if (s.size() <= n) return s;
  size_t end = n;
  // Back over continuation bytes (10xxxxxx) to the start of the cut sequence.
  for (size_t k = 0; k < 3 && end > 0 && (static_cast<uint8_t>(s[end]) & 0xC0) == 0x80; ++k) {
    --end;
  }
  return s.substr(0, end);
}

void AppendValueText(ColumnType type, std::string_view* in, std::string* out) {
  util::KeyColumnType kt;
  if (!util::PeekKeyColumnType(*in, &kt)) {
    *out += "?";
    in->remove_prefix(in->size());
    return;
  }
  bool ok = true;
  switch (kt) {
    case util::KeyColumnType::kNull:
      ok = util::DecodeKeyNull(in);
      *out += "NULL";
      break;
    case util::KeyColumnType::kInt64: {
      int64_t v = 0;
      ok = util::DecodeKeyInt64(in, &v);
      absl::StrAppend(out, v);
      break;
    }
    case util::KeyColumnType::kDouble: {
      double v = 0;
      ok = util::DecodeKeyDouble(in, &v);
      char buf[32];
      const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), v);  // shortest
      out->append(buf, r.ptr);
      break;
    }
    case util::KeyColumnType::kString: {
      std::string v;
      ok = util::DecodeKeyString(in, &v);
      if (type == ColumnType::kBytes) {
        const std::string_view shown = std::string_view(v).substr(0, kKeyTextBytes);
        absl::StrAppend(out, "x'",
                        absl::BytesToHexString(absl::string_view(shown.data(), shown.size())), "'");
      } else {
        const std::string_view shown = CutUtf8(v, kKeyTextBytes);
        absl::StrAppend(out, "'",
                        absl::Utf8SafeCEscape(absl::string_view(shown.data(), shown.size())), "'");
      }
      if (v.size() > kKeyTextBytes) {
        // Only a part is shown: say so, and how long the value is.
        out->insert(out->size() - 1, "...");
        absl::StrAppend(out, " (", v.size(), " bytes)");
      }
      break;
    }
  }
  if (!ok) *out += "?";
}

}  // namespace

std::string KeyText(const IndexState& ix, std::string_view key) {
  std::string names = "(", values = "(";
  const auto& cols = ix.table->schema.columns;
  for (size_t i = 0; i < ix.key_columns.size(); ++i) {
    if (i > 0) {
      names += ", ";
      values += ", ";
    }
    const Column& col = cols[ix.key_columns[i]];
    names += col.name;
    AppendValueText(col.type, &key, &values);
  }
  return absl::StrCat(names, ")=", values, ")");
}

bool EncodeIndexKey(const IndexState& ix, const Row& row, std::string* key) {
  key->clear();
  bool has_null = false;
  for (size_t c : ix.key_columns) {
    has_null |= IsNull(row[c]);
    AppendKeyValue(row[c], key);
  }
  return has_null;
}

absl::Status EncodeKeyPrefix(const IndexState& ix, const Row& values, std::string* key) {
  key->clear();
  if (values.size() > ix.key_columns.size()) {
    return absl::InvalidArgumentError(absl::StrCat("index ", ix.schema.name, " has ",
                                                   ix.key_columns.size(), " key columns, ",
                                                   values.size(), " values given"));
  }
  const auto& cols = ix.table->schema.columns;
  for (size_t i = 0; i < values.size(); ++i) {
    const Column& col = cols[ix.key_columns[i]];
    const Value& v = values[i];
    bool ok = IsNull(v);
    switch (col.type) {
      case ColumnType::kInt64: ok |= std::holds_alternative<int64_t>(v); break;
      case ColumnType::kDouble: ok |= std::holds_alternative<double>(v); break;
      case ColumnType::kString:
      case ColumnType::kBytes: ok |= std::holds_alternative<std::string>(v); break;
      case ColumnType::kBlob: ok |= std::holds_alternative<BlobId>(v); break;
    }
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("index ", ix.schema.name, ": value ", i,
                                                     " does not match column ", col.name));
    }
    AppendKeyValue(v, key);
  }
  return absl::OkStatus();
}

uint32_t MaxIndexKey(uint32_t page_size) {
  return index::MaxKeySize(page_size) - 9;  // IndexEntry adds a count and up to 8 bytes
}

void AppendRecordNumber(uint64_t rec, std::string* entry) {
  const size_t n = util::SignificantBytes(rec);
  entry->push_back(static_cast<char>(n));
  for (size_t i = n; i-- > 0;) entry->push_back(static_cast<char>((rec >> (8 * i)) & 0xFF));
}

std::string IndexEntry(std::string_view key, uint64_t rec) {
  std::string e;
  e.reserve(key.size() + 9);
  e.append(key);
  AppendRecordNumber(rec, &e);
  return e;
}

bool ParseIndexEntry(const IndexState& ix, std::string_view entry, std::string_view* key,
                     uint64_t* rec) {
  std::string_view in = entry;
  for (size_t i = 0; i < ix.key_columns.size(); ++i) {
    if (!util::SkipKeyColumn(&in)) return false;
  }
  if (in.empty()) return false;
  const size_t n = static_cast<uint8_t>(in[0]);
  if (n < 1 || n > 8 || in.size() != n + 1) return false;
  uint64_t r = 0;
  for (size_t i = 1; i <= n; ++i) r = (r << 8) | static_cast<uint8_t>(in[i]);
  *key = entry.substr(0, entry.size() - in.size());
  *rec = r;
  return true;
}

absl::Status DuplicateKeyError(const IndexState& ix, std::string_view key) {
  return absl::AlreadyExistsError(absl::StrCat("unique index ", ix.schema.name, ": table ",
                                               ix.table->schema.name, " has duplicate key ",
                                               KeyText(ix, key)));
}

}  // namespace ember::internal
