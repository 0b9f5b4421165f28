// Activations, softmax and dropout, each with its derivative.
#include "autograd/ops.hpp"
#include "core/fused.hpp"

namespace qkv::ag {

Var relu(const Var& x) {
  Tensor y = qkv::relu(x.data());
  return record("relu", y, {x}, [y](const Tensor& g) -> std::vector<Tensor> {
    // 1 where x > 0 (exactly where y > 0), else 0 (0 at 0, as torch). Keeping y, not x,
    // lets x be freed: the next layer keeps y anyway.
    return {relu_backward(y, g)};
  });
}

Var relu_squared(const Var& x) {
  // Nothing to record: y alone, r is not written.
  if (!will_record({x}))
    return record("relu_squared", relu_squared_forward(x.data(), false).y, {x}, {});
  ReluSquaredResult f = relu_squared_forward(x.data());
  // Keeps r = relu(x), not x: the gradient needs only r, and x can be freed.
  return record("relu_squared", f.y, {x}, [r = f.r](const Tensor& g) -> std::vector<Tensor> {
    return {relu_squared_backward(g, r)};
  });
}

Var gelu(const Var& x) {
  // Nothing to record (inference, eval, generation): the plain kernel, without writing Phi.
  // record still runs anomaly mode's check; it keeps no backward when nothing needs one.
  if (!will_record({x})) return record("gelu", qkv::gelu(x.data()), {x}, {});
  GeluResult f = gelu_forward(x.data());
  return record("gelu", f.y, {x},
                [x_ = x.data(), cdf = f.cdf](const Tensor& g) -> std::vector<Tensor> {
                  return {gelu_backward(g, x_, cdf)};
                });
}

Var tanh(const Var& x) {
  Tensor y = qkv::tanh(x.data());
  return record("tanh", y, {x}, [y](const Tensor& g) -> std::vector<Tensor> {
    return {qkv::mul(g, qkv::rsub(1.0, qkv::mul(y, y)))};  // 1 - tanh^2
  });
}

Var sigmoid(const Var& x) {
  Tensor y = qkv::sigmoid(x.data());
  return record("sigmoid", y, {x}, [y](const Tensor& g) -> std::vector<Tensor> {
    return {qkv::mul(g, qkv::mul(y, qkv::rsub(1.0, y)))};  // s (1 - s)
  });
}

Var elu(const Var& x, double alpha) {
  const Tensor pos = gt(x.data(), 0.0);
  const Tensor em1 = qkv::mul(qkv::sub(qkv::exp(x.data()), 1.0), alpha);  // alpha (e^x - 1)
  return record("elu", qkv::where(pos, x.data(), em1), {x},
                [pos, em1, alpha](const Tensor& g) -> std::vector<Tensor> {
                  // 1 for x > 0, alpha e^x = em1 + alpha otherwise
                  return {qkv::mul(g, qkv::where(pos, ones({}, g.dtype()), qkv::add(em1, alpha)))};
                });
}

Var softmax(const Var& x, int64_t d) {
  Tensor y = qkv::softmax(x.data(), d);
  return record("softmax", y, {x}, [y, d](const Tensor& g) -> std::vector<Tensor> {
    return {softmax_backward(y, g, d)};  // y * (g - sum(g y))
  });
}

Var log_softmax(const Var& x, int64_t d) {
  Tensor y = qkv::log_softmax(x.data(), d);
  return record("log_softmax", y, {x}, [y, d](const Tensor& g) -> std::vector<Tensor> {
    return {log_softmax_backward(y, g, d)};  // g - softmax * sum(g)
  });
}

Var dropout(const Var& x, double p, Generator& gen) {
  QKV_CHECK(p >= 0 && p < 1, "dropout", "p must be in [0, 1), got ", p);
  if (p == 0) return x;
  // The kept elements, as bytes: forward and backward scale the same ones by 1/(1-p).
  DropoutResult d = dropout_forward(x.data(), p, gen);
  return record("dropout", std::move(d.y), {x},
                [keep = std::move(d.keep), p](const Tensor& g) -> std::vector<Tensor> {
                  return {dropout_backward(g, keep, p)};
                });
}

}  // namespace qkv::ag
