#include "nn/layers.hpp"

#include "nn/hooks.hpp"

#include <cmath>

namespace qkv::nn {

Linear::Linear(int64_t in, int64_t out, Generator& gen, bool with_bias) {
  QKV_CHECK(in > 0 && out > 0, "Linear", "sizes must be positive, got in ", in, " out ", out);
  // Xavier/Glorot uniform: U(-a, a), a = sqrt(6 / (in + out)), keeps activation variance.
  const double a = std::sqrt(6.0 / static_cast<double>(in + out));
  weight = register_parameter("weight", uniform({out, in}, -a, a, gen));
  if (with_bias) bias = register_parameter("bias", zeros({out}));
}

Var Linear::forward(const Var& x) const { return ag::linear(x, weight, bias); }

Embedding::Embedding(int64_t vocab, int64_t dim, Generator& gen, bool scale)
    : scale_by_sqrt_dim(scale) {
  QKV_CHECK(vocab > 0 && dim > 0, "Embedding", "sizes must be positive, got vocab ", vocab, " dim ",
            dim);
  // N(0, 1) as torch.nn.Embedding; with sqrt(dim) scaling, N(0, 1/dim) instead (as fairseq), so
  // the scaled embedding has unit variance and does not drown the positional encoding.
  const double std = scale ? 1.0 / std::sqrt(static_cast<double>(dim)) : 1.0;
  weight = register_parameter("weight", mul(randn({vocab, dim}, gen), std));
}

Var Embedding::forward(const Tensor& ids) const {
  const Var e = ag::embedding(weight, ids);
  return scale_by_sqrt_dim ? ag::mul(e, std::sqrt(static_cast<double>(dim()))) : e;
}

LayerNorm::LayerNorm(int64_t d, double eps_) : eps(eps_) {
  QKV_CHECK(d > 0 && eps_ > 0, "LayerNorm", "needs d > 0 and eps > 0, got d ", d, " eps ", eps_);
  weight = register_parameter("weight", ones({d}));
  bias = register_parameter("bias", zeros({d}));
}

Var Norm::forward_add(const Var& x, const Var& a, Var* sum) const {
  const Var s = ag::add(x, a);
  if (sum) *sum = s;
  return forward(s);
}

Var LayerNorm::forward(const Var& x) const { return ag::layer_norm(x, weight, bias, eps); }

Var LayerNorm::forward_add(const Var& x, const Var& a, Var* sum) const {
  return ag::add_layer_norm(x, a, weight, bias, eps, sum);
}

RMSNorm::RMSNorm(int64_t d, double eps_) : eps(eps_) {
  QKV_CHECK(d > 0 && eps_ > 0, "RMSNorm", "needs d > 0 and eps > 0, got d ", d, " eps ", eps_);
  weight = register_parameter("weight", ones({d}));
}

Var RMSNorm::forward(const Var& x) const { return ag::rms_norm(x, weight, eps); }

Var RMSNorm::forward_add(const Var& x, const Var& a, Var* sum) const {
  return ag::add_rms_norm(x, a, weight, eps, sum);
}

std::shared_ptr<Norm> make_norm(NormKind kind, int64_t d, double eps) {
  switch (kind) {
    case NormKind::rmsnorm:
      return std::make_shared<RMSNorm>(d, eps);
    case NormKind::layernorm:
      break;
  }
  return std::make_shared<LayerNorm>(d, eps);
}

Var soft_cap(const Var& logits, double cap) {
  if (cap == 0) return logits;
  QKV_CHECK(cap > 0, "soft_cap", "cap must be >= 0 (0: off), got ", cap);
  return ag::mul(ag::tanh(ag::mul(logits, 1.0 / cap)), cap);
}

Dropout::Dropout(double p_, std::shared_ptr<Generator> g) : p(p_), gen(std::move(g)) {
  QKV_CHECK(p_ >= 0 && p_ < 1, "Dropout", "p must be in [0, 1), got ", p_);
}

Var Dropout::forward(const Var& x) const {
  if (!is_training() || p == 0) return x;
  return ag::dropout(x, p, *gen);
}

Activation parse_activation(const std::string& name) {
  return parse_name<Activation>(name, "activation");
}

Var activate(const Var& x, Activation a) {
  switch (a) {
    case Activation::relu:
      return ag::relu(x);
    case Activation::relu2:
      return ag::relu_squared(x);
    case Activation::swiglu:
      throw Error("activate: swiglu gates two inputs (nn::swiglu), not one");
    case Activation::gelu:
      break;
  }
  return ag::gelu(x);
}

Var swiglu(const Var& a, const Var& b) { return ag::mul(ag::mul(a, ag::sigmoid(a)), b); }

PositionwiseFeedForward::PositionwiseFeedForward(int64_t d, int64_t d_ff, Generator& gen,
                                                 Activation a, double p,
                                                 std::shared_ptr<Generator> dropout_gen)
    : act(a) {
  linear1 = register_module("linear1", std::make_shared<Linear>(d, d_ff, gen));
  linear2 = register_module("linear2", std::make_shared<Linear>(d_ff, d, gen));
  dropout = register_module("dropout", std::make_shared<Dropout>(p, std::move(dropout_gen)));
  // drawn last: the other kinds' parameters stay as they were
  if (a == Activation::swiglu)
    linear3 = register_module("linear3", std::make_shared<Linear>(d, d_ff, gen));
}

Var PositionwiseFeedForward::forward(const Var& x) const {
  // ReLU or GELU with no hook to see "pre": the first layer and its activation as one op, the
  // activation in the product's epilogue (ag::linear_act), with the same bits
  if ((act == Activation::relu || act == Activation::gelu) && !hooks_active()) {
    const LinearAct a = act == Activation::relu ? LinearAct::relu : LinearAct::gelu;
    const Var h = ag::linear_act(x, linear1->weight, linear1->bias, a);
    return linear2->forward(dropout->forward(h));
  }
  const Var pre = hook_point(linear1->forward(x), hook_prefix, "pre");  // (..., d_ff)
  const Var h = act == Activation::swiglu ? swiglu(pre, linear3->forward(x)) : activate(pre, act);
  return linear2->forward(dropout->forward(hook_point(h, hook_prefix, "post")));
}

void PositionwiseFeedForward::list_hooks(std::vector<std::string>& out) const {
  for (const char* n : {"pre", "post"}) out.push_back(hook_prefix + n);
}

}  // namespace qkv::nn
