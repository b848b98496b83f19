// One owner per database file: the lock Database::Open takes on the file it opens, held until
// Close (or destruction, or the process's death), so a second Open of the same file fails
// instead of silently splitting its commits between two handles that cannot see each other.
//
// Two layers:
// - an exclusive flock on a descriptor of its own that does no I/O, for other processes. flock
//   locks belong to the open file description, so a killed holder's lock goes with its last
//   descriptor; keeping it off the data file's descriptor means io_uring writes a killed
//   process left queued (which hold a reference to the data file) do not keep the database
//   locked. A child forked while the lock is held shares the description, and so the lock,
//   until it exits or execs (the descriptor is O_CLOEXEC).
// - a registry of the files this process holds, by device and inode, for this process: a
//   second Open under any path (a link, another spelling) is refused with a message saying so,
//   and it is refused even where flock is emulated by per-process record locks (NFS), under
//   which one process never conflicts with itself.
//
// Readers that inspect the file without opening it as a database take no lock.
#pragma once
#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace ember::io {

class OwnerLock {
 public:
  // Takes the lock of the existing file at `path`. Errors: Unavailable "database ... is in
  // use ..." when another handle of this process or another process holds it; else the error
  // opening the file (NotFound, PermissionDenied, ...).
  static absl::StatusOr<std::unique_ptr<OwnerLock>> Acquire(const std::string& path);
  // Creates the file at `path` (it must not exist) and takes its lock before anything is
  // written to it. AlreadyExists when it exists.
  static absl::StatusOr<std::unique_ptr<OwnerLock>> CreateAndAcquire(const std::string& path);
  ~OwnerLock();  // releases the lock
  OwnerLock(const OwnerLock&) = delete;
  OwnerLock& operator=(const OwnerLock&) = delete;

 private:
  OwnerLock(int fd, dev_t dev, ino_t ino) : fd_(fd), dev_(dev), ino_(ino) {}
  static absl::StatusOr<std::unique_ptr<OwnerLock>> Lock(int fd, const std::string& path);

  const int fd_;
  const dev_t dev_;
  const ino_t ino_;
};

}  // namespace ember::io
