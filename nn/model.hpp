// nn::Model: the common base of the models a run trains, saves and inspects -- the
// encoder-decoder nn::Seq2Seq (nn/seq2seq.hpp) and the decoder-only nn::DecoderLM
// (nn/decoder_lm.hpp). What a training step, a checkpoint and an attention map need of a model
// is here; what only one family does (greedy and beam decoding, sampling) is on its own type.
//
//   logits (B, T, V) = forward(src (B, S), tgt_in (B, T), src_valid (B, S), tgt_valid (B, T))
// A language model has no source: it ignores src and src_valid (which may be undefined).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/random.hpp"
#include "nn/module.hpp"

namespace qkv::nn {

class Model : public Module {
 public:
  // Teacher-forced logits of tgt_in; masks are bool, true on real tokens (not padding). Every
  // activation, attention weights included, is a hook point (nn/hooks.hpp).
  virtual Var forward(const Tensor& src, const Tensor& tgt_in, const Tensor& src_valid,
                      const Tensor& tgt_valid) const = 0;
  // The teacher-forced token-mean loss: cross_entropy(forward(...) as (B*T, V), tgt_out (B, T)
  // flattened, ignore_index, label_smoothing). Unless something needs the logits (a hook on
  // "logits", a logit soft cap), the output layer and the loss are one op,
  // ag::linear_cross_entropy: a bf16 step then never forms the (B*T, V) float32 logits. Hooks
  // on other points (training's attention patterns) leave it fused.
  Var forward_loss(const Tensor& src, const Tensor& tgt_in, const Tensor& src_valid,
                   const Tensor& tgt_valid, const Tensor& tgt_out, int64_t ignore_index,
                   double label_smoothing) const;

  // Its hook points, in the order forward passes them (nn::hook_points): named when the model
  // is built, listed without a pass.
  virtual std::vector<std::string> hook_points() const = 0;

  // The generator used by every dropout in the model (saved in checkpoints).
  Generator& dropout_generator() const { return *dropout_gen_; }

  // The parameters under the names a run's checkpoint and optimizer state give them:
  // named_parameters() under scope ("lm" for DecoderLM, the name its tensors have had in every
  // run folder; none for Seq2Seq). state_dict and load_state_dict of these names.
  std::vector<std::pair<std::string, Var>> checkpoint_parameters() const;
  NamedTensors checkpoint_state() const;
  void load_checkpoint_state(const NamedTensors& state);

 protected:
  Model(std::shared_ptr<Generator> dropout_gen, std::string scope)
      : dropout_gen_(std::move(dropout_gen)), scope_(std::move(scope)) {}
  // What forward computes before its output layer: (B, T, d), the same arguments.
  virtual Var features(const Tensor& src, const Tensor& tgt_in, const Tensor& src_valid,
                       const Tensor& tgt_valid) const = 0;
  // The output layer forward applies to features: logits = soft cap of (h weight^T + bias).
  struct OutputLayer {
    Var weight;  // (V, d)
    Var bias;    // (V) or undefined
    double softcap = 0;
  };
  virtual OutputLayer output_layer() const = 0;

  std::shared_ptr<Generator> dropout_gen_;  // the layers' dropouts hold it too

 private:
  std::string scoped(const std::string& name) const;
  std::string scope_;
};

// m as the family F it was built as (Seq2Seq or DecoderLM); qkv::Error naming `what` when it is
// the other one. Code that needs one family's operations asks the run's task first.
template <class F>
const F& model_as(const Model& m, const char* what) {
  const F* f = dynamic_cast<const F*>(&m);
  QKV_CHECK(f != nullptr, what, "the model is not of the family this needs (model.kind)");
  return *f;
}

}  // namespace qkv::nn
