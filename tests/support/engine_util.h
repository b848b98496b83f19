// Helpers for the engine-part tests (cache, txn, record): a File wrapper that records the order
// of page writes and syncs (to check careful-write precedence), a scratch database file with a
// buffer cache over it, and a precedence checker over the recorded events.
#pragma once
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/cache/buffer_cache.h"
#include "engine/io/file.h"
#include "engine/page/page.h"
#include "engine/page/pip.h"
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

  std::vector<IoEvent> events() const {
    std::lock_guard<std::mutex> g(mu_);
    return events_;
  }
  void ClearEvents() {
    std::lock_guard<std::mutex> g(mu_);
    events_.clear();
  }
  int next_step() const {
    std::lock_guard<std::mutex> g(mu_);
    return step_;
  }
  // Runs `hook` at the start of every Sync() (not re-entered from inside itself).
  void SetSyncHook(std::function<void()> hook) {
    std::lock_guard<std::mutex> g(mu_);
    hook_ = std::move(hook);
  }
  // Runs `hook` once, at the start of the next Write or WriteBatch (on the writing thread).
  void SetWriteHookOnce(std::function<void()> hook) {
    std::lock_guard<std::mutex> g(mu_);
    write_hook_ = std::move(hook);
  }
  io::File* base() const { return base_.get(); }

  // Read calls so far (each may cover several pages).
  uint64_t read_calls() const { return read_calls_.load(); }
  absl::Status Read(uint64_t offset, void* buf, size_t len) override {
    read_calls_.fetch_add(1);
    return base_->Read(offset, buf, len);
  }
  absl::Status ReadBlocks(uint64_t offset, size_t block, std::span<uint8_t* const> bufs) override {
    read_calls_.fetch_add(1);
    return base_->ReadBlocks(offset, block, bufs);
  }
  absl::Status Write(uint64_t offset, const void* data, size_t len) override {
    RunWriteHook();
    absl::Status s = base_->Write(offset, data, len);
    if (s.ok()) {
      std::lock_guard<std::mutex> g(mu_);
      Record(step_++, offset, data, len);
    }
    return s;
  }
  absl::Status WriteBatch(std::span<const io::WriteRequest> reqs) override {
    RunWriteHook();
    absl::Status s = base_->WriteBatch(reqs);
    if (s.ok()) {
      std::lock_guard<std::mutex> g(mu_);
      const int step = step_++;
      for (const io::WriteRequest& r : reqs) Record(step, r.offset, r.data, r.len);
    }
    return s;
  }
  absl::Status Sync() override {
    std::function<void()> hook;
    {
      std::lock_guard<std::mutex> g(mu_);
      hook = hook_;
    }
    thread_local bool in_hook = false;
    if (hook && !in_hook) {
      in_hook = true;
      hook();
      in_hook = false;
    }
    absl::Status s = base_->Sync();
    if (s.ok()) {
      std::lock_guard<std::mutex> g(mu_);
      events_.push_back({step_++, true, 0, 0});
    }
    return s;
  }
  absl::Status Allocate(uint64_t size) override { return base_->Allocate(size); }
  absl::Status Truncate(uint64_t size) override { return base_->Truncate(size); }
  absl::StatusOr<uint64_t> Size() override { return base_->Size(); }
  const std::string& path() const override { return base_->path(); }

 private:
  void RunWriteHook() {
    std::function<void()> hook;
    {
      std::lock_guard<std::mutex> g(mu_);
      hook = std::exchange(write_hook_, nullptr);
    }
    if (hook) hook();
  }
  void Record(int step, uint64_t offset, const void* data, size_t len) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t at = 0; at + ps_ <= len; at += ps_) {
      events_.push_back({step, false, static_cast<page::PageNo>((offset + at) / ps_),
                         GetStamp(p + at)});
    }
  }

  std::unique_ptr<io::File> base_;
  const uint32_t ps_;
  mutable std::mutex mu_;
  std::vector<IoEvent> events_;  // guarded by mu_
  int step_ = 0;                 // guarded by mu_
  std::function<void()> hook_;        // guarded by mu_
  std::function<void()> write_hook_;  // guarded by mu_
  std::atomic<uint64_t> read_calls_{0};
};

