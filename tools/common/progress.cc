// Progress display (progress.h).
#include "tools/common/progress.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_format.h"

namespace ember::tools {

namespace {

std::string Duration(double s) {
  if (s < 0) s = 0;
  const uint64_t t = static_cast<uint64_t>(s + 0.5);
  if (t >= 3600) return absl::StrFormat("%u:%02u:%02u", t / 3600, t / 60 % 60, t % 60);
  return absl::StrFormat("%u:%02u", t / 60, t % 60);
}

}  // namespace

Progress::Progress(std::string label, uint64_t total, std::string unit, ProgressOptions options)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      options_(options),
      start_(std::chrono::steady_clock::now()),
      total_(total) {
  tty_ = options_.tty >= 0 ? options_.tty != 0 : ::isatty(::fileno(options_.out)) != 0;
  last_draw_ = start_;
}

Progress::~Progress() {
  StopTicker();
  Finish();
}

double Progress::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::set_total(uint64_t total) {
  std::lock_guard<std::mutex> g(mu_);
  total_ = total;
}

std::string Progress::Line(uint64_t done, double elapsed) const {
  if (total_ == 0) {
    if (done == 0) return absl::StrFormat("%s: %s elapsed", label_, Duration(elapsed));
    return absl::StrFormat("%s: %u %s, %s elapsed", label_, done, unit_, Duration(elapsed));
  }
  const double frac = std::min(1.0, static_cast<double>(done) / static_cast<double>(total_));
  const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
  std::string eta = "--:--";
  if (rate > 0 && done < total_) eta = Duration(static_cast<double>(total_ - done) / rate);
  constexpr int kBar = 24;
  const int filled = static_cast<int>(frac * kBar);
  return absl::StrFormat("%s [%s%s] %u/%u %s %3d%% %.0f/s ETA %s", label_, std::string(filled, '#'),
                         std::string(kBar - filled, '.'), done, total_, unit_,
                         static_cast<int>(frac * 100), rate, eta);
}

void Progress::DrawLocked(bool final) {
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  if (tty_) {
    std::string line = Line(done_, elapsed);
    const size_t width = line.size();
    if (width < last_width_) line.append(last_width_ - width, ' ');
    std::fprintf(options_.out, "\r%s", line.c_str());
    last_width_ = width;
    if (final) {
      // Erase it: the summary line below replaces it.
      std::fprintf(options_.out, "\r%s\r", std::string(last_width_, ' ').c_str());
    }
  } else if (!final) {
    std::fprintf(options_.out, "%s\n", Line(done_, elapsed).c_str());
  }
  if (final) {
    if (total_ == 0 && done_ == 0) {
      std::fprintf(options_.out, "%s: done in %.1f s\n", label_.c_str(), elapsed);
    } else {
      std::fprintf(options_.out, "%s: %llu %s in %.1f s\n", label_.c_str(),
                   static_cast<unsigned long long>(done_), unit_.c_str(), elapsed);
    }
  }
  std::fflush(options_.out);
  last_draw_ = now;
}

void Progress::Update(uint64_t done) {
  std::lock_guard<std::mutex> g(mu_);
  done_ = done;
  if (!options_.enabled || finished_) return;
  const auto gap = std::chrono::steady_clock::now() - last_draw_;
  if (gap >= (tty_ ? std::chrono::milliseconds(100) : options_.interval)) DrawLocked(false);
}

void Progress::Finish() {
  std::lock_guard<std::mutex> g(mu_);
  if (finished_) return;
  finished_ = true;
  if (options_.enabled) DrawLocked(true);
}

void Progress::StartTicker() {
  if (!options_.enabled) return;
  {
    std::lock_guard<std::mutex> g(mu_);
    std::fprintf(options_.out, "%s: started\n", label_.c_str());
    std::fflush(options_.out);
  }
  ticker_ = std::thread([this] {
    std::unique_lock<std::mutex> g(mu_);
    const auto step = tty_ ? std::chrono::milliseconds(500) : options_.interval;
    while (!ticker_cv_.wait_for(g, step, [this] { return stop_ticker_; })) DrawLocked(false);
  });
}

void Progress::StopTicker() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ticker_ = true;
  }
  ticker_cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

}  // namespace ember::tools
