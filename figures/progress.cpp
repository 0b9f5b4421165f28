#include "figures/progress.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>

namespace qkv::figures {

std::string format_duration(double s) {
  if (!(s >= 0) || s > 1e7) return "?";
  const long t = static_cast<long>(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}

Progress::Progress(int64_t total, int64_t first, int64_t log_every, bool quiet, bool verbose)
    : total_(total),
      first_(first),
      log_every_(log_every),
      quiet_(quiet),
      verbose_(verbose),
      tty_(::isatty(STDERR_FILENO) && !verbose),
      start_(std::chrono::steady_clock::now()) {}

void Progress::clear_bar() {
  if (bar_shown_) {
    std::fprintf(stderr, "\r\033[K");
    bar_shown_ = false;
  }
}

void Progress::update(int64_t step, double loss, double lr, double tps) {
  if (quiet_) return;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(step - first_) / elapsed : 0;
  const double eta = rate > 0 ? static_cast<double>(total_ - step) / rate : -1;
  if (tps > 0) last_tps_ = tps;
  char throughput[32] = "-";
  if (last_tps_ > 0) std::snprintf(throughput, sizeof throughput, "%.1fk", last_tps_ / 1000);
  char stats[160];
  std::snprintf(stats, sizeof stats, "loss %.4f  lr %.2e  %s tok/s  ETA %s", loss, lr, throughput,
                format_duration(eta).c_str());
  if (tty_) {
    const int width = 24;
    const int filled = total_ > 0 ? static_cast<int>(width * step / total_) : 0;
    std::string bar(width, ' ');
    for (int i = 0; i < filled && i < width; ++i) bar[i] = '=';
    if (filled < width) bar[filled] = '>';
    std::fprintf(stderr, "\r\033[K[%s] %lld/%lld  %s", bar.c_str(), static_cast<long long>(step),
                 static_cast<long long>(total_), stats);
    std::fflush(stderr);
    bar_shown_ = true;
  } else if (verbose_ || step % log_every_ == 0 || step == total_) {
    spdlog::info("step {}/{}  {}", step, total_, stats);
  }
}

void Progress::message(const std::string& line) {
  if (quiet_) return;
  clear_bar();
  spdlog::info("{}", line);
}

void Progress::finish() { clear_bar(); }

}  // namespace qkv::figures
