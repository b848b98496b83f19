// The fork-and-kill machinery of the SIGKILL crash tests declared in child_process.h.
#include "tests/support/child_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <thread>

namespace ember::testing {

void ChildDie(const std::string& msg) {
  const std::string m = "crash test child: " + msg + "\n";
  ssize_t ignored = ::write(2, m.data(), m.size());
  (void)ignored;
  ::_exit(kChildFailed);
}

void OkOrDie(const absl::Status& s, const std::string& what) {
  if (!s.ok()) ChildDie(what + ": " + s.ToString());
}

void AppendDurablyOrDie(int fd, const std::string& s) {
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

void ForkAndKill(const std::function<void(const ChildLink&)>& child, int delay_ms,
                 bool count_from_fork, const std::function<bool()>& ready_to_kill) {
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
