// The sweep experiment's table for tests (db/sweep_test.cc, db/swept_flags_test.cc,
// crash/sweep_crash_test.cc): big(id int64 NOT NULL, field int64, s string) with a unique index
// big_id and an index big_field, filled with rows of 100-byte strings.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "ember/ember.h"

namespace ember::testing {

// Creates the table and its two indexes.
Table MakeBig(Database* db);

// Rows id 0..rows-1 with field = `field` (by default the id), in one committed transaction;
// their record ids by id.
std::vector<RecordId> Fill(Database* db, const Table& t, int rows,
                           std::optional<int64_t> field = std::nullopt);

}  // namespace ember::testing
