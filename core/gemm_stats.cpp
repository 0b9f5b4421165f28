#include "gemm_stats.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <tuple>

namespace qkv {
namespace {

using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, bool, int64_t>;

struct Registry {
  std::atomic<bool> on{false};
  std::mutex mu;
  std::map<Key, GemmShapeStats> shapes;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void gemm_stats_enable(bool on) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.shapes.clear();
  r.on.store(on, std::memory_order_relaxed);
}

bool gemm_stats_enabled() { return registry().on.load(std::memory_order_relaxed); }

std::vector<GemmShapeStats> gemm_stats() {
  Registry& r = registry();
  std::vector<GemmShapeStats> out;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    for (const auto& [key, s] : r.shapes) out.push_back(s);
  }
  std::stable_sort(out.begin(), out.end(), [](const GemmShapeStats& a, const GemmShapeStats& b) {
    return a.seconds > b.seconds;
  });
  return out;
}

void detail::gemm_stats_record(int64_t n, int64_t m, int64_t k, bool ta, bool tb, double seconds,
                               int64_t calls, bool bf16) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  GemmShapeStats& s = r.shapes[Key{n, m, k, ta, tb, bf16, calls}];
  s.n = n, s.m = m, s.k = k, s.trans_a = ta, s.trans_b = tb, s.bf16 = bf16, s.batch = calls;
  s.calls += calls;
  s.seconds += seconds;
}

}  // namespace qkv
