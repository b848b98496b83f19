// The engine-part test helpers declared in engine_util.h.
#include "tests/support/engine_util.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/page/pip.h"

namespace ember::testing {

std::vector<IoEvent> RecordingFile::events() const {
  std::lock_guard<std::mutex> g(mu_);
  return events_;
}

void RecordingFile::ClearEvents() {
  std::lock_guard<std::mutex> g(mu_);
  events_.clear();
}

int RecordingFile::next_step() const {
  std::lock_guard<std::mutex> g(mu_);
  return step_;
}

void RecordingFile::SetSyncHook(std::function<void()> hook) {
  std::lock_guard<std::mutex> g(mu_);
  hook_ = std::move(hook);
}

void RecordingFile::SetWriteHookOnce(std::function<void()> hook) {
  std::lock_guard<std::mutex> g(mu_);
  write_hook_ = std::move(hook);
}

absl::Status RecordingFile::Read(uint64_t offset, void* buf, size_t len) {
  read_calls_.fetch_add(1);
  return base_->Read(offset, buf, len);
}

absl::Status RecordingFile::ReadBlocks(uint64_t offset, size_t block,
                                       std::span<uint8_t* const> bufs) {
  read_calls_.fetch_add(1);
  return base_->ReadBlocks(offset, block, bufs);
}

absl::Status RecordingFile::Write(uint64_t offset, const void* data, size_t len) {
  RunWriteHook();
  absl::Status s = base_->Write(offset, data, len);
  if (s.ok()) {
    std::lock_guard<std::mutex> g(mu_);
    Record(step_++, offset, data, len);
  }
  return s;
}

absl::Status RecordingFile::WriteBatch(std::span<const io::WriteRequest> reqs) {
  RunWriteHook();
  absl::Status s = base_->WriteBatch(reqs);
  if (s.ok()) {
    std::lock_guard<std::mutex> g(mu_);
    const int step = step_++;
    for (const io::WriteRequest& r : reqs) Record(step, r.offset, r.data, r.len);
  }
  return s;
}

absl::Status RecordingFile::Sync() {
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

void RecordingFile::RunWriteHook() {
  std::function<void()> hook;
  {
    std::lock_guard<std::mutex> g(mu_);
    hook = std::exchange(write_hook_, nullptr);
  }
  if (hook) hook();
}

void RecordingFile::Record(int step, uint64_t offset, const void* data, size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t at = 0; at + ps_ <= len; at += ps_) {
    events_.push_back(
        {step, false, static_cast<page::PageNo>((offset + at) / ps_), GetStamp(p + at)});
  }
}

int FirstWrite(const std::vector<IoEvent>& ev, page::PageNo page, int from,
               const std::function<bool(const IoEvent&)>& pred) {
  for (size_t i = 0; i < ev.size(); ++i) {
    if (!ev[i].sync && ev[i].page == page && ev[i].step >= from && (!pred || pred(ev[i]))) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

std::string CheckBefore(const std::vector<IoEvent>& ev, page::PageNo first, page::PageNo then,
                        bool need_sync, int from,
                        const std::function<bool(const IoEvent&)>& first_ok) {
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
      return absl::StrCat("no sync between page ", first, " (step ", ev[best].step, ") and page ",
                          then, " (step ", then_step, ")");
    }
  }
  return "";
}

std::string Describe(const std::vector<IoEvent>& ev) {
  std::string s;
  for (const IoEvent& e : ev) {
    if (e.sync) absl::StrAppend(&s, "[", e.step, " sync] ");
    else absl::StrAppend(&s, "[", e.step, " p", e.page, " s", e.stamp, "] ");
  }
  return s;
}

TestDb::TestDb(cache::CacheOptions opts, bool init_pip) : opts_(opts) {
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

void TestDb::Reopen() {
  cache_.reset();
  cache_ = std::make_unique<cache::BufferCache>(file_.get(), opts_);
}

std::string TestDb::DiskPage(page::PageNo no) {
  std::string s(opts_.page_size, '\0');
  absl::Status st = file_->Read(uint64_t{no} * opts_.page_size, s.data(), s.size());
  if (!st.ok()) FAIL("reading page " << no << ": " << st.ToString());
  return s;
}

void FillPage(uint8_t* data, uint32_t ps, page::PageNo no, uint64_t stamp) {
  page::InitPage(data, ps, page::PageType::kData, no);
  SetStamp(data, stamp);
  for (uint32_t i = kStampOffset + 8; i < ps; ++i) {
    data[i] = static_cast<uint8_t>((no * 131u) ^ (stamp * 31u) ^ (i * 7u));
  }
}

std::string CheckPage(const uint8_t* data, uint32_t ps, page::PageNo no, uint64_t stamp) {
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
