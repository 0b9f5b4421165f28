// What qkv bench's parts share (bench.cpp, bench_sweep.cpp): child processes that report one
// JSON line, their peak memory, and step timing.
#pragma once
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace qkv::bench {

using Clock = std::chrono::steady_clock;

// MB from a /proc/self/status line such as "VmHWM:   12345 kB" (0 when absent).
double proc_status_mb(const char* key);
double median(std::vector<double> v);
long minor_page_faults();  // this process's so far (getrusage)

// Times step() after warm-up: at least min_steps timings and min_seconds of them (at most 200).
// agree(more) turns this process's wish to time another step into the decision: under mpirun,
// rank 0's (every rank must run the same steps, each has collectives); alone, its own.
inline bool decide_alone(bool more) { return more; }
template <class F, class Agree = bool (*)(bool)>
std::vector<double> time_steps(F&& step, int warmup, int min_steps, double min_seconds,
                               Agree&& agree = decide_alone) {
  for (int i = 0; i < warmup; ++i) step();
  std::vector<double> ms;
  const auto start = Clock::now();
  auto more = [&] {
    const bool m = static_cast<int>(ms.size()) < min_steps ||
                   (std::chrono::duration<double>(Clock::now() - start).count() < min_seconds &&
                    ms.size() < 200);
    return agree(m);
  };
  while (more()) {
    const auto t0 = Clock::now();
    step();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return ms;
}

std::string shell_quote(const std::string& s);
// Runs cmd, returns the last line of its stdout that starts with '{', parsed as JSON; throws
// qkv::Error with the output when the command fails.
nlohmann::json run_child(const std::string& cmd);
std::string self_exe();  // this executable's path
std::string cpu_model();
double load_average();  // 1-minute load

}  // namespace qkv::bench
