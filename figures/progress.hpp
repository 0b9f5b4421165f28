// Training progress: a bar redrawn in place on a terminal, plain log lines otherwise.
//
//   [=========>          ] 1200/2400  loss 0.4312  lr 8.1e-04  21.3k tok/s  ETA 0:42
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace qkv::figures {

class Progress {
 public:
  // total: steps planned; quiet: only warnings and errors; verbose: every step as a line.
  Progress(int64_t total, int64_t first_step, int64_t log_every, bool quiet, bool verbose);
  // tokens_per_s: the throughput measured since the last logged step, or 0 when this step was
  // not measured (it then shows the last measurement, or "-" before the first).
  void update(int64_t step, double loss, double lr, double tokens_per_s);
  // A line that must not be overwritten (validation results, checkpoints).
  void message(const std::string& line);
  void finish();

 private:
  void clear_bar();
  int64_t total_, first_, log_every_;
  bool quiet_, verbose_, tty_, bar_shown_ = false;
  double last_tps_ = 0;
  std::chrono::steady_clock::time_point start_;
};

std::string format_duration(double seconds);  // "1:05:09", "0:42"

}  // namespace qkv::figures
