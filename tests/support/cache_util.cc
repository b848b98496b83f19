// The buffer cache test helpers declared in cache_util.h.
#include "tests/support/cache_util.h"

#include <algorithm>

#include "tests/support/status_matchers.h"

namespace ember::testing {

cache::CacheOptions Opts(uint32_t capacity, bool forced) {
  cache::CacheOptions o;
  o.page_size = kPs;
  o.capacity = capacity;
  o.forced_writes = forced;
  return o;
}

void MakePage(cache::BufferCache& c, page::PageNo no, uint64_t stamp, uint64_t txn,
              cache::NewPage kind) {
  cache::PageRef r = VALUE_OR_FAIL(c.FetchNew(no, kind));
  FillPage(r.data(), c.page_size(), no, stamp);
  r.Mark(txn);
}

void RewritePage(cache::BufferCache& c, page::PageNo no, uint64_t stamp, uint64_t txn) {
  cache::PageRef r = VALUE_OR_FAIL(c.Fetch(no, cache::LatchMode::kExclusive));
  FillPage(r.data(), c.page_size(), no, stamp);
  r.Mark(txn);
}

size_t WritesOf(const std::vector<IoEvent>& ev, page::PageNo p) {
  return std::count_if(ev.begin(), ev.end(),
                       [&](const IoEvent& e) { return !e.sync && e.page == p; });
}

size_t Syncs(const std::vector<IoEvent>& ev) {
  return std::count_if(ev.begin(), ev.end(), [](const IoEvent& e) { return e.sync; });
}

}  // namespace ember::testing
