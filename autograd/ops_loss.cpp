// Losses. cross_entropy is one op on the tape, log-softmax and NLL fused (the kernels:
// core/cross_entropy.cpp); its backward is softmax minus the (smoothed) target distribution.
#include "autograd/ops.hpp"
#include "core/fused.hpp"

namespace qkv::ag {

Var cross_entropy(const Var& logits, const Tensor& targets, int64_t ignore_index,
                  double label_smoothing) {
  CrossEntropyResult f =
      cross_entropy_forward(logits.data(), targets, ignore_index, label_smoothing);
  const Tensor loss = scalar(f.loss, logits.dtype());
  return record("cross_entropy", loss, {logits},
                [f = std::move(f)](const Tensor& g) -> std::vector<Tensor> {
                  return {cross_entropy_backward(f, g.item())};
                });
}

Var mse_loss(const Var& x, const Var& y) {
  const Var d = sub(x, y);
  return mean(mul(d, d));
}

}  // namespace qkv::ag
