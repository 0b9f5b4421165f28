// LayerNorm and RMSNorm, fused: one op on the tape each instead of a dozen small ones (the
// row kernels: core/layer_norm.cpp).
#include "autograd/ops.hpp"
#include "core/fused.hpp"

namespace qkv::ag {
namespace {

// The normalization's dx kernel: layer_norm_backward or rms_norm_backward (core/fused.hpp).
using NormDx = Tensor (*)(const Tensor& g, const Tensor& gamma, const Tensor& xhat,
                          const Tensor& rstd);

// Records a norm computed as f from x, gamma (or undefined) and beta (or undefined): dx by
// norm_dx, gamma's gradient sum_rows_product(g, xhat), beta's sum_rows(g), on (rows, d) views.
Var record_norm(const char* op, const LayerNormResult& f, const Var& x, const Var& gamma,
                const Var& beta, NormDx norm_dx) {
  std::vector<Var> inputs = {x};
  if (gamma.defined()) inputs.push_back(gamma);
  if (beta.defined()) inputs.push_back(beta);
  const Tensor gam = gamma.defined() ? gamma.data() : Tensor();
  const int64_t rows = f.rstd.numel(), d = x.size(-1);
  return record(op, f.y, inputs,
                [xhat = f.xhat, rstd = f.rstd, gam, has_b = beta.defined(), rows, d,
                 norm_dx](const Tensor& g_in) -> std::vector<Tensor> {
                  const Tensor g = g_in.contiguous();
                  std::vector<Tensor> grads = {norm_dx(g, gam, xhat, rstd)};
                  const Tensor g2 = g.reshape({rows, d});
                  if (gam.defined()) grads.push_back(sum_rows_product(g2, xhat.reshape({rows, d})));
                  if (has_b) grads.push_back(sum_rows(g2));
                  return grads;
                });
}

}  // namespace

Var layer_norm(const Var& x, const Var& gamma, const Var& beta, double eps) {
  const LayerNormResult f = layer_norm_forward(x.data(), gamma.defined() ? gamma.data() : Tensor(),
                                               beta.defined() ? beta.data() : Tensor(), eps);
  return record_norm("layer_norm", f, x, gamma, beta, layer_norm_backward);
}

// Fused as LayerNorm: the blocks' alternative norm and QK-norm's, on every q and k.
Var rms_norm(const Var& x, const Var& gamma, double eps) {
  QKV_CHECK(x.dim() >= 1 && (!gamma.defined() || (gamma.dim() == 1 && gamma.size(0) == x.size(-1))),
            "rms_norm", "x ", x.shape(), " and gamma ", gamma.defined() ? gamma.shape() : Shape{},
            " do not fit (x: (..., d), gamma: (d))");
  const LayerNormResult f =
      rms_norm_forward(x.data(), gamma.defined() ? gamma.data() : Tensor(), eps);
  return record_norm("rms_norm", f, x, gamma, Var(), rms_norm_backward);
}

}  // namespace qkv::ag
