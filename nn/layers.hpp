// The basic layers: Linear, Embedding, LayerNorm and RMSNorm (each a Norm), Dropout,
// PositionwiseFeedForward, and the logits' soft cap.
// Shapes: "..." is any number of leading dims (batch, sequence).
#pragma once
#include <memory>
#include <string>

#include "core/random.hpp"
#include "nn/kinds.hpp"
#include "nn/module.hpp"

namespace qkv::nn {

// y = x W^T + b. x: (..., in) -> (..., out). W: (out, in), Xavier/Glorot uniform;
// b: (out), zeros (omitted when bias = false).
class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, Generator& gen, bool bias = true);
  Var forward(const Var& x) const;
  Var weight, bias;
};

// ids: (...) int64 -> (..., dim). Weight (vocab, dim) ~ N(0, 1) as torch.nn.Embedding (N(0, 1/dim)
// when scaled, so the scaled output has unit variance);
// scale_by_sqrt_dim multiplies the output by sqrt(dim), as the lesson (and Vaswani et al.) do.
class Embedding : public Module {
 public:
  Embedding(int64_t vocab, int64_t dim, Generator& gen, bool scale_by_sqrt_dim = false);
  Var forward(const Tensor& ids) const;
  int64_t vocab() const { return weight.size(0); }
  int64_t dim() const { return weight.size(1); }
  Var weight;
  bool scale_by_sqrt_dim;
};

// A normalisation of the last dim, x: (..., d) -> (..., d); model.norm picks the kind.
class Norm : public Module {
 public:
  virtual Var forward(const Var& x) const = 0;
  // forward(x + a), x and a of one shape: a residual add and this norm, fused where the kind
  // has a fused op (ag::add_layer_norm), with forward(ag::add(x, a))'s bits. sum: when given,
  // receives x + a (pre-LN's stream, which flows on).
  virtual Var forward_add(const Var& x, const Var& a, Var* sum = nullptr) const;
};

// (x - mean) / sqrt(var + eps) * weight + bias.
class LayerNorm : public Norm {
 public:
  explicit LayerNorm(int64_t d, double eps = 1e-5);
  Var forward(const Var& x) const override;
  Var forward_add(const Var& x, const Var& a, Var* sum = nullptr) const override;
  Var weight, bias;
  double eps;
};

// x / sqrt(mean(x^2) + eps) * weight (Zhang & Sennrich 2019; torch.nn.RMSNorm): weight (d),
// ones at the start; no bias.
class RMSNorm : public Norm {
 public:
  explicit RMSNorm(int64_t d, double eps = 1e-5);
  Var forward(const Var& x) const override;
  Var forward_add(const Var& x, const Var& a, Var* sum = nullptr) const override;
  Var weight;
  double eps;
};

std::shared_ptr<Norm> make_norm(NormKind kind, int64_t d, double eps);

// cap > 0: cap * tanh(logits / cap) (Gemma 2, modded-nanogpt), logits squashed into
// (-cap, cap) smoothly; cap == 0: the logits as they are.
Var soft_cap(const Var& logits, double cap);

// Inverted dropout with probability p while training; identity in eval mode or when p == 0.
// The mask comes from a generator shared by the whole model, so a checkpoint that saves that
// generator's state resumes with the same masks.
class Dropout : public Module {
 public:
  Dropout(double p, std::shared_ptr<Generator> gen);
  Var forward(const Var& x) const;
  double p;
  std::shared_ptr<Generator> gen;
};

Activation parse_activation(const std::string& name);  // "relu" | "gelu" | "relu2" | "swiglu"
// relu, gelu, relu2: the nonlinearity of x. swiglu gates two inputs: use swiglu() instead.
Var activate(const Var& x, Activation a);
// silu(a) * b, silu(a) = a * sigmoid(a): the gate of a SwiGLU FFN (Shazeer 2020).
Var swiglu(const Var& a, const Var& b);

// FFN(x) = act(x W1^T + b1) W2^T + b2, with dropout after the activation (as PyTorch's
// Transformer layers). x: (..., d) -> (..., d); inner width d_ff (default 4d).
// swiglu: FFN(x) = (silu(x W1^T + b1) * (x W3^T + b3)) W2^T + b2, linear3 the third matrix
// (d_ff as given: 1.5x the parameters of the other kinds at the same d_ff).
class PositionwiseFeedForward : public Module {
 public:
  PositionwiseFeedForward(int64_t d, int64_t d_ff, Generator& gen, Activation act, double dropout,
                          std::shared_ptr<Generator> dropout_gen);
  Var forward(const Var& x) const;
  std::shared_ptr<Linear> linear1, linear2, linear3;  // linear3: swiglu only
  std::shared_ptr<Dropout> dropout;
  Activation act;
  std::string hook_prefix = "mlp.";  // hook points (nn/hooks.hpp): pre (B, n, d_ff) and post
  // Appends its hook points' names, in the order forward passes them.
  void list_hooks(std::vector<std::string>& out) const;
};

}  // namespace qkv::nn
