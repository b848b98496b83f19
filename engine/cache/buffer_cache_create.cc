// BufferCache::Create: the cache's memory checked and allocated without an exception reaching
// Database::Open (the frames are sized by Options::cache_pages, which is user input).
#include <unistd.h>

#include <algorithm>
#include <new>

#include "absl/strings/str_cat.h"
#include "engine/cache/buffer_cache.h"

namespace ember::cache {

namespace {

// Physical memory of this machine in bytes, 0 if unknown.
uint64_t PhysicalMemory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<BufferCache>> BufferCache::Create(io::File* file,
                                                                 const CacheOptions& opts) {
  // As the constructor counts: at least 16 frames.
  const uint64_t bytes = uint64_t{std::max<uint32_t>(opts.capacity, 16)} * opts.page_size;
  const std::string what = absl::StrCat("cache_pages ", opts.capacity, " of ", opts.page_size,
                                        " bytes (", bytes, " bytes)");
  // Past the machine's memory a cache can only thrash, and an allocator may abort rather than
  // fail on such a size (sanitizers do): refuse it as a bad option.
  if (const uint64_t phys = PhysicalMemory(); phys != 0 && bytes > phys) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": more than this machine's memory (", phys, " bytes)"));
  }
  try {
    return std::make_unique<BufferCache>(file, opts);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, ": cannot allocate the buffer cache's memory"));
  }
}

}  // namespace ember::cache
