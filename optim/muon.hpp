// Muon (Keller Jordan's, as in modded-nanogpt): the hidden layers' weight matrices take
// orthogonalized Nesterov momentum, every other parameter takes AdamW.
//
// For a matrix p (rows, cols) with gradient g, momentum mu and learning rate lr_m:
//   m = mu m + g                        momentum buffer ("momentum_buffer")
//   u = g + mu m                        Nesterov
//   O = newton_schulz5(u)               u's singular vectors, singular values pushed towards 1
//   p *= 1 - lr_m wd                    decoupled weight decay, as AdamW's
//   p -= lr_m sqrt(max(1, rows / cols)) O
// Why: a hidden layer's update is a linear map applied to activations; orthogonalizing it
// gives every direction of the map the same step size, where the raw momentum is dominated by
// a few directions. Embeddings (a lookup, not a map), the output head (its rows are per-class
// logits) and 1-D parameters are not such maps, so they keep AdamW.
//
// The schedule moves both learning rates together: it sets lr() (AdamW's), and the matrices
// step with lr_m = muon_lr * lr() / adamw.lr, the same multiplier of their own peak.
//
// Precision: the Newton-Schulz iterations run in the precision of the thread that calls step()
// (core/precision.hpp's PrecisionScope, the one setting that also rounds the layers' products):
// float32 on qkv's matmul by default; in a bf16 scope, float32 matrices run them in bfloat16
// as modded-nanogpt does (newton_schulz5): the bf16 GEMM's peak is about twice the sgemm's
// (docs/performance.md), and the iteration leaves the singular values anywhere in roughly
// [0.5, 1.5] anyway, so bf16's rounding (0.4%) is small beside its own inexactness.
// train::Trainer runs the update in its options' precision, so the config's top-level
// `precision` decides for both.
//
// Determinism: each matrix is orthogonalized whole on one thread (one parallel region shares
// the matrices out among the threads), with single-threaded products in either precision, so
// a matrix's bits do not depend on the thread count; the AdamW parameters are elementwise.
#pragma once
#include "core/precision.hpp"
#include "optim/optimizers.hpp"

namespace qkv::optim {

// The routing rule, in one place: whether make_optimizer gives parameter `name` to Muon's
// orthogonalized update. True for a 2-D parameter named "...layers.<i>....weight": the weight
// of a Linear inside a Transformer block of an Encoder or Decoder stack (Seq2Seq's
// "encoder.layers.0.self_attn.w_q.weight", "decoder.layers.1.ffn.linear2.weight", DecoderLM's
// "lm.blocks.layers.0.self_attn.w_o.weight"...): the attention projections w_q, w_k, w_v,
// w_o and the FFN's linear1, linear2 (linear3 with swiglu). False for everything else: the
// embeddings (src_embed, tgt_embed, embed; also when tied to the output), learned position
// tables, the untied head ("output.weight"), per-head tables inside a block (relative_bias,
// additive_v), biases and norm gains (1-D).
bool is_hidden_matrix(const std::string& name, const Var& p);

struct MuonOptions {
  double lr = 0.02;        // the matrices' peak learning rate ([optim] muon_lr), >= 0
  double momentum = 0.95;  // Nesterov momentum ([optim] muon_momentum), in [0, 1)
  AdamOptions adamw;       // the other parameters' AdamW; adamw.lr > 0 (the schedule's base)
};

// Newton-Schulz, 5 quintic iterations: X = g / (||g||_F + 1e-7), then X = a X + B X with
// A = X X^T, B = b A + (c A) A, (a, b, c) = (3.4445, -4.7750, 2.0315), on the wide
// orientation (a tall g is transposed first and the result back). The result has g's singular
// vectors and singular values in roughly [0.5, 1.5] (not exactly 1: the coefficients trade
// that for speed). g: (rows, cols) float32 -> (rows, cols) float32, contiguous.
// precision fp32: every op in float32 on qkv's matmul, which uses the thread pool unless
// called from a parallel region. bf16: modded-nanogpt's bfloat16 iteration (X = G.bfloat16(),
// then every op of the quintic in bf16): each op's result rounded to bf16, each product on
// bf16 operands with float32 accumulation, the norm summed in double and rounded to bf16, the
// scalars a, b, c multiplying in float32; the result is those bf16 values widened. Always on
// the calling thread (bf16_gemm_this_thread). Throws Error where bf16 cannot run, and for auto.
Tensor newton_schulz5(const Tensor& g, Precision precision = Precision::fp32);

class Muon : public Adam {
 public:
  // matrices: each 2-D, updated by orthogonalized momentum; others: AdamW with o.adamw. A
  // group's weight decay applies to either kind (decoupled). Parameters are ordered matrices
  // first. Throws Error naming the parameter for a matrix that is not 2-D.
  Muon(std::vector<ParamGroup> matrices, std::vector<ParamGroup> others, const MuonOptions& o);

  // The matrices' learning rate for the next step: o.lr scaled as the schedule scaled lr().
  double muon_lr() const { return o_.lr * lr() / o_.adamw.lr; }

 protected:
  // The matrices' "momentum_buffer"; Adam's for the rest, which Adam::update updates.
  std::vector<std::string> buffer_names(const Slot& s) const override;
  void update_whole(const std::vector<Slot*>& slots) override;

 private:
  // One matrix, on the calling thread; precision: the caller's of step() (update_whole)
  void orthogonal_step(Slot& s, double lr, Precision precision) const;
  MuonOptions o_;
};

// The options of c's muon: muon_lr, muon_momentum and adam_options(c) for the rest.
MuonOptions muon_options(const OptimConfig& c);
// Splits params by is_hidden_matrix and applies c's no-decay rule to each half. Throws Error
// when no parameter is a hidden matrix (the optimizer would be AdamW under another name).
std::unique_ptr<Muon> make_muon(const OptimConfig& c, const NamedParams& params);

}  // namespace qkv::optim
