// Helpers shared by the fused attention kernels' tests (tests/core/test_attention_bf16.cpp,
// test_attention_onednn.cpp): random inputs, one forward + backward on a chosen backend and
// precision, masks from a predicate, the comparison of two runs part by part, bit for bit across
// thread counts, and fully masked rows.
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <utility>
#include <vector>

#include "core/attention_backend.hpp"
#include "core/fused.hpp"
#include "core/parallel.hpp"
#include "core/precision.hpp"
#include "core/random.hpp"
#include "support/common.hpp"
#include "support/tensors.hpp"

namespace qkv::testing {

struct AttentionInputs {
  Tensor q, k, v, dout;
};

// q: (B, H, n, dk), k: (B, H, m, dk), v: (B, H, m, dv), dout like the output
inline AttentionInputs attention_inputs(int64_t B, int64_t H, int64_t n, int64_t m, int64_t dk,
                                        int64_t dv, uint64_t seed) {
  Generator g(seed);
  return {randn({B, H, n, dk}, g), randn({B, H, m, dk}, g), randn({B, H, m, dv}, g),
          randn({B, H, n, dv}, g)};
}

struct AttentionRun {
  AttentionResult r;
  AttentionGrads g;
};

// Forward and backward at 1/sqrt(dk), in precision p on backend b (whatever
// QKV_ATTENTION_BACKEND or this CPU would choose).
inline AttentionRun attention_run(const AttentionInputs& x, const Tensor& mask, Precision p,
                                  AttentionBackend b) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(x.q.size(-1)));
  AttentionBackendScope backend(b);
  PrecisionScope scope(p);
  AttentionRun o;
  o.r = attention_forward(x.q, x.k, x.v, mask, scale);
  o.g = attention_backward(x.q, x.k, x.v, mask, scale, o.r.out, o.r.lse, x.dout, o.r.precision);
  return o;
}

inline std::vector<double> values_of(const Tensor& t) {
  const Tensor c = t.to(DType::f64).contiguous();
  return std::vector<double>(c.data<double>(), c.data<double>() + c.numel());
}

inline bool any_nan_in(const Tensor& t) {
  for (double x : values_of(t))
    if (std::isnan(x)) return true;
  return false;
}

// A bool mask of shape s from f(index): true = may attend.
template <class F>
Tensor mask_of(const Shape& s, F f) {
  return build(s, [&](const Shape& idx) { return f(idx) ? 1.0 : 0.0; }).to(DType::b8);
}

// Each of out, dq, dk, dv of run a within tol of run b, no NaN (and not bit-equal when differ:
// another kernel ran); lse -inf on the same (fully masked) rows, elsewhere to bf16 accuracy in
// the scores. Returns the largest relative error.
inline double check_close(const AttentionRun& a, const AttentionRun& b, double tol, bool differ) {
  double largest = 0;
  const std::pair<const char*, std::pair<Tensor, Tensor>> parts[] = {{"out", {a.r.out, b.r.out}},
                                                                     {"dq", {a.g.dq, b.g.dq}},
                                                                     {"dk", {a.g.dk, b.g.dk}},
                                                                     {"dv", {a.g.dv, b.g.dv}}};
  for (const auto& [name, t] : parts) {
    const double e = rel_err(t.first, t.second);
    INFO(name << " relative error " << e);
    CHECK(e < tol);
    if (differ) CHECK(e > 0);
    largest = std::max(largest, e);
    REQUIRE_FALSE(any_nan_in(t.first));
  }
  const std::vector<double> la = values_of(a.r.lse), lb = values_of(b.r.lse);
  double worst = 0;
  for (size_t i = 0; i < la.size(); ++i) {
    CHECK((la[i] == -INFINITY) == (lb[i] == -INFINITY));
    if (lb[i] != -INFINITY) worst = std::max(worst, std::abs(la[i] - lb[i]));
  }
  CHECK(worst < 0.05);
  return largest;
}

// Rows `rows` of every head fully masked in run r: out and dq 0 there, log-sum-exp -inf.
inline void check_dead_rows(const AttentionRun& r, std::initializer_list<int64_t> rows) {
  for (int64_t row : rows) {
    CHECK(max(abs(r.r.out.select(2, row))).item() == 0);
    CHECK(max(abs(r.g.dq.select(2, row))).item() == 0);
    for (double l : values_of(r.r.lse.select(2, row))) CHECK(l == -INFINITY);
  }
}

// Forward and backward in bf16 on backend b twice at 2 threads and once at 1: every part the
// same bits each time.
inline void check_same_bits_across_threads(const AttentionInputs& x, const Tensor& mask,
                                           AttentionBackend b) {
  const int saved = get_num_threads();
  set_num_threads(2);
  const AttentionRun a = attention_run(x, mask, Precision::bf16, b);
  const AttentionRun again = attention_run(x, mask, Precision::bf16, b);
  set_num_threads(1);
  const AttentionRun one = attention_run(x, mask, Precision::bf16, b);
  set_num_threads(saved);
  for (const AttentionRun* o : {&again, &one}) {
    CHECK(same_bits(o->r.out, a.r.out));
    CHECK(same_bits(o->r.lse, a.r.lse));
    CHECK(same_bits(o->g.dq, a.g.dq));
    CHECK(same_bits(o->g.dk, a.g.dk));
    CHECK(same_bits(o->g.dv, a.g.dv));
  }
}

}  // namespace qkv::testing
