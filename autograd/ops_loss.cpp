// Losses. cross_entropy is one op on the tape, log-softmax and NLL fused (the kernels:
// core/cross_entropy.cpp); its backward is softmax minus the (smoothed) target distribution.
// linear_cross_entropy is the output layer and the loss in one op in bf16
// (core/linear_cross_entropy.cpp), linear then cross_entropy otherwise.
#include "autograd/ops.hpp"
#include "core/fused.hpp"

namespace qkv::ag {
namespace {

// (..., C) -> (N, C), the rows cross_entropy takes
Var flatten_rows(const Var& logits) { return reshape(logits, {-1, logits.size(-1)}); }

}  // namespace

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

Var linear_cross_entropy(const Var& x, const Var& w, const Var& b, const Tensor& targets,
                         int64_t ignore_index, double label_smoothing) {
  const bool fused = current_precision() == Precision::bf16 && x.dtype() == DType::f32 &&
                     w.dtype() == DType::f32 && x.dim() >= 1;
  if (!fused)
    return cross_entropy(flatten_rows(linear(x, w, b)), targets, ignore_index, label_smoothing);
  const Tensor x2 = x.data().reshape({-1, x.size(-1)});
  std::vector<Var> inputs = {x, w};
  if (b.defined()) inputs.push_back(b);
  LinearCrossEntropyResult f =
      linear_cross_entropy_forward(x2, w.data(), b.defined() ? b.data() : Tensor(), targets,
                                   ignore_index, label_smoothing, will_record(inputs));
  const Tensor loss = scalar(f.loss, DType::f32);
  return record("linear_cross_entropy", loss, inputs,
                [f = std::move(f), xs = x.shape(), has_b = b.defined(), rx = x.requires_grad(),
                 rw = w.requires_grad(),
                 rb = b.defined() && b.requires_grad()](const Tensor& g) -> std::vector<Tensor> {
                  LinearCrossEntropyGrads d =
                      linear_cross_entropy_backward(f, g.item(), rx, rw, rb);
                  std::vector<Tensor> grads = {rx ? d.dx.reshape(xs) : Tensor(), d.dw};
                  if (has_b) grads.push_back(d.db);
                  return grads;
                });
}

Var mse_loss(const Var& x, const Var& y) {
  const Var d = sub(x, y);
  return mean(mul(d, d));
}

}  // namespace qkv::ag
