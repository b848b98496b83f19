// Helpers shared by the cache tests (buffer_cache_test.cc, careful_write_test.cc): options for a
// small cache of 4 KB pages, making and rewriting test pages, and counting recorded I/O events.
// Header-only: tests/CMakeLists.txt compiles only *_test.cc files.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/cache/buffer_cache.h"
#include "tests/support/engine_util.h"

namespace ember::testing {

constexpr uint32_t kPs = 4096;

// ThreadSanitizer keys lock order by mutex, i.e. by frame; frames change pages, so two latches
// taken in page order look like an inversion to it. Under TSan the tests hold one latch at a
// time.
#if defined(__SANITIZE_THREAD__)
constexpr bool kTsan = true;
#else
constexpr bool kTsan = false;
#endif

inline cache::CacheOptions Opts(uint32_t capacity, bool forced = false) {
  cache::CacheOptions o;
  o.page_size = kPs;
  o.capacity = capacity;
  o.forced_writes = forced;
  return o;
}

// Creates page `no` with FillPage(no, stamp), marked for `txn`.
inline void MakePage(cache::BufferCache& c, page::PageNo no, uint64_t stamp, uint64_t txn = 1,
                     cache::NewPage kind = cache::NewPage::kPlaced) {
  cache::PageRef r = VALUE_OR_FAIL(c.FetchNew(no, kind));
  FillPage(r.data(), c.page_size(), no, stamp);
  r.Mark(txn);
}

// Rewrites page `no` (fetched exclusively) with FillPage(no, stamp), marked for `txn`.
inline void RewritePage(cache::BufferCache& c, page::PageNo no, uint64_t stamp, uint64_t txn = 1) {
  cache::PageRef r = VALUE_OR_FAIL(c.Fetch(no, cache::LatchMode::kExclusive));
  FillPage(r.data(), c.page_size(), no, stamp);
  r.Mark(txn);
}

inline size_t WritesOf(const std::vector<IoEvent>& ev, page::PageNo p) {
  return std::count_if(ev.begin(), ev.end(),
                       [&](const IoEvent& e) { return !e.sync && e.page == p; });
}

inline size_t Syncs(const std::vector<IoEvent>& ev) {
  return std::count_if(ev.begin(), ev.end(), [](const IoEvent& e) { return e.sync; });
}

}  // namespace ember::testing
