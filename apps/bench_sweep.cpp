// qkv bench --attention-sweep [--max-n N] [--json] [--figure PATH] [--threads T]
//
// The complexity sweep: forward + backward of one self-attention core (random q, k, v of
// batch 1, 8 heads of 64 = d_model 512) against n = 256, 512, ..., max_n, for
//   dense          the reference path that forms the (n, n) weights
//   tiled          the fused exact kernel (core/attention.cpp)
//   window         sliding-window attention, w = 128 (core/local_attention.cpp)
//   linear         linear attention, non-causal (core/linear_attention.cpp)
//   linear-causal  linear attention, causal (prefix sums)
// Each point runs in a fresh child process (this binary, --sweep-method/--sweep-n), so its
// peak resident memory (VmHWM) is its own. Prints a table (or --json) and writes a log-log
// SVG of time and memory against n.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/commands.hpp"
#include "bench/bench_util.hpp"
#include "core/atomic_file.hpp"
#include "core/parallel.hpp"
#include "core/random.hpp"
#include "figures/plot.hpp"
#include "nn/attention.hpp"

namespace qkv::app {
namespace {

using namespace bench;
using nlohmann::json;
using namespace figures;

constexpr int64_t kHeads = 8, kHeadDim = 64, kWindow = 128;
const std::vector<std::string> kMethods = {"dense", "tiled", "window", "linear", "linear-causal"};

ag::Var attend(const std::string& method, const ag::Var& q, const ag::Var& k, const ag::Var& v) {
  const double s = nn::AttentionScale().resolve(kHeadDim);  // the default, 1 / sqrt(d_k)
  if (method == "dense") {
    ag::Var w;  // asking for the weights takes the reference path
    return nn::scaled_dot_product_attention(q, k, v, Tensor(), s, &w);
  }
  if (method == "tiled") return ag::attention(q, k, v, Tensor(), s);
  if (method == "window") return ag::local_attention(q, k, v, Tensor(), s, kWindow, false);
  if (method == "linear") return nn::linear_attention(q, k, v, Tensor());
  if (method == "linear-causal") {
    // Features as nn::linear_attention makes them; a causal mask tensor would itself be n x n.
    auto phi = [](const ag::Var& x) { return ag::add(ag::elu(x), 1.0); };
    return ag::linear_attention(phi(q), phi(k), v, true);
  }
  throw Error("bench: unknown --sweep-method '" + method +
              "' (dense, tiled, window, linear, linear-causal)");
}

// The child: one (method, n) point, timed; one JSON line.
json sweep_point(const std::string& method, int64_t n, double min_seconds) {
  const double base_mb = proc_status_mb("VmRSS");
  Generator gen(1);
  const Shape s{1, kHeads, n, kHeadDim};
  const Tensor q = randn(s, gen), k = randn(s, gen), v = randn(s, gen), go = randn(s, gen);
  auto step = [&] {
    const ag::Var vq(q, true), vk(k, true), vv(v, true);
    attend(method, vq, vk, vv).backward(go);
  };
  allocator_reset_peak();
  const std::vector<double> ms = time_steps(step, 1, 3, min_seconds);
  json j;
  j["method"] = method;
  j["n"] = n;
  j["threads"] = get_num_threads();
  j["ms"] = median(ms);
  j["steps"] = ms.size();
  j["peak_rss_mb"] = proc_status_mb("VmHWM") - base_mb;
  j["peak_tensor_mb"] = double(allocator_stats().peak_live_bytes) / (1 << 20);
  return j;
}

// Two charts side by side in one SVG document.
std::string side_by_side(const std::string& a, const std::string& b, int w, int h) {
  std::string right = b;
  right.insert(right.find("<svg") + 4, " x='" + std::to_string(w) + "'");
  return "<svg xmlns='http://www.w3.org/2000/svg' width='" + std::to_string(2 * w) + "' height='" +
         std::to_string(h) + "'>\n" + a + right + "</svg>\n";
}

// Every (n, method) point, each in a fresh child process; a point that fails (e.g. out of
// memory) is kept with its error and the sweep goes on. A progress line per point on stderr
// unless --json.
json run_sweep_points(const BenchArgs& a, int threads) {
  const std::string self = shell_quote(self_exe());
  json points = json::array();
  for (int64_t n = 256; n <= a.max_n; n *= 2)
    for (const std::string& m : kMethods) {
      const std::string cmd = self + " bench --sweep-method " + m + " --sweep-n " +
                              std::to_string(n) + " --threads " + std::to_string(threads) +
                              " --min-seconds " + std::to_string(a.min_seconds);
      json p;
      try {
        p = run_child(cmd);
      } catch (const Error& e) {  // e.g. out of memory: the point is reported, the sweep goes on
        p = {{"method", m}, {"n", n}, {"error", std::string(e.what()).substr(0, 200)}};
      }
      if (!a.json) {
        if (p.contains("error"))
          std::fprintf(stderr, "n %lld %s: failed\n", static_cast<long long>(n), m.c_str());
        else
          std::fprintf(stderr, "n %lld %s: %.2f ms, %.0f MB\n", static_cast<long long>(n),
                       m.c_str(), p["ms"].get<double>(), p["peak_rss_mb"].get<double>());
      }
      points.push_back(p);
    }
  return points;
}

// --figure: time and peak memory against n, log-log, side by side (nothing when every point
// failed); its path goes into the result.
void write_sweep_figure(const BenchArgs& a, const json& points, json& result) {
  LineChart time{"forward + backward of one attention call (B 1, 8 heads x 64)",
                 "n (sequence length)",
                 "ms",
                 true,
                 true,
                 {}};
  LineChart mem{"peak resident memory of the process", "n (sequence length)", "MB", true, true, {}};
  for (const std::string& m : kMethods) {
    Series st{m, {}, {}, ""}, sm{m, {}, {}, ""};
    for (const json& p : points)
      if (p["method"] == m && !p.contains("error")) {
        st.x.push_back(p["n"].get<double>());
        st.y.push_back(p["ms"].get<double>());
        sm.x.push_back(p["n"].get<double>());
        sm.y.push_back(std::max(1.0, p["peak_rss_mb"].get<double>()));
      }
    if (!st.x.empty()) {
      time.series.push_back(st);
      mem.series.push_back(sm);
    }
  }
  if (!a.figure.empty() && !time.series.empty()) {
    const int w = 640, h = 420;
    atomic_write_file(a.figure, side_by_side(render_svg(time, w, h), render_svg(mem, w, h), w, h));
    result["figure"] = a.figure;
  }
}

// The sweep as a Markdown table: a row per n, each method's time then each method's memory.
void print_sweep_table(const BenchArgs& a, const json& points, int threads, double load_before) {
  std::printf("%s, %d threads; load %.2f -> %.2f; batch 1, 8 heads x 64, window %lld\n\n",
              cpu_model().c_str(), threads, load_before, load_average(),
              static_cast<long long>(kWindow));
  std::printf("| n |");
  for (const std::string& m : kMethods) std::printf(" %s ms |", m.c_str());
  for (const std::string& m : kMethods) std::printf(" %s MB |", m.c_str());
  std::printf("\n|---:|");
  for (size_t i = 0; i < 2 * kMethods.size(); ++i) std::printf("---:|");
  std::printf("\n");
  for (int64_t n = 256; n <= a.max_n; n *= 2) {
    std::printf("| %lld |", static_cast<long long>(n));
    for (const char* key : {"ms", "peak_rss_mb"})
      for (const std::string& m : kMethods)
        for (const json& p : points)
          if (p["method"] == m && p["n"] == n) {
            if (p.contains("error"))
              std::printf(" failed |");
            else
              std::printf(key[0] == 'm' ? " %.1f |" : " %.0f |", p[key].get<double>());
          }
    std::printf("\n");
  }
  if (!a.figure.empty()) std::printf("\nfigure: %s\n", a.figure.c_str());
}

}  // namespace

int cmd_attention_sweep(const BenchArgs& a) {
  set_num_threads(a.threads);
  if (!a.sweep_method.empty()) {
    QKV_CHECK(a.sweep_n > 0, "bench", "--sweep-n must be positive, got ", a.sweep_n);
    std::printf("%s\n", sweep_point(a.sweep_method, a.sweep_n, a.min_seconds).dump().c_str());
    return 0;
  }
  QKV_CHECK(a.max_n >= 256, "bench", "--max-n must be >= 256, got ", a.max_n);
  const int threads = get_num_threads();
  const double load_before = load_average();
  const json points = run_sweep_points(a, threads);
  json result;
  result["machine"] = {{"cpu", cpu_model()},
                       {"load_average_before", load_before},
                       {"load_average_after", load_average()}};
  result["threads"] = threads;
  result["shape"] = {{"batch", 1}, {"heads", kHeads}, {"d_head", kHeadDim}, {"window", kWindow}};
  result["points"] = points;
  write_sweep_figure(a, points, result);
  if (a.json) {
    std::printf("%s\n", result.dump(2).c_str());
    return 0;
  }
  print_sweep_table(a, points, threads, load_before);
  return 0;
}

}  // namespace qkv::app
