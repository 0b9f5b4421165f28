// A linear layer and its activation in one product: the activation and the rounding of its
// output to bfloat16 in the product's epilogue (core/fused.hpp).
#include "bf16_cache.hpp"
#include "fused.hpp"
#include "gemm_stats.hpp"
#include "lanes.hpp"
#include "onednn.hpp"
#include "parallel.hpp"
#include "precision.hpp"
#include "tensor.hpp"

namespace qkv {
namespace {

// Whether this layer runs fused: float32 operands of a bf16 product (core/precision.hpp).
bool fused_here(const Tensor& x, const Tensor& w) {
  return x.dtype() == DType::f32 && w.dtype() == DType::f32 && x.dim() == 2 && w.dim() == 2 &&
         x.size(1) == w.size(1) && x.size(0) > 0 && x.size(1) > 0 &&
         current_precision() == Precision::bf16;
}

// ReLU in place on columns c0..c1 of a row of the product, with relu's expression, then those
// values rounded into copy when there is one. One pointer: the loop vectorizes.
void relu_row(float* c, bf16_t* copy, int64_t c0, int64_t c1) {
  for (int64_t j = c0; j < c1; ++j) c[j] = c[j] < 0.0f ? 0.0f : c[j];
  if (copy) to_bf16(c + c0, copy + c0, c1 - c0);
}

// GELU of columns c0..c1 of a row of the product, with gelu_forward's expressions, then y
// rounded into copy when there is one.
void gelu_row(const float* __restrict pre, float* __restrict y, float* __restrict cdf, bf16_t* copy,
              int64_t c0, int64_t c1) {
  for (int64_t j = c0; j < c1; ++j) {
    const float p = kernel::normal_cdf(pre[j]);
    cdf[j] = p;
    y[j] = pre[j] * p;
  }
  if (copy) to_bf16(y + c0, copy + c0, c1 - c0);
}

// Elements i0..i1 of dL/dpre from g and the saved ReLU output or GELU input s (and Phi, cdf),
// with relu_backward's and gelu_backward's expressions, then rounded into copy (which starts at
// element i0) when there is one. Restrict parameters, not a lambda's captures: the loops
// vectorize.
void activation_grad(LinearAct act, const float* __restrict g, const float* __restrict s,
                     const float* __restrict cdf, float* __restrict d, bf16_t* copy, int64_t i0,
                     int64_t i1) {
  if (act == LinearAct::relu)
    for (int64_t i = i0; i < i1; ++i) d[i] = s[i] > 0.0f ? g[i] : 0.0f;
  else
    for (int64_t i = i0; i < i1; ++i)
      d[i] = g[i] * kernel::mul_add(s[i], kernel::normal_pdf(s[i]), cdf[i]);
  if (copy) to_bf16(d + i0, copy, i1 - i0);
}

}  // namespace

LinearActResult linear_act_forward(const Tensor& x_in, const Tensor& w_in, const Tensor& b,
                                   LinearAct act) {
  if (!fused_here(x_in, w_in)) {  // the composed ops, with their bits
    const Tensor pre = linear_forward(x_in, w_in, b);
    if (act == LinearAct::relu) return {relu(pre), Tensor(), Tensor()};
    GeluResult g = gelu_forward(pre);
    return {g.y, pre, g.cdf};
  }
  const Tensor x = x_in.contiguous(), w = w_in.contiguous();
  const int64_t n = x.size(0), in = x.size(1), out = w.size(0);
  QKV_CHECK(!b.defined() || (b.shape() == Shape{out} && b.dtype() == x.dtype()), "linear_act",
            "bias ", b.shape(), " for weight ", w.shape());
  const Tensor bc = b.defined() ? b.contiguous() : Tensor();
  LinearActResult r;
  Tensor c = empty({n, out}, DType::f32);  // the product; ReLU overwrites it with y
  r.y = act == LinearAct::relu ? c : empty({n, out}, DType::f32);
  if (act == LinearAct::gelu) r.pre = c, r.cdf = empty({n, out}, DType::f32);
  // x (N, in) as is, w (out, in) read transposed: as linear_forward reads them, so both share
  // the scope's copies of x and w
  const bf16_t* px = detail::bf16_activation(detail::StoredMatrix{x, n, in, in}, 0);
  const bf16_t* pw = detail::bf16_weight(detail::StoredMatrix{w, out, in, in});
  bf16_t* copy = detail::bf16_activation_slot(detail::StoredMatrix{r.y, n, out, out});
  float* pc = c.data<float>();
  float* py = r.y.data<float>();
  float* pcdf = r.cdf.defined() ? r.cdf.data<float>() : nullptr;
  const kernel::GemmEpilogue epilogue = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    for (int64_t i = r0; i < r1; ++i) {
      bf16_t* row_copy = copy ? copy + i * out : nullptr;
      if (act == LinearAct::relu)
        relu_row(pc + i * out, row_copy, c0, c1);
      else
        gelu_row(pc + i * out, py + i * out, pcdf + i * out, row_copy, c0, c1);
    }
  };
  // (--gemm-shapes times the epilogue with the product: it runs inside the product's bands)
  detail::timed_products(
      n, out, in, false, true, 1,
      [&] {
        kernel::gemm_bf16(false, true, n, out, in, px, in, pw, in, pc, out,
                          bc.defined() ? bc.data<float>() : nullptr, epilogue);
      },
      true);
  return r;
}

Tensor linear_act_backward(const Tensor& g_in, const LinearActResult& f, LinearAct act) {
  // what the backward reads: ReLU's output y, or GELU's input pre (and Phi)
  const Tensor& y = act == LinearAct::relu ? f.y : f.pre;
  if (current_precision() != Precision::bf16 || y.dtype() != DType::f32 || y.dim() != 2 ||
      y.numel() == 0)
    return act == LinearAct::relu ? relu_backward(y, g_in) : gelu_backward(g_in, f.pre, f.cdf);
  QKV_CHECK(g_in.shape() == y.shape() && g_in.dtype() == y.dtype(), "linear_act_backward",
            "gradient ", g_in.shape(), " for output ", y.shape());
  const Tensor g = g_in.contiguous();
  const int64_t n = y.size(0), out = y.size(1);
  Tensor d = empty({n, out}, DType::f32);
  bf16_t* copy = detail::bf16_activation_slot(detail::StoredMatrix{d, n, out, out});
  const float* pc = act == LinearAct::gelu ? f.cdf.data<float>() : nullptr;
  parallel_for(n, 8 * out, [&](int64_t r0, int64_t r1) {
    activation_grad(act, g.data<float>(), y.data<float>(), pc, d.data<float>(),
                    copy ? copy + r0 * out : nullptr, r0 * out, r1 * out);
  });
  return d;
}

}  // namespace qkv
