// Page counters as Firebird's trace names them (fetches, marks, reads, writes), kept
// per database, per transaction and per statement without bouncing a shared cache line on
// every fetch: database totals are spread over cache-line-sized shards picked per thread, and
// transaction/statement counters are plain fields of objects that one thread uses at a time,
// reached through a thread-local "current sinks" pointer that the transaction sets while it runs.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>

namespace ember::util {

// dw_writes: pages written into the doublewrite area (torn-page protection copies and their
// record pages), counted apart from `writes` (pages written home). cycle_writes: the part of
// `writes` that careful write forced out early (see ember::Counters).
struct PageCounters {
  uint64_t fetches = 0, marks = 0, reads = 0, writes = 0, dw_writes = 0, cycle_writes = 0;
  PageCounters& operator+=(const PageCounters& o) {
    fetches += o.fetches;
    marks += o.marks;
    reads += o.reads;
    writes += o.writes;
    dw_writes += o.dw_writes;
    cycle_writes += o.cycle_writes;
    return *this;
  }
  friend PageCounters operator-(PageCounters a, const PageCounters& b) {
    a.fetches -= b.fetches;
    a.marks -= b.marks;
    a.reads -= b.reads;
    a.writes -= b.writes;
    a.dw_writes -= b.dw_writes;
    a.cycle_writes -= b.cycle_writes;
    return a;
  }
};

enum class Counter { kFetches, kMarks, kReads, kWrites, kDwWrites, kCycleWrites };
constexpr int kCounterKinds = 6;

// Database-wide totals: one shard per thread slot, each on its own cache line.
class ShardedCounters {
 public:
  void Add(Counter c, uint64_t n) {
    shards_[ShardIndex()].v[static_cast<int>(c)].fetch_add(n, std::memory_order_relaxed);
  }
  PageCounters Total() const;

 private:
  static constexpr int kShards = 32;
  static unsigned ShardIndex() {
    int s = tls_shard_;
    if (s < 0) s = tls_shard_ = NewShard();
    return static_cast<unsigned>(s);
  }
  static int NewShard();
  // Inline and constant-initialised: no call and no guard per count (Count runs on every fetch
  // and mark).
  static inline thread_local int tls_shard_ = -1;
  struct alignas(64) Shard {
    std::array<std::atomic<uint64_t>, kCounterKinds> v{};
  };
  std::array<Shard, kShards> shards_{};
};

// The transaction's and the statement's counters that the current thread's page operations add to.
struct CounterSinks {
  PageCounters* txn = nullptr;
  PageCounters* statement = nullptr;
};
namespace internal {
inline thread_local CounterSinks tls_sinks;
}  // namespace internal
inline CounterSinks& CurrentSinks() { return internal::tls_sinks; }

// Sets the current thread's sinks for the lifetime of the scope, restoring the previous ones.
class ScopedCounterSinks {
 public:
  explicit ScopedCounterSinks(CounterSinks s) : saved_(CurrentSinks()) { CurrentSinks() = s; }
  ~ScopedCounterSinks() { CurrentSinks() = saved_; }
  ScopedCounterSinks(const ScopedCounterSinks&) = delete;
  ScopedCounterSinks& operator=(const ScopedCounterSinks&) = delete;

 private:
  CounterSinks saved_;
};

// Counts one event on the database totals and the current thread's sinks.
inline void Count(ShardedCounters& db, Counter c, uint64_t n = 1) {
  db.Add(c, n);
  CounterSinks& s = CurrentSinks();
  auto bump = [&](PageCounters* p) {
    if (!p) return;
    switch (c) {
      case Counter::kFetches: p->fetches += n; break;
      case Counter::kMarks: p->marks += n; break;
      case Counter::kReads: p->reads += n; break;
      case Counter::kWrites: p->writes += n; break;
      case Counter::kDwWrites: p->dw_writes += n; break;
      case Counter::kCycleWrites: p->cycle_writes += n; break;
    }
  };
  bump(s.txn);
  bump(s.statement);
}

}  // namespace ember::util
