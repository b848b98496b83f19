// The process side of the SIGKILL crash tests (tests/crash/, and tools/tools_test.cc's killed
// writer): the parent forks a child that opens the database and runs transactions, logging them
// in the side log (side_log.h), and kills it at a chosen moment; a real SIGKILL is the only way
// to stop the engine at an arbitrary instruction with the kernel keeping what it had been given.
//
// The child must not use Catch2 (an assertion would throw inside the forked copy of the test
// runner): it reports a failure on stderr and exits with kChildFailed, which the parent's check
// of the exit status turns into a test failure.
#pragma once
#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ember/ember.h"

namespace ember::testing {

// ---------------------------------------------------------------- in the child

constexpr int kChildFailed = 3;

// Reports `msg` on stderr and exits with kChildFailed.
[[noreturn]] void ChildDie(const std::string& msg);

void OkOrDie(const absl::Status& s, const std::string& what);

template <class T>
T ValueOrDie(absl::StatusOr<T> v, const std::string& what) {
  OkOrDie(v.status(), what);
  return std::move(*v);
}

// A log line must be on disk before the commit it announces starts: otherwise a kill could leave
// a committed transaction the log does not know of.
void AppendDurablyOrDie(int fd, const std::string& s);

// What ForkAndKill gives the child.
struct ChildLink {
  pid_t parent = 0;   // the child stops when it is orphaned (the parent died or gave up)
  int ready_fd = -1;  // tells the parent the database is open
};

struct ChildArgs {
  std::string db_path;
  std::string log_path;
  Options opts;
  uint64_t max_txns = 0;  // a safety bound: the parent kills long before
};

// The child's life: opens the side log and the database, tells the parent it is open (the kill
// delay may count from there), then calls `txn(db, handles, tx, log_fd)` with a fresh transaction
// until it is killed; `txn` does the work, the logging and the Commit or Rollback.
template <class GetHandlesFn, class TxnFn>
[[noreturn]] void RunChildLoop(const ChildArgs& a, const ChildLink& link, GetHandlesFn get_handles,
                               TxnFn txn) {
  const int log_fd = ::open(a.log_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (log_fd < 0) ChildDie("cannot open the side log");
  std::unique_ptr<Database> db = ValueOrDie(Database::Open(a.db_path, a.opts), "open");
  const auto handles = ValueOrDie(get_handles(db.get()), "handles");
  const char ready = 'R';
  ssize_t ignored = ::write(link.ready_fd, &ready, 1);
  (void)ignored;
  ::close(link.ready_fd);
  for (uint64_t n = 0; n < a.max_txns && ::getppid() == link.parent; ++n) {
    std::unique_ptr<Transaction> tx = ValueOrDie(db->Begin(), "begin");
    txn(*db, handles, tx.get(), log_fd);
  }
  OkOrDie(db->Close(), "close");
  ::_exit(0);
}

// ---------------------------------------------------------------- in the parent

// Forks a child that runs `child(link)` (it must end in _exit, never return), waits for its
// "open" (or its end) at most 20 s unless `count_from_fork`, then until `ready_to_kill()` (if
// given; polled for at most 60 s: a coverage condition such as "the child has spilled", which a
// loaded machine may take long to reach), then `delay_ms`, and kills it. The child must have
// died of the kill, or have stopped by itself with exit code 0.
void ForkAndKill(const std::function<void(const ChildLink&)>& child, int delay_ms,
                 bool count_from_fork = false, const std::function<bool()>& ready_to_kill = {});

}  // namespace ember::testing
