// Helpers for the tests of engine parts below the public API (cache, index, record, txn): a
// File wrapper that records the order of page writes and syncs (to check careful-write
// precedence) and checks over what it recorded, a scratch database file with a buffer cache
// over it, and test pages stamped with a version number.
#pragma once
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/cache/buffer_cache.h"
#include "engine/io/file.h"
#include "engine/page/page.h"
#include "engine/util/coding.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ember::testing {

// One recorded I/O event. Every Write, every WriteBatch and every Sync is one `step`; the requests
// of one WriteBatch share a step (their order inside the batch is undefined).
struct IoEvent {
  int step = 0;
  bool sync = false;
  page::PageNo page = 0;  // writes: the page written
  uint64_t stamp = 0;     // writes: the 8 bytes at kStampOffset of the page written
};

// Tests put a version number ("stamp") at this offset of their pages, just past the page header.
constexpr size_t kStampOffset = page::kPageHeaderSize;
inline uint64_t GetStamp(const uint8_t* page) { return util::Get64(page + kStampOffset); }
inline void SetStamp(uint8_t* page, uint64_t v) { util::Put64(page + kStampOffset, v); }

// A File wrapper that records the order of page writes and syncs, and can run a hook inside
// Sync() (to act "while a flush is between two precedence levels").
class RecordingFile : public io::File {
 public:
  RecordingFile(std::unique_ptr<io::File> base, uint32_t page_size)
      : base_(std::move(base)), ps_(page_size) {}

  std::vector<IoEvent> events() const;
  void ClearEvents();
  int next_step() const;
  // Runs `hook` at the start of every Sync() (not re-entered from inside itself).
  void SetSyncHook(std::function<void()> hook);
  // Runs `hook` once, at the start of the next Write or WriteBatch (on the writing thread).
  void SetWriteHookOnce(std::function<void()> hook);
  io::File* base() const { return base_.get(); }

  // Read calls so far (each may cover several pages).
  uint64_t read_calls() const { return read_calls_.load(); }
  absl::Status Read(uint64_t offset, void* buf, size_t len) override;
  absl::Status ReadBlocks(uint64_t offset, size_t block, std::span<uint8_t* const> bufs) override;
  absl::Status Write(uint64_t offset, const void* data, size_t len) override;
  absl::Status WriteBatch(std::span<const io::WriteRequest> reqs) override;
  absl::Status Sync() override;
  absl::Status Allocate(uint64_t size) override { return base_->Allocate(size); }
  absl::Status Truncate(uint64_t size) override { return base_->Truncate(size); }
  absl::StatusOr<uint64_t> Size() override { return base_->Size(); }
  const std::string& path() const override { return base_->path(); }

 private:
  void RunWriteHook();
  void Record(int step, uint64_t offset, const void* data, size_t len);

  std::unique_ptr<io::File> base_;
  const uint32_t ps_;
  mutable std::mutex mu_;
  std::vector<IoEvent> events_;       // guarded by mu_
  int step_ = 0;                      // guarded by mu_
  std::function<void()> hook_;        // guarded by mu_
  std::function<void()> write_hook_;  // guarded by mu_
  std::atomic<uint64_t> read_calls_{0};
};

// Index of the first write of `page` at or after step `from` (satisfying `pred`), or -1.
int FirstWrite(const std::vector<IoEvent>& ev, page::PageNo page, int from = 0,
               const std::function<bool(const IoEvent&)>& pred = nullptr);

// Checks "`first` reaches disk before `then`" in the events from step `from` on: the first write
// of `then` comes in a later step than some write of `first` satisfying `first_ok` (any write
// when null), and, with `need_sync`, a sync lies between the two. Returns "" or what went wrong.
std::string CheckBefore(const std::vector<IoEvent>& ev, page::PageNo first, page::PageNo then,
                        bool need_sync, int from = 0,
                        const std::function<bool(const IoEvent&)>& first_ok = nullptr);

// The events as text, for failure messages.
std::string Describe(const std::vector<IoEvent>& ev);

// A scratch database file (page 1 a PIP when asked) under a recording file and a buffer cache.
class TestDb {
 public:
  explicit TestDb(cache::CacheOptions opts, bool init_pip = true);

  cache::BufferCache& cache() { return *cache_; }
  RecordingFile& file() { return *file_; }
  const cache::CacheOptions& opts() const { return opts_; }
  uint32_t page_size() const { return opts_.page_size; }
  std::string path() const { return dir_.File("db.edb"); }

  // Drops the cache without writing anything and opens a fresh one over the same file.
  void Reopen();

  // The bytes of page `no` as they are on disk now.
  std::string DiskPage(page::PageNo no);

 private:
  TempDir dir_;
  cache::CacheOptions opts_;
  std::unique_ptr<RecordingFile> file_;
  std::unique_ptr<cache::BufferCache> cache_;
};

// Fills page `no` (a kData page header) with bytes derived from (no, stamp) after the stamp.
void FillPage(uint8_t* data, uint32_t ps, page::PageNo no, uint64_t stamp);

// "" when `data` holds what FillPage(no, stamp) wrote (ignoring checksum and generation).
std::string CheckPage(const uint8_t* data, uint32_t ps, page::PageNo no, uint64_t stamp);

}  // namespace ember::testing
