// LayerNorm, fused: one op on the tape instead of a dozen small ones (the row kernels:
// core/layer_norm.cpp).
#include "autograd/ops.hpp"
#include "core/fused.hpp"

namespace qkv::ag {

Var layer_norm(const Var& x, const Var& gamma, const Var& beta, double eps) {
  const Tensor gam = gamma.defined() ? gamma.data() : Tensor();
  LayerNormResult f =
      layer_norm_forward(x.data(), gam, beta.defined() ? beta.data() : Tensor(), eps);
  std::vector<Var> inputs = {x};
  if (gamma.defined()) inputs.push_back(gamma);
  if (beta.defined()) inputs.push_back(beta);
  const int64_t rows = f.rstd.numel(), d = x.size(-1);
  return record("layer_norm", f.y, inputs,
                [xhat = f.xhat, rstd = f.rstd, gam, has_b = beta.defined(), rows,
                 d](const Tensor& g_in) -> std::vector<Tensor> {
                  const Tensor g = g_in.contiguous();
                  std::vector<Tensor> grads = {layer_norm_backward(g, gam, xhat, rstd)};
                  const Tensor g2 = g.reshape({rows, d});
                  if (gam.defined()) grads.push_back(sum_rows_product(g2, xhat.reshape({rows, d})));
                  if (has_b) grads.push_back(sum_rows(g2));
                  return grads;
                });
}

// Fused as LayerNorm: the blocks' alternative norm and QK-norm's, on every q and k.
Var rms_norm(const Var& x, const Var& gamma, double eps) {
  QKV_CHECK(x.dim() >= 1 && (!gamma.defined() || (gamma.dim() == 1 && gamma.size(0) == x.size(-1))),
            "rms_norm", "x ", x.shape(), " and gamma ", gamma.defined() ? gamma.shape() : Shape{},
            " do not fit (x: (..., d), gamma: (d))");
  const Tensor gam = gamma.defined() ? gamma.data() : Tensor();
  LayerNormResult f = rms_norm_forward(x.data(), gam, eps);
  std::vector<Var> inputs = {x};
  if (gamma.defined()) inputs.push_back(gamma);
  const int64_t rows = f.rstd.numel(), d = x.size(-1);
  return record(
      "rms_norm", f.y, inputs,
      [xhat = f.xhat, rstd = f.rstd, gam, rows, d](const Tensor& g_in) -> std::vector<Tensor> {
        const Tensor g = g_in.contiguous();
        std::vector<Tensor> grads = {rms_norm_backward(g, gam, xhat, rstd)};
        if (gam.defined())
          grads.push_back(sum_rows_product(g.reshape({rows, d}), xhat.reshape({rows, d})));
        return grads;
      });
}

}  // namespace qkv::ag
