// Memory for large buffers that are filled soon after they are allocated: the undo log's image
// vectors, chunk maps and arena, the buffer cache's frames.
//
// On this class of machine (a VM) the first touch of a fresh 4 KB page costs 10-20 us: a
// statement that takes a million before-images filled 32 MB of new undo log memory and spent
// ~90 ms, a fifth of its time, in page faults. Buffers of kLargeAllocMin or more are therefore
// mapped 2 MB-aligned and advised as transparent huge pages (MADV_HUGEPAGE; honoured when THP
// is "madvise" or "always"): the same 32 MB then faults in about 2 ms, and fewer TLB entries
// cover it. The bar is well below 2 MB because glibc serves mid-sized blocks (128 KB up to its
// dynamic mmap threshold) from fresh mappings until the process has freed one that large, and
// then from its heap: left to malloc, the first image-taking statement over a million records
// in a fresh process took 80-95 ms against 20-25 ms in a later transaction (4,246 page faults
// in three transactions, against 936 with this bar). A buffer under 2 MB still takes a whole huge
// page (the memory of an undo level or two; the rest of a mapping is never touched). Smaller
// buffers, and every buffer in sanitizer builds (so ASan still sees overflows), come from operator
// new.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace ember::util {

// Buffers at least this large are mapped as huge-page candidates.
inline constexpr size_t kLargeAllocMin = size_t{256} << 10;

// `bytes` of uninitialised memory aligned to `align` (a power of two up to 4096); throws
// std::bad_alloc when there is none, like operator new. Free with LargeFree and the same
// arguments.
void* LargeAlloc(size_t bytes, size_t align = alignof(std::max_align_t));
void LargeFree(void* p, size_t bytes, size_t align = alignof(std::max_align_t)) noexcept;

// A block of `bytes` from LargeAlloc, 4096-aligned, not zeroed, freed with it (the buffer
// cache's frames, the doublewrite area's mirror).
struct PageBlockFree {
  size_t bytes = 0;
  void operator()(uint8_t* p) const noexcept { LargeFree(p, bytes, 4096); }
};
using PageBlock = std::unique_ptr<uint8_t[], PageBlockFree>;
inline PageBlock AllocPageBlock(size_t bytes) {
  return PageBlock(static_cast<uint8_t*>(LargeAlloc(bytes, 4096)), PageBlockFree{bytes});
}

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
