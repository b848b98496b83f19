// Counters as Firebird's trace reports them, per statement, transaction and database.
#pragma once
#include <cstdint>

namespace ember {

struct Counters {
  uint64_t fetches = 0;  // logical page fetches (a page pinned in the cache)
  uint64_t marks = 0;    // times a page was marked dirty
  uint64_t reads = 0;    // physical page reads
  uint64_t writes = 0;   // physical page writes
};

struct DatabaseStats {
  Counters pages;
  uint64_t next_transaction = 0;
  uint64_t oldest_interesting = 0;  // OIT
  uint64_t oldest_active = 0;       // OAT
  uint64_t oldest_snapshot = 0;     // OST
  uint64_t page_count = 0;
  uint64_t commits = 0;
  uint64_t group_commit_flushes = 0;  // flush+fsync rounds; < commits when commits were grouped
  uint64_t temp_bytes_in_memory = 0;  // temp space held in memory
  uint64_t temp_bytes_on_disk = 0;    // temp space spilled to files
  uint64_t temp_spills = 0;           // spill blocks created
};

}  // namespace ember
