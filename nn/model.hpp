// nn::Model: the common base of the models a run trains, saves and inspects -- the
// encoder-decoder nn::Seq2Seq (nn/seq2seq.hpp), the decoder-only nn::DecoderLM
// (nn/decoder_lm.hpp) and the encoder-only nn::EncoderClassifier (nn/encoder_classifier.hpp).
// What a training step, a checkpoint and a look inside need of a model is here -- its
// attention sites and typed read-outs (W_O, the final norm, the pooling, the output layer), so
// no consumer finds a weight by its name; what only one family does (greedy and beam decoding,
// sampling) is on its own type.
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
#include "nn/attention_site.hpp"
#include "nn/module.hpp"

namespace qkv::nn {

class Linear;
class MultiHeadAttention;
class Norm;

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

  // Its attentions, in forward order, from its structure alone (nn/attention_site.hpp).
  virtual std::vector<AttentionSite> attention_sites() const = 0;
  // The hook points of its token embeddings, whose positions are the columns token attribution
  // scores: the input side's (a translator's source, a classifier's text; "" when it has none)
  // and the output side's (a decoder's input; "" for a classifier).
  struct Embeddings {
    std::string input, output;
  };
  virtual Embeddings embeddings() const = 0;
  // The output projection W_O of one layer of a site: weight (d, d) out x in, whose columns
  // head * d_head .. (head + 1) * d_head read that head's z; bias (d) or undefined. qkv::Error
  // for a site that is not the model's or a layer out of range.
  const Linear& W_O(const AttentionSite& site, int64_t layer) const;

  // The output layer forward applies: logits = soft cap of (h weight^T + bias).
  struct OutputLayer {
    Var weight;  // (V, d): V tokens, or classes
    Var bias;    // (V) or undefined
    double softcap = 0;
  };
  virtual OutputLayer output_layer() const = 0;
  // What the output layer reads: the residual stream of the blocks whose hook prefix is
  // `blocks` ("blocks.", "decoder.blocks."), after their last layer (blocks.<layers-1>.resid_post),
  // through the final norm (null: none), then pool, then the output layer.
  struct Stream {
    std::string blocks;
    int64_t layers = 0;
    const Norm* final_norm = nullptr;
  };
  virtual Stream output_stream() const = 0;
  // The positions the output layer reads: h (B, n, d), valid (B, n) bool or undefined ->
  // (B, n', d). Every position (n' = n) by default; a classifier pools them to one.
  virtual Var pool(const Var& h, const Tensor& valid) const;
  // resid (B, n, d) of the output stream -> logits (B, n', V): the final norm, pool and the
  // output layer, forward's own ops (the same bits as forward from the stream it passed).
  Var read_out(const Var& resid, const Tensor& valid = Tensor()) const;

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
  // The attention a site's layer names (W_O's lookup); qkv::Error when there is none.
  virtual const MultiHeadAttention& attention_of(const AttentionSite& site,
                                                 int64_t layer) const = 0;

  std::shared_ptr<Generator> dropout_gen_;  // the layers' dropouts hold it too

 private:
  std::string scoped(const std::string& name) const;
  std::string scope_;
};

// m as the family F it was built as (Seq2Seq, DecoderLM or EncoderClassifier); qkv::Error naming
// `what` when it is the other one. Code that needs one family's operations asks the run's task
// first.
template <class F>
const F& model_as(const Model& m, const char* what) {
  const F* f = dynamic_cast<const F*>(&m);
  QKV_CHECK(f != nullptr, what, "the model is not of the family this needs (model.kind)");
  return *f;
}

}  // namespace qkv::nn
