// Encoding and checking of the catalog's rows (catalog_rows.h).
#include "engine/db/catalog_rows.h"

#include "absl/strings/str_cat.h"
#include "engine/blob/blob_codec.h"
#include "engine/record/record_format.h"
#include "engine/util/coding.h"

namespace ember::db {

std::string EncodeColumns(const std::vector<Column>& cols) {
  std::string out;
  util::PutVarint64(&out, cols.size());
  for (const Column& c : cols) {
    util::PutVarint64(&out, c.name.size());
    out += c.name;
    out.push_back(static_cast<char>(c.type));
    // Flags: bit 0 nullable, bit 1 a zstd level byte follows (files without it still read).
    out.push_back(static_cast<char>((c.nullable ? 1 : 0) | (c.zstd_level > 0 ? 2 : 0)));
    if (c.zstd_level > 0) out.push_back(static_cast<char>(c.zstd_level));
  }
  return out;
}

bool DecodeColumns(std::string_view in, std::vector<Column>* cols) {
  uint64_t n;
  if (!util::GetVarint64(&in, &n) || n > 4096) return false;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t len;
    if (!util::GetVarint64(&in, &len) || len + 2 > in.size()) return false;
    Column c;
    c.name = std::string(in.substr(0, len));
    in.remove_prefix(len);
    uint8_t t = static_cast<uint8_t>(in[0]);
    if (t < 1 || t > 5) return false;
    c.type = static_cast<ColumnType>(t);
    const uint8_t flags = static_cast<uint8_t>(in[1]);
    if (flags > 3) return false;
    c.nullable = (flags & 1) != 0;
    in.remove_prefix(2);
    if (flags & 2) {
      if (in.empty()) return false;
      c.zstd_level = static_cast<uint8_t>(in[0]);
      in.remove_prefix(1);
      if (c.zstd_level < 1 || c.zstd_level > blob::kMaxZstdLevel) return false;
    }
    cols->push_back(std::move(c));
  }
  return in.empty();
}

std::string EncodeNames(const std::vector<std::string>& names) {
  std::string out;
  util::PutVarint64(&out, names.size());
  for (const std::string& n : names) {
    util::PutVarint64(&out, n.size());
    out += n;
  }
  return out;
}

bool DecodeNames(std::string_view in, std::vector<std::string>* names) {
  uint64_t n;
  if (!util::GetVarint64(&in, &n) || n > 4096) return false;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t len;
    if (!util::GetVarint64(&in, &len) || len > in.size()) return false;
    names->emplace_back(in.substr(0, len));
    in.remove_prefix(len);
  }
  return in.empty();
}

absl::StatusOr<CatalogRow> ParseCatalogRow(uint64_t rec, std::string_view raw) {
  auto bad = [rec](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("catalog record ", rec, ": ", what));
  };
  Row r;
  if (absl::Status s = record::DecodeRow(raw, kCatalogColumns, &r); !s.ok()) {
    return bad(s.message());
  }
  const int64_t* kind = std::get_if<int64_t>(&r[0]);
  const int64_t* id = std::get_if<int64_t>(&r[1]);
  const std::string* name = std::get_if<std::string>(&r[2]);
  const int64_t* page = std::get_if<int64_t>(&r[3]);
  const std::string* table = std::get_if<std::string>(&r[4]);
  const int64_t* flags = std::get_if<int64_t>(&r[5]);
  const std::string* def = std::get_if<std::string>(&r[6]);
  if (!kind || !id || !name || !page || !table || !flags || !def) {
    return bad("a value of the wrong type (kind, id, name, page, table, flags, definition)");
  }
  if (*kind != kKindTable && *kind != kKindIndex) return bad(absl::StrCat("kind ", *kind));
  if (*id < 1 || *id > int64_t{UINT32_MAX}) return bad(absl::StrCat("relation id ", *id));
  // An inactive index (flags bit 1) has no tree: page 0.
  const bool inactive = *kind == kKindIndex && (*flags & kIndexInactive) != 0;
  if (*page < (inactive ? 0 : 1) || *page > int64_t{UINT32_MAX}) {
    return bad(absl::StrCat("page ", *page));
  }
  CatalogRow out;
  out.kind = *kind;
  out.id = static_cast<uint32_t>(*id);
  out.name = *name;
  out.page = static_cast<page::PageNo>(*page);
  out.table = *table;
  out.flags = *flags;
  out.definition = *def;
  return out;
}

}  // namespace ember::db
