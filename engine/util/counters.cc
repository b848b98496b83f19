// Sharded database counters and the thread-local counter sinks (see counters.h).
#include "engine/util/counters.h"

namespace ember::util {

int ShardedCounters::NewShard() {
  static std::atomic<unsigned> next{0};
  return static_cast<int>(next.fetch_add(1, std::memory_order_relaxed) % kShards);
}

PageCounters ShardedCounters::Total() const {
  PageCounters t;
  for (const Shard& s : shards_) {
    t.fetches += s.v[0].load(std::memory_order_relaxed);
    t.marks += s.v[1].load(std::memory_order_relaxed);
    t.reads += s.v[2].load(std::memory_order_relaxed);
    t.writes += s.v[3].load(std::memory_order_relaxed);
    t.dw_writes += s.v[4].load(std::memory_order_relaxed);
    t.cycle_writes += s.v[5].load(std::memory_order_relaxed);
  }
  return t;
}

}  // namespace ember::util
