// The sweep experiment's table (big_table.h).
#include "tests/support/big_table.h"

#include <string>

#include "tests/support/status_matchers.h"

namespace ember::testing {

Table MakeBig(Database* db) {
  Table t = VALUE_OR_FAIL(db->CreateTable({"big",
                                           {{"id", ColumnType::kInt64, false},
                                            {"field", ColumnType::kInt64},
                                            {"s", ColumnType::kString}}}));
  REQUIRE_OK(db->CreateIndex({"big_id", "big", {"id"}, true}).status());
  REQUIRE_OK(db->CreateIndex({"big_field", "big", {"field"}, false}).status());
  return t;
}

std::vector<RecordId> Fill(Database* db, const Table& t, int rows, std::optional<int64_t> field) {
  std::vector<RecordId> ids;
  auto txn = VALUE_OR_FAIL(db->Begin());
  for (int64_t i = 0; i < rows; ++i) {
    ids.push_back(VALUE_OR_FAIL(txn->Insert(t, {i, field.value_or(i), std::string(100, 's')})));
  }
  REQUIRE_OK(txn->Commit());
  return ids;
}

}  // namespace ember::testing
