// TempSpace implementation (see temp_space.h).
#include "engine/io/temp_space.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/io/file.h"

namespace ember::io {

namespace {
constexpr char kSpillPrefix[] = "ember_tmp_";
}  // namespace

std::vector<std::string> TempSpace::ResolveDirs(const std::vector<std::string>& configured) {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("EMBER_TMP"); env && *env) {
    for (absl::string_view d : absl::StrSplit(env, absl::ByAnyChar(";:"), absl::SkipEmpty())) {
      dirs.emplace_back(d);
    }
    return dirs;
  }
  if (!configured.empty()) return configured;
  if (const char* t = std::getenv("TMPDIR"); t && *t) return {t};
  return {"/tmp"};
}

int TempSpace::RemoveStaleFiles(const std::vector<std::string>& dirs) {
  int removed = 0;
  for (const std::string& dir : dirs) {
    DIR* d = opendir(dir.c_str());
    if (!d) continue;
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.rfind(kSpillPrefix, 0) != 0) continue;
      // ember_tmp_<pid>_<n>: remove when <pid> is gone.
      const long pid = std::strtol(name.c_str() + sizeof(kSpillPrefix) - 1, nullptr, 10);
      if (pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
        if (unlink((dir + "/" + name).c_str()) == 0) ++removed;
      }
    }
    closedir(d);
  }
  return removed;
}

TempSpace::TempSpace(TempSpaceOptions opts) : opts_(std::move(opts)) {
  if (opts_.block_size < 4096) opts_.block_size = 4096;
  dirs_ = ResolveDirs(opts_.dirs);
}

TempSpace::~TempSpace() {
  for (int fd : fds_) close(fd);
}

absl::Status TempSpace::OpenSpillFileLocked() {
  static std::atomic<uint64_t> counter{0};
  absl::Status last = absl::ResourceExhaustedError("no temp directory configured");
  // Every directory failed last time: try them all again (and report their real error).
  if (spill_dir_ >= dirs_.size()) spill_dir_ = 0;
  for (; spill_dir_ < dirs_.size(); ++spill_dir_) {
    const std::string path =
        absl::StrCat(dirs_[spill_dir_], "/", kSpillPrefix, getpid(), "_", counter.fetch_add(1));
    int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
      last = ErrnoStatus(errno, "create temp file", path);
      continue;
    }
    unlink(path.c_str());  // nothing to leave behind, whatever happens to this process
    spill_fd_ = fd;
    spill_size_ = 0;
    fds_.push_back(fd);
    return absl::OkStatus();
  }
  return last;
}

absl::Status TempSpace::AddBlockLocked() {
  Block b;
  const uint64_t in_memory = stats_.bytes_in_memory;
  if (in_memory + opts_.block_size <= opts_.cache_limit) {
    b.mem = std::make_unique<uint8_t[]>(opts_.block_size);
    stats_.bytes_in_memory += opts_.block_size;
  } else {
    // Spill: extend the current file; on a full directory move on to the next one.
    for (;;) {
      if (spill_fd_ < 0) {
        if (absl::Status s = OpenSpillFileLocked(); !s.ok()) {
          return absl::ResourceExhaustedError(absl::StrCat("temp space full: ", s.message()));
        }
      }
      int err = posix_fallocate(spill_fd_, static_cast<off_t>(spill_size_),
                                static_cast<off_t>(opts_.block_size));
      if (err == 0 || err == EOPNOTSUPP || err == EINVAL) break;
      if (err == ENOSPC && spill_dir_ + 1 < dirs_.size()) {
        ++spill_dir_;
        spill_fd_ = -1;
        continue;
      }
      return absl::ResourceExhaustedError(
          absl::StrCat("temp space full: cannot grow a spill file in ", dirs_[spill_dir_], ": ",
                       std::strerror(err)));
    }
    b.fd = spill_fd_;
    b.file_offset = spill_size_;
    spill_size_ += opts_.block_size;
    stats_.bytes_on_disk += opts_.block_size;
    stats_.spills++;
  }
  blocks_.push_back(std::move(b));
  return absl::OkStatus();
}

void TempSpace::InsertFreeLocked(uint64_t off, uint64_t size) {
  // Merge with the neighbours on either side.
  auto next = free_by_off_.lower_bound(off);
  if (next != free_by_off_.end() && off + size == next->first) {
    size += next->second;
    EraseFreeLocked(next);
  }
  auto it = free_by_off_.lower_bound(off);
  if (it != free_by_off_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == off) {
      off = prev->first;
      size += prev->second;
      EraseFreeLocked(prev);
    }
  }
  if (off + size == end_) {  // give the tail back to the end of the range
    end_ = off;
    return;
  }
  free_by_off_.emplace(off, size);
  free_by_size_.emplace(size, off);
}

