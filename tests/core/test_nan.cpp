// NaN is damage, not a mask: a NaN score propagates through every attention kernel and softmax
// (as in PyTorch) instead of being skipped by the row max and passing for a fully masked row;
// fully masked rows still give zeros.
#include <cmath>
#include <limits>

#include "core/attention_variants.hpp"
#include "core/fused.hpp"
#include "core/lanes.hpp"
#include "support/tensors.hpp"

using namespace qkv;

namespace {

bool all_nan(const Tensor& t) {
  for (double x : to_vector<double>(t.to(DType::f64).contiguous()))
    if (!std::isnan(x)) return false;
  return true;
}

// q: (1, 1, n, 4) with query row `bad` all NaN (every one of its scores is NaN); keys: m.
struct Case {
  Tensor q, k, v, valid;
};
Case make_case(int64_t n, int64_t m, int64_t bad, DType dt) {
  Generator g(3);
  Case c{randn({1, 1, n, 4}, g, dt), randn({1, 1, m, 4}, g, dt), randn({1, 1, m, 4}, g, dt),
         ones({1, 1, n, m}, DType::b8)};
  c.q.select(2, bad).fill_(std::numeric_limits<double>::quiet_NaN());
  c.valid.select(2, 0).zero_();  // row 0: fully masked
  return c;
}

}  // namespace

TEST_CASE("fast_exp: NaN in, NaN out, and -inf still 0") {
  CHECK(std::isnan(kernel::fast_exp<float>(std::numeric_limits<float>::quiet_NaN())));
  CHECK(kernel::fast_exp<float>(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(kernel::fast_exp<float>(0.0f) == 1.0f);
}

TEST_CASE("tiled attention: a NaN row is NaN, a fully masked row stays zero", "[unit]") {
  for (DType dt : {DType::f32, DType::f64})
    for (int64_t m : {9, 300}) {  // one key tile and several (a NaN tile after a finite one)
      INFO(dtype_name(dt) << " m " << m);
      const Case c = make_case(5, m, 2, dt);
      const AttentionResult f = attention_forward(c.q, c.k, c.v, c.valid, 0.5);
      CHECK(all_nan(f.out.select(2, 2)));
      CHECK(all_nan(f.lse.select(2, 2)));
      CHECK(max_abs_diff(f.out.select(2, 0), zeros({1, 1, 4}).to(dt)) == 0);  // masked: zeros
      CHECK(all_finite(f.out.select(2, 1)));
      // the gradient of a NaN row is NaN too; the masked row's stays zero
      const AttentionGrads d =
          attention_backward(c.q, c.k, c.v, c.valid, 0.5, f.out, f.lse, ones({1, 1, 5, 4}, dt));
      CHECK(all_nan(d.dq.select(2, 2)));
      CHECK(max_abs_diff(d.dq.select(2, 0), zeros({1, 1, 4}).to(dt)) == 0);
    }
  // Only some scores NaN (one key's vector): every row that attends to it is NaN.
  Case c = make_case(3, 9, 1, DType::f32);
  Generator g(5);
  c.q = randn({1, 1, 3, 4}, g);
  c.k.select(2, 4).fill_(std::numeric_limits<double>::quiet_NaN());
  const AttentionResult f = attention_forward(c.q, c.k, c.v, c.valid, 0.5);
  CHECK(all_nan(f.out.select(2, 1)));
  CHECK(max_abs_diff(f.out.select(2, 0), zeros({1, 1, 4})) == 0);
}

TEST_CASE("sliding-window attention: a NaN row is NaN, a fully masked row stays zero", "[unit]") {
  const Case c = make_case(6, 6, 3, DType::f32);
  const AttentionResult f = local_attention_forward(c.q, c.k, c.v, c.valid, 0.5, 2, false);
  CHECK(all_nan(f.out.select(2, 3)));
  CHECK(max_abs_diff(f.out.select(2, 0), zeros({1, 1, 4})) == 0);
  CHECK(all_finite(f.out.select(2, 1)));
}

TEST_CASE("softmax: an all-NaN row is NaN, an all -inf row is zero", "[unit]") {
  Tensor x = zeros({3, 4});
  x.select(0, 1).fill_(std::numeric_limits<double>::quiet_NaN());
  x.select(0, 2).fill_(-std::numeric_limits<double>::infinity());
  const Tensor p = softmax(x, 1);
  CHECK(all_nan(p.select(0, 1)));
  CHECK(max_abs_diff(p.select(0, 2), zeros({4})) == 0);
  CHECK(all_nan(log_softmax(x, 1).select(0, 1)));
}
