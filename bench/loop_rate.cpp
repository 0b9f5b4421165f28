#include "bench/loop_rate.hpp"

#include <vector>

#include "bench/bench_util.hpp"
#include "core/bf16.hpp"
#include "core/onednn.hpp"
#include "core/random.hpp"
#include "core/tensor.hpp"

namespace qkv::bench {

namespace {

// The median call of product() in a loop, seconds.
template <class F>
double loop_seconds(F&& product, double min_seconds) {
  return median(time_steps(product, 2, 5, min_seconds)) / 1e3;
}

// A random stored matrix (rows, cols) rounded to bfloat16.
std::vector<bf16_t> bf16_matrix(int64_t rows, int64_t cols, Generator& g) {
  const Tensor t = uniform({rows, cols}, -1, 1, g);  // (randn costs seconds at 6000 x 2688)
  std::vector<bf16_t> out(size_t(rows * cols));
  to_bf16(t.data<float>(), out.data(), rows * cols);
  return out;
}

double bf16_seconds(const GemmShapeStats& s, double min_seconds, Generator& g) {
  // a stored (n, k), or (k, n) read transposed; b stored (k, m), or (m, k) read transposed
  const std::vector<bf16_t> a = bf16_matrix(s.n * s.batch, s.k, g);
  const std::vector<bf16_t> b = bf16_matrix(s.k * s.batch, s.m, g);
  std::vector<float> c(size_t(s.n * s.m * s.batch));
  const int64_t lda = s.trans_a ? s.n : s.k, ldb = s.trans_b ? s.k : s.m;
  const double call = loop_seconds(
      [&] {
        for (int64_t i = 0; i < s.batch; ++i)
          kernel::gemm_bf16(s.trans_a, s.trans_b, s.n, s.m, s.k, a.data() + i * s.n * s.k, lda,
                            b.data() + i * s.k * s.m, ldb, c.data() + i * s.n * s.m, s.m, nullptr);
      },
      min_seconds);
  return call / double(s.batch);
}

// A (batch, rows, cols) operand, or (rows, cols) for one matrix; stored transposed when trans.
Tensor f32_operand(int64_t batch, int64_t rows, int64_t cols, bool trans, Generator& g) {
  Shape stored = trans ? Shape{cols, rows} : Shape{rows, cols};
  if (batch > 1) stored.insert(stored.begin(), batch);
  const Tensor t = uniform(stored, -1, 1, g);
  return trans ? t.transpose(-1, -2) : t;
}

}  // namespace

double seconds_per_product(const GemmShapeStats& s, double min_seconds) {
  Generator g(0);
  if (s.bf16) return bf16_seconds(s, min_seconds, g);
  const Tensor a = f32_operand(s.batch, s.n, s.k, s.trans_a, g);
  const Tensor b = f32_operand(s.batch, s.k, s.m, s.trans_b, g);
  return loop_seconds([&] { (void)matmul(a, b); }, min_seconds) / double(s.batch);
}

GemmShapeStats shape_from_json(const nlohmann::json& e) {
  GemmShapeStats s;
  s.n = e.at("n").get<int64_t>(), s.m = e.at("m").get<int64_t>(), s.k = e.at("k").get<int64_t>();
  const std::string op = e.at("op").get<std::string>();
  s.trans_a = op.at(0) == 'T', s.trans_b = op.at(1) == 'T';
  s.bf16 = e.at("backend").get<std::string>() == "oneDNN bf16";
  s.batch = e.value("batch", int64_t{1});
  return s;
}

double add_loop_rates(nlohmann::json& shapes,
                      const std::function<double(const GemmShapeStats&)>& seconds_per_call) {
  double total_ms = 0;
  for (nlohmann::json& e : shapes) {
    const GemmShapeStats s = shape_from_json(e);
    const double seconds = seconds_per_call(s);
    const double calls = e.at("calls_per_step").get<double>();
    const double ms = 1e3 * seconds * calls;
    e["loop_ms_per_step"] = ms;
    e["loop_gflops"] =
        seconds > 0 ? 2.0 * double(s.n) * double(s.m) * double(s.k) / seconds / 1e9 : 0.0;
    total_ms += ms;
  }
  return total_ms;
}

}  // namespace qkv::bench
