// Large buffers as transparent huge page candidates (see large_alloc.h).
#include "engine/util/large_alloc.h"

#include <sys/mman.h>

#include <cstdint>

namespace ember::util {

namespace {

// The sanitizers track operator new, not our mappings (GCC's macros, as in buffer_cache.cc).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kMapLarge = false;
#else
constexpr bool kMapLarge = true;
#endif

constexpr size_t kHuge = size_t{2} << 20;

size_t Rounded(size_t bytes) { return (bytes + kHuge - 1) & ~(kHuge - 1); }

bool Mapped(size_t bytes) { return kMapLarge && bytes >= kLargeAllocMin; }

}  // namespace

void* LargeAlloc(size_t bytes, size_t align) {
  if (!Mapped(bytes)) return ::operator new(bytes, std::align_val_t(align));
  // Map one huge page more than needed and trim, so the buffer starts on a 2 MB boundary
  // (THP only backs whole aligned 2 MB ranges).
  const size_t len = Rounded(bytes);
  void* raw =
      mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHuge - 1) & ~uintptr_t{kHuge - 1};
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = start + len + kHuge;
  if (end > aligned + len) munmap(reinterpret_cast<void*>(aligned + len), end - (aligned + len));
  void* p = reinterpret_cast<void*>(aligned);
  (void)madvise(p, len, MADV_HUGEPAGE);  // advice only: without THP, plain pages
  return p;
}

void LargeFree(void* p, size_t bytes, size_t align) noexcept {
  if (p == nullptr) return;
  if (!Mapped(bytes)) {
    ::operator delete(p, std::align_val_t(align));
    return;
  }
  munmap(p, Rounded(bytes));
}

}  // namespace ember::util
