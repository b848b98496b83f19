// The in-memory sort of a run: an array of 16-byte records {key prefix, entry offset, key
// length} over an arena of entries (run_format.h), put into (key, value) order by an MSD radix
// sort on the prefix bytes. Only records whose 8-byte prefixes are equal look at the arena
// (the rest of the key, then the value), so nearly all the work is on the contiguous records.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ember::sort {

struct PrefixRec {
  uint64_t prefix;  // KeyPrefix(key)
  uint32_t off;     // the entry's offset in the arena
  uint32_t len;     // the key's length
};
static_assert(sizeof(PrefixRec) == 16);

// Sorts `recs` in place (no memory beyond a few KB of stack): MSD radix on the prefix's bytes,
// insertion sort of small buckets, std::sort of big groups of equal prefixes.
void SortPrefixRecs(PrefixRec* recs, size_t n, const char* arena);

}  // namespace ember::sort
