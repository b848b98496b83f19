// The sweep experiment's table for tests: big(id int64 NOT NULL, field int64, s string) with a
// unique index big_id and an index big_field, filled with rows of 100-byte strings.
#pragma once
#include <catch2/catch.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ember/ember.h"
#include "tests/support/db_util.h"

namespace ember::testing {

inline Table MakeBig(Database* db) {
  Table t = VALUE_OR_FAIL(db->CreateTable({"big",
                                           {{"id", ColumnType::kInt64, false},
                                            {"field", ColumnType::kInt64},
                                            {"s", ColumnType::kString}}}));
  REQUIRE_OK(db->CreateIndex({"big_id", "big", {"id"}, true}).status());
  REQUIRE_OK(db->CreateIndex({"big_field", "big", {"field"}, false}).status());
  return t;
}

// Rows id 0..rows-1 with field = `field` (by default the id), in one committed transaction;
// their record ids by id.
inline std::vector<RecordId> Fill(Database* db, const Table& t, int rows,
                                  std::optional<int64_t> field = std::nullopt) {
  std::vector<RecordId> ids;
  auto txn = VALUE_OR_FAIL(db->Begin());
  for (int64_t i = 0; i < rows; ++i) {
    ids.push_back(VALUE_OR_FAIL(txn->Insert(t, {i, field.value_or(i), std::string(100, 's')})));
  }
  REQUIRE_OK(txn->Commit());
  return ids;
}

}  // namespace ember::testing
