#include "parallel.hpp"

#include <cblas.h>
#include <omp.h>

#include <chrono>
#include <mutex>

namespace qkv {

void set_num_threads(int n) {
  if (n <= 0) n = omp_get_num_procs();
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

void set_thread_team(int n) { omp_set_num_threads(n <= 0 ? omp_get_num_procs() : n); }

int get_num_threads() { return omp_get_max_threads(); }

bool in_parallel_region() { return omp_in_parallel(); }

namespace {
std::mutex g_stats_mu;
ParallelStats g_stats;
}  // namespace

std::atomic<bool> detail::g_parallel_stats_on{false};

void parallel_stats_enable(bool on) {
  std::lock_guard<std::mutex> lock(g_stats_mu);
  g_stats = ParallelStats{};
  detail::g_parallel_stats_on.store(on, std::memory_order_relaxed);
}

ParallelStats parallel_stats() {
  std::lock_guard<std::mutex> lock(g_stats_mu);
  return g_stats;
}

void detail::parallel_stats_record(double seconds, const double* busy) {
  std::lock_guard<std::mutex> lock(g_stats_mu);
  ++g_stats.regions;
  g_stats.seconds += seconds;
  g_stats.busy_seconds[0] += busy[0];
  g_stats.busy_seconds[1] += busy[1];
}

double detail::wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace qkv
