// SortPrefixRecs (see prefix_sort.h): an American flag sort (in-place MSD radix) on the
// prefix's bytes, most significant first.
//
// In-place because the records are most of a run's memory and the sort memory limit counts
// them: an out-of-place radix would need a second array as large. A byte shared by every
// record of a bucket (a key's type tag, a common first letter) costs one counting pass and no
// moves. Keys of ordinary words separate within three or four bytes, into buckets small enough
// for insertion sort. The radix looks at the prefixes only; a last pass orders the records
// whose whole prefix is equal through the arena.
#include "engine/sort/prefix_sort.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "engine/sort/run_format.h"

namespace ember::sort {

namespace {

// Buckets up to this size are insertion-sorted (fewer passes than a radix step of 256 counters).
constexpr size_t kSmallBucket = 24;
// Records ahead of the tie pass whose entries are read early (each is a cache miss otherwise).
constexpr size_t kTieAhead = 32;

// a < b for records with equal prefixes: the key bytes after the prefix, then the length (a
// shorter key is a prefix of the longer one, its padding being zeros), then the value.
inline bool TieLess(const char* arena, const PrefixRec& a, const PrefixRec& b) {
  const size_t ha = a.len < 8 ? a.len : 8, hb = b.len < 8 ? b.len : 8;
  const std::string_view ta(arena + a.off + 2 + ha, a.len - ha);
  const std::string_view tb(arena + b.off + 2 + hb, b.len - hb);
  if (const int c = ta.compare(tb); c != 0) return c < 0;
  if (a.len != b.len) return a.len < b.len;
  return EntryValue(arena + a.off, a.len) < EntryValue(arena + b.off, b.len);
}

void InsertionSortPrefixes(PrefixRec* a, size_t n) {
  for (size_t i = 1; i < n; ++i) {
    const PrefixRec v = a[i];
    size_t j = i;
    for (; j > 0 && v.prefix < a[j - 1].prefix; --j) a[j] = a[j - 1];
    a[j] = v;
  }
}

// Sorts a[0, n) on the prefixes alone; they agree on their first `byte` bytes.
void MsdSort(PrefixRec* a, size_t n, int byte) {
  for (;;) {
    if (n <= kSmallBucket) {
      InsertionSortPrefixes(a, n);
      return;
    }
    if (byte == 8) return;  // all equal
    const int shift = 56 - 8 * byte;
    auto digit = [shift](const PrefixRec& r) {
      return static_cast<size_t>(r.prefix >> shift) & 0xFF;
    };
    // 32-bit counts: a run holds fewer than 2^32 records (its arena offsets are 32-bit).
    uint32_t count[256] = {};
    for (size_t i = 0; i < n; ++i) ++count[digit(a[i])];
    if (count[digit(a[0])] == n) {
      ++byte;
      continue;
    }
    uint32_t head[256], tail[256];
    for (uint32_t b = 0, at = 0; b < 256; ++b) {
      head[b] = at;
      at += count[b];
      tail[b] = at;
    }
    // Each record is moved once, straight to the next free place of its bucket.
    for (size_t b = 0; b < 256; ++b) {
      while (head[b] < tail[b]) {
        PrefixRec v = a[head[b]];
        for (size_t d = digit(v); d != b; d = digit(v)) std::swap(v, a[head[d]++]);
        a[head[b]++] = v;
      }
    }
    for (size_t b = 0, at = 0; b < 256; at += count[b], ++b) {
      if (count[b] > 1) MsdSort(a + at, count[b], byte + 1);
    }
    return;
  }
}

// Orders each group of equal prefixes through the arena. The groups are found on the sorted
// records, so the entries of the groups ahead are requested before they are compared: short
// keys repeat often (a 3-letter word in millions of entries), and each would be a cache miss.
void SortTies(PrefixRec* a, size_t n, const char* arena) {
  size_t requested = 0;
  auto request_to = [&](size_t end) {
    for (; requested < end; ++requested) {
      const uint64_t p = a[requested].prefix;
      if ((requested > 0 && a[requested - 1].prefix == p) ||
          (requested + 1 < n && a[requested + 1].prefix == p)) {
        __builtin_prefetch(arena + a[requested].off);
      }
    }
  };
  auto less = [arena](const PrefixRec& x, const PrefixRec& y) { return TieLess(arena, x, y); };
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && a[j].prefix == a[i].prefix) ++j;
    request_to(std::min(n, j + kTieAhead));
    if (j - i > kSmallBucket) {
      std::sort(a + i, a + j, less);
    } else if (j - i > 1) {
      for (size_t k = i + 1; k < j; ++k) {
        const PrefixRec v = a[k];
        size_t m = k;
        for (; m > i && less(v, a[m - 1]); --m) a[m] = a[m - 1];
        a[m] = v;
      }
    }
    i = j;
  }
}

}  // namespace

void SortPrefixRecs(PrefixRec* recs, size_t n, const char* arena) {
  if (n < 2) return;
  MsdSort(recs, n, 0);
  SortTies(recs, n, arena);
}

}  // namespace ember::sort
