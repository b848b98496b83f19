// The lock that makes one Database the owner of its file (see owner_lock.h).
#include "engine/io/owner_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "engine/io/file.h"
#include "engine/util/mutex.h"

namespace ember::io {
namespace {

// The files this process holds, by device and inode. Never destroyed: a Database closed from a
// static destructor must still find it.
struct Registry {
  util::Mutex mu;
  absl::flat_hash_set<std::pair<dev_t, ino_t>> held ABSL_GUARDED_BY(mu);
};

Registry& Held() {
  static Registry* r = new Registry;
  return *r;
}

absl::StatusOr<int> OpenForLock(const std::string& path, int flags) {
  int fd;
  while ((fd = ::open(path.c_str(), flags | O_RDONLY | O_CLOEXEC, 0644)) < 0) {
    if (errno != EINTR) return ErrnoStatus(errno, "open", path);
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<OwnerLock>> OwnerLock::Acquire(const std::string& path) {
  absl::StatusOr<int> fd = OpenForLock(path, 0);
  if (!fd.ok()) return fd.status();
  return Lock(*fd, path);
}

absl::StatusOr<std::unique_ptr<OwnerLock>> OwnerLock::CreateAndAcquire(const std::string& path) {
  absl::StatusOr<int> fd = OpenForLock(path, O_CREAT | O_EXCL);
  if (!fd.ok()) return fd.status();
  return Lock(*fd, path);
}

absl::StatusOr<std::unique_ptr<OwnerLock>> OwnerLock::Lock(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus(err, "fstat", path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a database file (",
                     S_ISDIR(st.st_mode) ? "a directory" : "not a regular file", ")"));
  }
  const std::pair<dev_t, ino_t> key{st.st_dev, st.st_ino};
  {
    Registry& r = Held();
    util::MutexLock g(r.mu);
    if (!r.held.insert(key).second) {
      ::close(fd);
      return absl::UnavailableError(absl::StrCat(
          "database ", path, " is in use: another handle in this process has it open"));
    }
  }
  int rc;
  while ((rc = ::flock(fd, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {
  }
  if (rc != 0) {
    const int err = errno;
    ::close(fd);
    {
      Registry& r = Held();
      util::MutexLock g(r.mu);
      r.held.erase(key);
    }
    if (err == EWOULDBLOCK) {
      return absl::UnavailableError(absl::StrCat(
          "database ", path, " is in use: another process has it open (it holds the file's lock)"));
    }
    return ErrnoStatus(err, "flock", path);
  }
  return std::unique_ptr<OwnerLock>(new OwnerLock(fd, st.st_dev, st.st_ino));
}

OwnerLock::~OwnerLock() {
  ::close(fd_);  // drops the flock: this is the description's only descriptor in this process
  Registry& r = Held();
  util::MutexLock g(r.mu);
  r.held.erase({dev_, ino_});
}

}  // namespace ember::io
