// Progress of a tool's long work, on stderr (stdout stays the report, for scripts and diffs).
//
// On a terminal: one line redrawn in place (at most 10 times a second), with done/total,
// percent, rate per second and ETA; the line is cleared when the work ends. Otherwise (a pipe,
// a file, a test): a plain line every `interval` (5 s by default) and one at the end, so a log
// shows that a long run is alive without filling up.
//
// Work with no count (a sweep or a validate run inside the engine, which reports nothing until
// it returns) uses Run(): a ticker thread shows the elapsed time the same way.
//
// Thread safety: Update/Add may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace ember::tools {

struct ProgressOptions {
  bool enabled = true;                       // false: prints nothing (a --noprogress flag)
  int tty = -1;                              // -1: ask isatty(stderr); 0/1 force (tests)
  std::chrono::milliseconds interval{5000};  // between plain lines when not a terminal
  std::FILE* out = stderr;
};

class Progress {
 public:
  // `total` 0: unknown (no percent, rate or ETA). `unit`: what is counted ("pages").
  Progress(std::string label, uint64_t total, std::string unit = "pages",
           ProgressOptions options = {});
  ~Progress();  // Finish() if not done yet
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void Update(uint64_t done);
  void Add(uint64_t n) { Update(done_ + n); }
  void set_total(uint64_t total);
  // Ends the display: the terminal line is erased, a plain line says what was done and how long
  // it took.
  void Finish();

  // Runs `work` (which gives no progress of its own) with a ticker showing the elapsed time:
  // "LABEL: started", then while it runs the elapsed seconds, then "LABEL: done in 2.3 s".
  template <class F>
  auto Run(F&& work) {
    StartTicker();
    auto result = work();
    StopTicker();
    Finish();
    return result;
  }

  double seconds() const;
  // The text of the terminal line for `done` at `elapsed` seconds (for tests).
  std::string Line(uint64_t done, double elapsed) const;

 private:
  void DrawLocked(bool final);
  void StartTicker();
  void StopTicker();

  const std::string label_, unit_;
  const ProgressOptions options_;
  bool tty_ = false;
  const std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  uint64_t total_ = 0;
  uint64_t done_ = 0;
  bool finished_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
  size_t last_width_ = 0;
  std::thread ticker_;
  std::condition_variable ticker_cv_;
  bool stop_ticker_ = false;
};

}  // namespace ember::tools
