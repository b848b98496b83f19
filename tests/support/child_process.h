// The process side of the SIGKILL crash tests (crash_test.cc, blob_crash_test.cc): the parent
// forks a child that opens the database and runs transactions, logging them in the side log
// (side_log.h), and kills it at a chosen moment; a real SIGKILL is the only way to stop the
// engine at an arbitrary instruction with the kernel keeping what it had been given.
//
// The child must not use Catch2 (an assertion would throw inside the forked copy of the test
// runner): it reports a failure on stderr and exits with kChildFailed, which the parent's check
// of the exit status turns into a test failure.
//
// Header-only on purpose: tests/CMakeLists.txt compiles only *_test.cc files.
#pragma once
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ember/ember.h"

namespace ember::testing {

// ---------------------------------------------------------------- in the child

constexpr int kChildFailed = 3;

[[noreturn]] inline void ChildDie(const std::string& msg) {
  const std::string m = "crash test child: " + msg + "\n";
  ssize_t ignored = ::write(2, m.data(), m.size());
  (void)ignored;
  ::_exit(kChildFailed);
}

inline void OkOrDie(const absl::Status& s, const std::string& what) {
  if (!s.ok()) ChildDie(what + ": " + s.ToString());
}

template <class T>
T ValueOrDie(absl::StatusOr<T> v, const std::string& what) {
  OkOrDie(v.status(), what);
  return std::move(*v);
}

// A log line must be on disk before the commit it announces starts: otherwise a kill could leave
// a committed transaction the log does not know of.
inline void AppendDurablyOrDie(int fd, const std::string& s) {
  for (size_t done = 0; done < s.size();) {
    const ssize_t w = ::write(fd, s.data() + done, s.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      ChildDie("side log write failed");
    }
    done += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0) ChildDie("side log write failed");
}

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
inline void ForkAndKill(const std::function<void(const ChildLink&)>& child, int delay_ms,
                        bool count_from_fork = false,
                        const std::function<bool()>& ready_to_kill = {}) {
  std::fflush(nullptr);
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(ready[0]);
    child(ChildLink{parent, ready[1]});
    ::_exit(kChildFailed);
  }
  ::close(ready[1]);
  if (!count_from_fork) {
    struct pollfd pfd = {ready[0], POLLIN, 0};
    (void)::poll(&pfd, 1, 20000);
  }
  if (ready_to_kill) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    auto child_ended = [pid] {  // (WNOWAIT: left to be reaped below)
      siginfo_t info{};
      return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
             info.si_pid == pid;
    };
    while (!ready_to_kill() && std::chrono::steady_clock::now() < give_up && !child_ended()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  ::kill(pid, SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  ::close(ready[0]);  // only now: the child must not get SIGPIPE writing "open"
  if (WIFEXITED(status)) {
    INFO("the child stopped by itself with exit code " << WEXITSTATUS(status)
                                                       << " (its message is on stderr)");
    REQUIRE(WEXITSTATUS(status) == 0);
  } else {
    REQUIRE(WIFSIGNALED(status));
    REQUIRE(WTERMSIG(status) == SIGKILL);
  }
}

}  // namespace ember::testing
