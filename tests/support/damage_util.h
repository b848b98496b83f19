// Damage for the error-reporting tests (db/error_report_test.cc, tools/tools_test.cc): a record
// version whose bytes no longer decode as a row (its header intact, so only the row decoder
// notices), made in the cache of an open database, and the same undone.
#pragma once
#include <cstdint>
#include <string>

#include "ember/ember.h"
#include "engine/db/database_impl.h"
#include "engine/page/page.h"

namespace ember::testing {

struct DamagedVersion {
  page::PageNo page = page::kNoPage;
  uint16_t line = 0;
  std::string original;  // the version's stored bytes before
};

// Replaces the body of the version `depth` steps down the chain of record `id` (0: the newest)
// with one byte that claims 127 columns. The page is marked dirty, so a write reseals it.
DamagedVersion DamageVersion(db::DatabaseImpl* impl, const Table& t, RecordId id, int depth = 0);

// Puts the version's original bytes back.
void RepairVersion(db::DatabaseImpl* impl, const DamagedVersion& d);

// "page P line L", as errors name a version's place.
std::string PlaceOf(const DamagedVersion& d);

}  // namespace ember::testing
