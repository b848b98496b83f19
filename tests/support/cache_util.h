// Helpers for the buffer cache tests (buffer_cache_test.cc, careful_write_test.cc): options for
// a small cache of 4 KB pages, making and rewriting test pages (FillPage, engine_util.h), and
// counting recorded I/O events.
#pragma once
#include <cstddef>
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

cache::CacheOptions Opts(uint32_t capacity, bool forced = false);

// Creates page `no` with FillPage(no, stamp), marked for `txn`.
void MakePage(cache::BufferCache& c, page::PageNo no, uint64_t stamp, uint64_t txn = 1,
              cache::NewPage kind = cache::NewPage::kPlaced);

// Rewrites page `no` (fetched exclusively) with FillPage(no, stamp), marked for `txn`.
void RewritePage(cache::BufferCache& c, page::PageNo no, uint64_t stamp, uint64_t txn = 1);

// The recorded writes of page `p`, and the recorded syncs.
size_t WritesOf(const std::vector<IoEvent>& ev, page::PageNo p);
size_t Syncs(const std::vector<IoEvent>& ev);

}  // namespace ember::testing
