// Memory for large buffers that are filled soon after they are allocated: the undo log's image
// vector and arena, the buffer cache's frames.
//
// On this class of machine (a VM) the first touch of a fresh 4 KB page costs about 10 us: a
// statement that takes a million before-images filled 32 MB of new undo log memory and spent
// ~90 ms, a fifth of its time, in page faults (update/2 of bench/mass_update, the first
// statement to take images). Buffers of 2 MB or more are therefore mapped 2 MB-aligned and
// advised as transparent huge pages (MADV_HUGEPAGE; honoured when THP is "madvise" or
// "always"): the same 32 MB then faults in about 2 ms, and fewer TLB entries cover it.
// Smaller buffers, and every buffer in sanitizer builds (so ASan still sees overflows), come
// from operator new.
#pragma once
#include <cstddef>
#include <new>

namespace ember::util {

// Buffers at least this large are mapped as huge-page candidates.
inline constexpr size_t kLargeAllocMin = size_t{2} << 20;

// `bytes` of uninitialised memory aligned to `align` (a power of two up to 4096); throws
// std::bad_alloc when there is none, like operator new. Free with LargeFree and the same
// arguments.
void* LargeAlloc(size_t bytes, size_t align = alignof(std::max_align_t));
void LargeFree(void* p, size_t bytes, size_t align = alignof(std::max_align_t)) noexcept;

// An allocator over LargeAlloc, for containers that grow large (std::vector, std::basic_string).
template <typename T>
struct LargeAllocator {
  using value_type = T;
  LargeAllocator() = default;
  template <typename U>
  LargeAllocator(const LargeAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(LargeAlloc(n * sizeof(T), alignof(T))); }
  void deallocate(T* p, size_t n) noexcept { LargeFree(p, n * sizeof(T), alignof(T)); }
  template <typename U>
  bool operator==(const LargeAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace ember::util
