// TempSpace: a growable scratch address space for temporary data (temporary BLOBs, undo-log
// overflow, sort runs). It lives in memory up to `cache_limit` bytes and spills further blocks
// to files in the temp directories (a RAM disk or an SSD directory: one switch), like
// Firebird's TempSpace. Space is handed out as extents of a single logical address range;
// released extents are reused (best fit, adjacent free extents merged).
//
// Spill files are created with a name that carries the owning process id and are unlinked
// as soon as they are open, so nothing is left behind even after a crash; files of dead
// processes found in a temp directory (left by a system that could not unlink) are removed
// by RemoveStaleFiles, which Database::Open calls.
//
// Thread safety: all methods may be called concurrently.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/util/mutex.h"

namespace ember::io {

struct TempSpaceOptions {
  std::vector<std::string> dirs;       // empty: $EMBER_TMP, else $TMPDIR, else /tmp
  uint64_t cache_limit = 64ull << 20;  // bytes kept in memory before spilling
  uint64_t block_size = 1ull << 20;    // unit of growth
};

struct TempSpaceStats {
  uint64_t bytes_in_memory = 0;  // memory blocks
  uint64_t bytes_on_disk = 0;    // file blocks
  uint64_t spills = 0;           // file blocks ever created
  uint64_t bytes_allocated = 0;  // extents handed out and not released
  uint64_t peak_allocated = 0;
};

class TempSpace {
 public:
  explicit TempSpace(TempSpaceOptions opts);
  ~TempSpace();
  TempSpace(const TempSpace&) = delete;
  TempSpace& operator=(const TempSpace&) = delete;

  // The directories in effect: EMBER_TMP (';' or ':' separated) overrides the options.
  static std::vector<std::string> ResolveDirs(const std::vector<std::string>& configured);
  // Removes spill files of processes that no longer exist from `dirs`; returns how many.
  static int RemoveStaleFiles(const std::vector<std::string>& dirs);

  // An extent of `size` bytes (> 0). ResourceExhausted when the temp directories are full.
  absl::StatusOr<uint64_t> Allocate(uint64_t size);
  // Returns an extent (exactly as allocated) for reuse.
  void Release(uint64_t offset, uint64_t size);
  // Grows the extent at `offset` from `old_size` to `new_size` in place if the space after it
  // is free (or at the end of the address range); false if it cannot.
  bool TryExtend(uint64_t offset, uint64_t old_size, uint64_t new_size);

  absl::Status Write(uint64_t offset, const void* data, size_t len);
  absl::Status Read(uint64_t offset, void* buf, size_t len) const;

  TempSpaceStats stats() const;
  const std::vector<std::string>& dirs() const { return dirs_; }

 private:
  struct Block {
    std::unique_ptr<uint8_t[]> mem;  // memory block, or
    int fd = -1;                     // the spill file holding it
    uint64_t file_offset = 0;
  };
  absl::Status AddBlockLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status OpenSpillFileLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void InsertFreeLocked(uint64_t off, uint64_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseFreeLocked(std::map<uint64_t, uint64_t>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  template <typename Fn>
  absl::Status ForRange(uint64_t offset, size_t len, Fn fn) const;

  TempSpaceOptions opts_;
  std::vector<std::string> dirs_;
  mutable util::Mutex mu_;
  std::vector<Block> blocks_ ABSL_GUARDED_BY(mu_);
  uint64_t end_ ABSL_GUARDED_BY(mu_) = 0;                                // logical size in use
  std::map<uint64_t, uint64_t> free_by_off_ ABSL_GUARDED_BY(mu_);        // offset -> size
  std::multimap<uint64_t, uint64_t> free_by_size_ ABSL_GUARDED_BY(mu_);  // size -> offset
  int spill_fd_ ABSL_GUARDED_BY(mu_) = -1;
  size_t spill_dir_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t spill_size_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int> fds_ ABSL_GUARDED_BY(mu_);  // every spill file
  TempSpaceStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ember::io