// Index of the first write of `page` at or after step `from` (satisfying `pred`), or -1.
inline int FirstWrite(const std::vector<IoEvent>& ev, page::PageNo page, int from = 0,
                      const std::function<bool(const IoEvent&)>& pred = nullptr) {
  for (size_t i = 0; i < ev.size(); ++i) {
    if (!ev[i].sync && ev[i].page == page && ev[i].step >= from && (!pred || pred(ev[i]))) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

// Checks "`first` reaches disk before `then`" in the events from step `from` on: the first write
// of `then` comes in a later step than some write of `first` satisfying `first_ok` (any write
// when null), and, with `need_sync`, a sync lies between the two. Returns "" or what went wrong.
inline std::string CheckBefore(const std::vector<IoEvent>& ev, page::PageNo first,
                               page::PageNo then, bool need_sync, int from = 0,
                               const std::function<bool(const IoEvent&)>& first_ok = nullptr) {
  const int t = FirstWrite(ev, then, from);
  if (t < 0) return absl::StrCat("page ", then, " was never written");
  const int then_step = ev[t].step;
  int best = -1;  // latest qualifying write of `first` in an earlier step
  for (int i = 0; i < t; ++i) {
    if (!ev[i].sync && ev[i].page == first && ev[i].step >= from && ev[i].step < then_step &&
        (!first_ok || first_ok(ev[i]))) {
      best = i;
    }
  }
  if (best < 0) {
    return absl::StrCat("page ", then, " (step ", then_step, ") was written before its ",
                        "prerequisite page ", first);
  }
  if (need_sync) {
    bool synced = false;
    for (int i = best + 1; i < t; ++i) synced |= ev[i].sync && ev[i].step > ev[best].step;
    if (!synced) {
      return absl::StrCat("no sync between page ", first, " (step ", ev[best].step,
                          ") and page ", then, " (step ", then_step, ")");
    }
  }
  return "";
}

inline std::string Describe(const std::vector<IoEvent>& ev) {
  std::string s;
  for (const IoEvent& e : ev) {
    if (e.sync) absl::StrAppend(&s, "[", e.step, " sync] ");
    else absl::StrAppend(&s, "[", e.step, " p", e.page, " s", e.stamp, "] ");
  }
  return s;
}

// A scratch database file (page 1 a PIP when asked) under a recording file and a buffer cache.
class TestDb {
 public:
  explicit TestDb(cache::CacheOptions opts, bool init_pip = true) : opts_(opts) {
    REQUIRE(dir_.ok());
    io::FileOptions fo;
    fo.mode = io::OpenMode::kCreateNew;
    auto f = io::OpenPosixFile(dir_.File("db.edb"), fo);
    REQUIRE(f.ok());
    file_ = std::make_unique<RecordingFile>(std::move(*f), opts.page_size);
    cache_ = std::make_unique<cache::BufferCache>(file_.get(), opts_);
    if (init_pip) {
      cache::PageRef r = VALUE_OR_FAIL(cache_->FetchNew(1));
      page::InitPip(r.data(), opts_.page_size, 1, 0);
      r.Mark(0);
    }
  }

  cache::BufferCache& cache() { return *cache_; }
  RecordingFile& file() { return *file_; }
  const cache::CacheOptions& opts() const { return opts_; }
  uint32_t page_size() const { return opts_.page_size; }
  std::string path() const { return dir_.File("db.edb"); }

  // Drops the cache without writing anything and opens a fresh one over the same file.
  void Reopen() {
    cache_.reset();
    cache_ = std::make_unique<cache::BufferCache>(file_.get(), opts_);
  }

  // The bytes of page `no` as they are on disk now.
  std::string DiskPage(page::PageNo no) {
    std::string s(opts_.page_size, '\0');
    absl::Status st = file_->Read(uint64_t{no} * opts_.page_size, s.data(), s.size());
    if (!st.ok()) FAIL("reading page " << no << ": " << st.ToString());
    return s;
  }

 private:
  TempDir dir_;
  cache::CacheOptions opts_;
  std::unique_ptr<RecordingFile> file_;
  std::unique_ptr<cache::BufferCache> cache_;
};

// Fills page `no` (a kData page header) with bytes derived from (no, stamp) after the stamp.
inline void FillPage(uint8_t* data, uint32_t ps, page::PageNo no, uint64_t stamp) {
  page::InitPage(data, ps, page::PageType::kData, no);
  SetStamp(data, stamp);
  for (uint32_t i = kStampOffset + 8; i < ps; ++i) {
    data[i] = static_cast<uint8_t>((no * 131u) ^ (stamp * 31u) ^ (i * 7u));
  }
}

// "" when `data` holds what FillPage(no, stamp) wrote (ignoring checksum and generation).
inline std::string CheckPage(const uint8_t* data, uint32_t ps, page::PageNo no, uint64_t stamp) {
  if (page::GetPageNo(data) != no) {
    return absl::StrCat("page ", no, " holds page number ", page::GetPageNo(data));
  }
  if (GetStamp(data) != stamp) {
    return absl::StrCat("page ", no, " has stamp ", GetStamp(data), ", expected ", stamp);
  }
  for (uint32_t i = kStampOffset + 8; i < ps; ++i) {
    if (data[i] != static_cast<uint8_t>((no * 131u) ^ (stamp * 31u) ^ (i * 7u))) {
      return absl::StrCat("page ", no, " byte ", i, " differs");
    }
  }
  return "";
}

}  // namespace ember::testing
