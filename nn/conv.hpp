// Convolution over positions: Conv1d (torch.nn.Conv1d on batch-first sequences) and ConvStack,
// a stack of convolution layers with residuals and a norm, the lesson's convolutional
// alternative to recurrence and self-attention (maximum path length O(log_w n) with dilations
// growing by w, O(n / w) without).
//
// Padding: valid (B, n) bool, true on real positions, or undefined. Padded positions read as 0
// and output 0, so whatever sits there changes no real position.
//
// Hook points (nn/hooks.hpp) of a ConvStack, not yet in docs/hooks.md's table because no model
// is built from it yet; named from hook_prefix (default "conv."), L the layer from 0:
//   conv.L.conv  (B, n, d)  the layer's convolution after its activation (0 at padded positions)
//   conv.L.out   (B, n, d)  the layer's output: norm(x + conv), 0 at padded positions
// An encoder built from it would name them "encoder.conv.L.out" and so on.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/random.hpp"
#include "nn/kinds.hpp"
#include "nn/layers.hpp"
#include "nn/module.hpp"

namespace qkv::nn {

// x: (B, n, in) -> (B, n, out), stride 1, as long as the input: "same" padding (torch's
// padding="same": (k - 1) dilation zeros, the smaller half on the left) or, causal, all of it on
// the left, so position t sees only t and the past (a decoder's). weight (out, in, k) and bias
// (out) as torch's, initialised as torch: U(-1/sqrt(in k), 1/sqrt(in k)).
class Conv1d : public Module {
 public:
  Conv1d(int64_t in, int64_t out, int64_t kernel, Generator& gen, int64_t dilation = 1,
         bool causal = false, bool bias = true);
  Var forward(const Var& x, const Tensor& valid = Tensor()) const;
  Var weight, bias;
  int64_t dilation;
  bool causal;
};

struct ConvStackOptions {
  int64_t d = 0;       // width of every layer (input and output)
  int64_t layers = 1;  // L
  int64_t kernel = 3;  // w
  // Layer L's dilation is dilation_growth^L: 1 keeps every layer undilated (receptive field
  // 1 + L (w - 1)); w makes it grow as w^L (WaveNet's, path length O(log_w n)).
  int64_t dilation_growth = 1;
  bool causal = false;
  Activation activation = Activation::relu;  // relu, gelu or relu2
  NormKind norm = NormKind::layernorm;
};

// One layer: x <- norm(x + act(conv(x))) (post-norm, as the lesson's Transformer blocks), its
// padded positions set to 0. Parameters "conv.weight", "conv.bias", "norm.weight" (and
// "norm.bias" for LayerNorm).
class ConvLayer : public Module {
 public:
  ConvLayer(const ConvStackOptions& o, int64_t dilation, Generator& gen);
  std::shared_ptr<Conv1d> conv;
  std::shared_ptr<Norm> norm;
};

// L ConvLayers under "layers.L.". x: (B, n, d) -> (B, n, d).
class ConvStack : public Module {
 public:
  ConvStack(const ConvStackOptions& o, Generator& gen);
  Var forward(const Var& x, const Tensor& valid = Tensor()) const;
  // Appends the hook points' names, in the order forward passes them.
  void list_hooks(std::vector<std::string>& out) const;
  std::vector<std::shared_ptr<ConvLayer>> layers;
  ConvStackOptions options;
  std::string hook_prefix = "conv.";
};

}  // namespace qkv::nn