void TempSpace::EraseFreeLocked(std::map<uint64_t, uint64_t>::iterator it) {
  auto [lo, hi] = free_by_size_.equal_range(it->second);
  for (auto s = lo; s != hi; ++s) {
    if (s->second == it->first) {
      free_by_size_.erase(s);
      break;
    }
  }
  free_by_off_.erase(it);
}

absl::StatusOr<uint64_t> TempSpace::Allocate(uint64_t size) {
  if (size == 0) return absl::InvalidArgumentError("TempSpace::Allocate of 0 bytes");
  util::MutexLock g(mu_);
  uint64_t off;
  auto best = free_by_size_.lower_bound(size);
  if (best != free_by_size_.end()) {
    off = best->second;
    const uint64_t have = best->first;
    EraseFreeLocked(free_by_off_.find(off));
    if (have > size) {
      free_by_off_.emplace(off + size, have - size);
      free_by_size_.emplace(have - size, off + size);
    }
  } else {
    off = end_;
    while (blocks_.size() * opts_.block_size < off + size) {
      if (absl::Status s = AddBlockLocked(); !s.ok()) return s;
    }
    end_ = off + size;
  }
  stats_.bytes_allocated += size;
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.bytes_allocated);
  return off;
}

bool TempSpace::TryExtend(uint64_t offset, uint64_t old_size, uint64_t new_size) {
  if (new_size <= old_size) return true;
  const uint64_t extra = new_size - old_size;
  util::MutexLock g(mu_);
  const uint64_t tail = offset + old_size;
  if (tail == end_) {
    while (blocks_.size() * opts_.block_size < end_ + extra) {
      if (!AddBlockLocked().ok()) return false;
    }
    end_ += extra;
  } else {
    auto it = free_by_off_.find(tail);
    if (it == free_by_off_.end() || it->second < extra) return false;
    const uint64_t have = it->second;
    EraseFreeLocked(it);
    if (have > extra) {
      free_by_off_.emplace(tail + extra, have - extra);
      free_by_size_.emplace(have - extra, tail + extra);
    }
  }
  stats_.bytes_allocated += extra;
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.bytes_allocated);
  return true;
}

void TempSpace::Release(uint64_t offset, uint64_t size) {
  if (size == 0) return;
  util::MutexLock g(mu_);
  stats_.bytes_allocated -= std::min(size, stats_.bytes_allocated);
  InsertFreeLocked(offset, size);
}

template <typename Fn>
absl::Status TempSpace::ForRange(uint64_t offset, size_t len, Fn fn) const {
  size_t done = 0;
  while (done < len) {
    const uint64_t pos = offset + done;
    const uint64_t bi = pos / opts_.block_size;
    const uint64_t in = pos % opts_.block_size;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(len - done, opts_.block_size - in));
    uint8_t* mem = nullptr;
    int fd = -1;
    uint64_t foff = 0;
    {
      util::MutexLock g(mu_);
      if (bi >= blocks_.size()) {
        return absl::OutOfRangeError(absl::StrCat("temp space: offset ", pos, " past the end"));
      }
      const Block& b = blocks_[bi];
      mem = b.mem.get();
      fd = b.fd;
      foff = b.file_offset + in;
    }
    if (absl::Status s = fn(mem ? mem + in : nullptr, fd, foff, done, n); !s.ok()) return s;
    done += n;
  }
  return absl::OkStatus();
}

absl::Status TempSpace::Write(uint64_t offset, const void* data, size_t len) {
  const auto* src = static_cast<const uint8_t*>(data);
  return ForRange(offset, len, [&](uint8_t* mem, int fd, uint64_t foff, size_t done, size_t n) {
    if (mem) {
      std::memcpy(mem, src + done, n);
      return absl::OkStatus();
    }
    for (size_t w = 0; w < n;) {
      ssize_t r = pwrite(fd, src + done + w, n - w, static_cast<off_t>(foff + w));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        if (errno == ENOSPC) return absl::ResourceExhaustedError("temp space full (ENOSPC)");
        return ErrnoStatus(errno, "pwrite temp file", "temp space", foff + w);
      }
      w += static_cast<size_t>(r);
    }
    return absl::OkStatus();
  });
}

absl::Status TempSpace::Read(uint64_t offset, void* buf, size_t len) const {
  auto* dst = static_cast<uint8_t*>(buf);
  return ForRange(offset, len, [&](uint8_t* mem, int fd, uint64_t foff, size_t done, size_t n) {
    if (mem) {
      std::memcpy(dst + done, mem, n);
      return absl::OkStatus();
    }
    for (size_t r = 0; r < n;) {
      ssize_t k = pread(fd, dst + done + r, n - r, static_cast<off_t>(foff + r));
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0)
        return ErrnoStatus(k < 0 ? errno : EIO, "pread temp file", "temp space", foff + r);
      r += static_cast<size_t>(k);
    }
    return absl::OkStatus();
  });
}

TempSpaceStats TempSpace::stats() const {
  util::MutexLock g(mu_);
  return stats_;
}

}  // namespace ember::io
