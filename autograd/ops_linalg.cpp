// Matrix products. Gradients are products with transposed views, which BLAS reads as
// transposes without copying.
#include "autograd/ops.hpp"
#include "core/fused.hpp"

namespace qkv::ag {

Var matmul(const Var& a, const Var& b) {
  return record("matmul", qkv::matmul(a.data(), b.data()), {a, b},
                [a_ = a.data(), b_ = b.data(), ra = a.requires_grad(),
                 rb = b.requires_grad()](const Tensor& g) -> std::vector<Tensor> {
                  // C = A B: dA = dC B^T, dB = A^T dC (summed over broadcast batch dims)
                  return {ra ? sum_to(qkv::matmul(g, b_.t()), a_.shape()) : Tensor(),
                          rb ? sum_to(qkv::matmul(a_.t(), g), b_.shape()) : Tensor()};
                });
}

Var linear(const Var& x, const Var& w, const Var& b) {
  // x: (..., in) flattened to (N, in) so the whole batch is one GEMM against w^T: (in, out).
  const int64_t in = w.size(1), out_f = w.size(0);
  QKV_CHECK(w.dim() == 2 && x.size(-1) == in, "linear", "input ", x.shape(), " and weight ",
            w.shape(), " do not fit (weight is (out, in))");
  QKV_CHECK(!b.defined() || b.shape() == Shape{out_f}, "linear", "bias ", b.shape(), " for weight ",
            w.shape());
  Shape out_shape = x.shape();
  out_shape.back() = out_f;
  const Tensor x2 = x.data().reshape({-1, in});
  const Tensor y = linear_forward(x2, w.data(), b.defined() ? b.data() : Tensor());
  std::vector<Var> inputs = {x, w};
  if (b.defined()) inputs.push_back(b);
  return record("linear", y.reshape(out_shape), inputs,
                [x2, w_ = w.data(), xs = x.shape(), has_b = b.defined(), rx = x.requires_grad(),
                 rw = w.requires_grad()](const Tensor& g) -> std::vector<Tensor> {
                  const Tensor g2 = g.reshape({-1, g.size(-1)});  // (N, out)
                  std::vector<Tensor> grads = {
                      rx ? linear_input_grad(g2, w_).reshape(xs) : Tensor(),  // dx = g W
                      rw ? linear_weight_grad(g2, x2) : Tensor()};            // dW = g^T x
                  if (has_b) grads.push_back(sum_rows(g2));                   // db = sum_N g
                  return grads;
                });
}

Var linear_act(const Var& x, const Var& w, const Var& b, LinearAct act) {
  // as linear: x (..., in) flattened to (N, in), one product
  const int64_t in = w.size(1), out_f = w.size(0);
  QKV_CHECK(w.dim() == 2 && x.size(-1) == in, "linear_act", "input ", x.shape(), " and weight ",
            w.shape(), " do not fit (weight is (out, in))");
  QKV_CHECK(!b.defined() || b.shape() == Shape{out_f}, "linear_act", "bias ", b.shape(),
            " for weight ", w.shape());
  Shape out_shape = x.shape();
  out_shape.back() = out_f;
  const Tensor x2 = x.data().reshape({-1, in});
  std::vector<Var> inputs = {x, w};
  if (b.defined()) inputs.push_back(b);
  if (!will_record(inputs)) {  // nothing to record: y alone
    const Tensor y = linear_act_forward(x2, w.data(), b.defined() ? b.data() : Tensor(), act).y;
    return record("linear_act", y.reshape(out_shape), inputs, {});
  }
  const LinearActResult f =
      linear_act_forward(x2, w.data(), b.defined() ? b.data() : Tensor(), act);
  // what the backward reads: ReLU's output, or GELU's input and Phi
  const LinearActResult saved = act == LinearAct::relu ? LinearActResult{f.y, Tensor(), Tensor()}
                                                       : LinearActResult{Tensor(), f.pre, f.cdf};
  return record("linear_act", f.y.reshape(out_shape), inputs,
                [x2, w_ = w.data(), f = saved, act, xs = x.shape(), has_b = b.defined(),
                 rx = x.requires_grad(), rw = w.requires_grad()](const Tensor& g) {
                  // dL/dpre, then linear's three gradients from it
                  const Tensor d = linear_act_backward(g.reshape({-1, g.size(-1)}), f, act);
                  std::vector<Tensor> grads = {rx ? linear_input_grad(d, w_).reshape(xs) : Tensor(),
                                               rw ? linear_weight_grad(d, x2) : Tensor()};
                  if (has_b) grads.push_back(sum_rows(d));
                  return grads;
                });
}

}  // namespace qkv::ag
