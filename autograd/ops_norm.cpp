// LayerNorm and RMSNorm, fused: one op on the tape each instead of a dozen small ones (the
// row kernels: core/layer_norm.cpp).
#include "autograd/ops.hpp"
#include "core/fused.hpp"

namespace qkv::ag {
namespace {

// The normalization's dx kernel: layer_norm_backward or rms_norm_backward (core/fused.hpp).
using NormDx = Tensor (*)(const Tensor& g, const Tensor& gamma, const Tensor& xhat,
                          const Tensor& rstd);

// Records a norm computed as f from xs (x, or x and a of add_norm: each receives dx), gamma (or
// undefined) and beta (or undefined): dx by norm_dx, gamma's gradient sum_rows_product(g, xhat),
// beta's sum_rows(g), on (rows, d) views.
Var record_norm(const char* op, const LayerNormResult& f, std::vector<Var> xs, const Var& gamma,
                const Var& beta, NormDx norm_dx) {
  const int64_t rows = f.rstd.numel(), d = xs[0].size(-1), n_xs = xs.size();
  std::vector<Var> inputs = std::move(xs);
  if (gamma.defined()) inputs.push_back(gamma);
  if (beta.defined()) inputs.push_back(beta);
  const Tensor gam = gamma.defined() ? gamma.data() : Tensor();
  return record(op, f.y, inputs,
                [xhat = f.xhat, rstd = f.rstd, gam, has_b = beta.defined(), rows, d, n_xs,
                 norm_dx](const Tensor& g_in) -> std::vector<Tensor> {
                  const Tensor g = g_in.contiguous();
                  std::vector<Tensor> grads(n_xs, norm_dx(g, gam, xhat, rstd));
                  const Tensor g2 = g.reshape({rows, d});
                  if (gam.defined()) grads.push_back(sum_rows_product(g2, xhat.reshape({rows, d})));
                  if (has_b) grads.push_back(sum_rows(g2));
                  return grads;
                });
}

Tensor layer_norm_dx_rounded(const Tensor& g, const Tensor& gamma, const Tensor& xhat,
                             const Tensor& rstd) {
  return norm_backward_rounded(g, gamma, xhat, rstd, true);
}
Tensor rms_norm_dx_rounded(const Tensor& g, const Tensor& gamma, const Tensor& xhat,
                           const Tensor& rstd) {
  return norm_backward_rounded(g, gamma, xhat, rstd, false);
}

// add_layer_norm (centered) and add_rms_norm.
Var add_norm(const Var& x, const Var& a, const Var& gamma, const Var& beta, double eps,
             bool centered, Var* sum) {
  if (x.shape() != a.shape() || x.dtype() != a.dtype() || x.dim() == 0) {  // the composed ops
    const Var s = add(x, a);
    if (sum) *sum = s;
    return centered ? layer_norm(s, gamma, beta, eps) : rms_norm(s, gamma, eps);
  }
  const AddNormResult f =
      add_norm_forward(x.data(), a.data(), gamma.defined() ? gamma.data() : Tensor(),
                       beta.defined() ? beta.data() : Tensor(), eps, centered, sum != nullptr);
  if (sum) {  // the composed ops' tape: add, then the norm of its output
    *sum = record("add", f.sum, {x, a}, [](const Tensor& g) -> std::vector<Tensor> {
      return {g, g};
    });
    return record_norm(centered ? "layer_norm" : "rms_norm", f.norm, {*sum}, gamma, beta,
                       centered ? layer_norm_backward : rms_norm_backward);
  }
  // s reaches nothing but the norm: one op, and its dx flows on to a's product rounded
  return record_norm(centered ? "add_layer_norm" : "add_rms_norm", f.norm, {x, a}, gamma, beta,
                     centered ? layer_norm_dx_rounded : rms_norm_dx_rounded);
}

}  // namespace

Var layer_norm(const Var& x, const Var& gamma, const Var& beta, double eps) {
  const LayerNormResult f = layer_norm_forward(x.data(), gamma.defined() ? gamma.data() : Tensor(),
                                               beta.defined() ? beta.data() : Tensor(), eps);
  return record_norm("layer_norm", f, {x}, gamma, beta, layer_norm_backward);
}

// Fused as LayerNorm: the blocks' alternative norm and QK-norm's, on every q and k.
Var rms_norm(const Var& x, const Var& gamma, double eps) {
  QKV_CHECK(x.dim() >= 1 && (!gamma.defined() || (gamma.dim() == 1 && gamma.size(0) == x.size(-1))),
            "rms_norm", "x ", x.shape(), " and gamma ", gamma.defined() ? gamma.shape() : Shape{},
            " do not fit (x: (..., d), gamma: (d))");
  const LayerNormResult f =
      rms_norm_forward(x.data(), gamma.defined() ? gamma.data() : Tensor(), eps);
  return record_norm("rms_norm", f, {x}, gamma, Var(), rms_norm_backward);
}

}  // namespace qkv::ag

namespace qkv::ag {

Var add_layer_norm(const Var& x, const Var& a, const Var& gamma, const Var& beta, double eps,
                   Var* sum) {
  return add_norm(x, a, gamma, beta, eps, true, sum);
}

Var add_rms_norm(const Var& x, const Var& a, const Var& gamma, double eps, Var* sum) {
  QKV_CHECK(!gamma.defined() || (gamma.dim() == 1 && gamma.size(0) == x.size(-1)), "add_rms_norm",
            "x ", x.shape(), " and gamma ", gamma.shape(), " do not fit (x: (..., d), gamma: (d))");
  return add_norm(x, a, gamma, Var(), eps, false, sum);
}

}  // namespace qkv::ag
