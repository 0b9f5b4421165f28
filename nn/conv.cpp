#include "nn/conv.hpp"

#include <cmath>

#include "nn/hooks.hpp"

namespace qkv::nn {

Conv1d::Conv1d(int64_t in, int64_t out, int64_t kernel, Generator& gen, int64_t dilation_,
               bool causal_, bool with_bias)
    : dilation(dilation_), causal(causal_) {
  QKV_CHECK(in > 0 && out > 0 && kernel > 0 && dilation_ > 0, "Conv1d",
            "sizes must be positive, got in ", in, " out ", out, " kernel ", kernel, " dilation ",
            dilation_);
  // torch's reset_parameters: kaiming_uniform(a = sqrt(5)) is U(-1/sqrt(fan_in), ..) here too
  const double a = 1.0 / std::sqrt(static_cast<double>(in * kernel));
  weight = register_parameter("weight", uniform({out, in, kernel}, -a, a, gen));
  if (with_bias) bias = register_parameter("bias", uniform({out}, -a, a, gen));
}

Var Conv1d::forward(const Var& x, const Tensor& valid) const {
  return ag::conv1d(x, weight, bias, valid, dilation, causal);
}

ConvLayer::ConvLayer(const ConvStackOptions& o, int64_t dilation, Generator& gen) {
  conv = register_module("conv",
                         std::make_shared<Conv1d>(o.d, o.d, o.kernel, gen, dilation, o.causal));
  norm = register_module("norm", make_norm(o.norm, o.d, 1e-5));
}

ConvStack::ConvStack(const ConvStackOptions& o, Generator& gen) : options(o) {
  QKV_CHECK(o.d > 0 && o.layers > 0 && o.kernel > 0 && o.dilation_growth > 0, "ConvStack",
            "d, layers, kernel and dilation_growth must be positive, got ", o.d, ", ", o.layers,
            ", ", o.kernel, ", ", o.dilation_growth);
  QKV_CHECK(o.activation != Activation::swiglu, "ConvStack",
            "activation must be relu, gelu or relu2 (swiglu gates two inputs)");
  int64_t dilation = 1;
  for (int64_t l = 0; l < o.layers; ++l, dilation *= o.dilation_growth)
    layers.push_back(std::make_shared<ConvLayer>(o, dilation, gen));
  register_module("layers", std::make_shared<ModuleList>(layers));
}

Var ConvStack::forward(const Var& x, const Tensor& valid) const {
  QKV_CHECK(x.dim() == 3 && x.size(2) == options.d, "ConvStack", "input ", x.shape(),
            " must be (B, n, d ", options.d, ")");
  const Tensor pad = valid.defined() ? logical_not(valid).unsqueeze(2) : Tensor();  // (B, n, 1)
  Var h = pad.defined() ? ag::masked_fill(x, pad, 0.0) : x;
  for (size_t l = 0; l < layers.size(); ++l) {
    const std::string prefix = hook_prefix + std::to_string(l) + ".";
    // the conv's padded outputs are 0 already, and activations keep 0 at 0
    const Var c = hook_point(activate(layers[l]->conv->forward(h, valid), options.activation),
                             prefix, "conv");
    h = layers[l]->norm->forward(ag::add(h, c));
    if (pad.defined()) h = ag::masked_fill(h, pad, 0.0);
    h = hook_point(h, prefix, "out");
  }
  return h;
}

void ConvStack::list_hooks(std::vector<std::string>& out) const {
  for (size_t l = 0; l < layers.size(); ++l)
    for (const char* n : {"conv", "out"}) out.push_back(hook_prefix + std::to_string(l) + "." + n);
}

}  // namespace qkv::nn
