// The catalog's rows (relation 0): one per table and index, as the database stores them:
// kind, relation id, name, page (a table's first pointer page, an index's root), table (of an
// index), flags and definition (a table's columns, an index's column names). docs/format.md.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ember/schema.h"
#include "engine/page/page.h"

namespace ember::db {

// Catalog rows (relation 0): kind, id, name, page, table, flags, definition.
constexpr int64_t kKindTable = 1;
constexpr int64_t kKindIndex = 2;
constexpr size_t kCatalogColumns = 7;
// Flags of an index row.
constexpr int64_t kIndexUnique = 1;
constexpr int64_t kIndexInactive = 2;

// A catalog row decoded and type-checked: a damaged or foreign row is DataLoss naming its
// record, never a wrong variant access.
struct CatalogRow {
  int64_t kind = 0;
  uint32_t id = 0;
  std::string name;
  page::PageNo page = 0;
  std::string table;  // of an index
  int64_t flags = 0;
  std::string definition;
};

std::string EncodeColumns(const std::vector<Column>& cols);
bool DecodeColumns(std::string_view in, std::vector<Column>* cols);
std::string EncodeNames(const std::vector<std::string>& names);
bool DecodeNames(std::string_view in, std::vector<std::string>* names);
// DataLoss naming record `rec` for a damaged or foreign row, never a wrong variant access.
absl::StatusOr<CatalogRow> ParseCatalogRow(uint64_t rec, std::string_view raw);

}  // namespace ember::db
