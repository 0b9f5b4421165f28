#include "nn/rnn_seq2seq.hpp"

#include <algorithm>

#include "nn/attention.hpp"
#include "nn/hooks.hpp"
#include "nn/model_cost.hpp"
#include "nn/model_sites.hpp"

namespace qkv::nn {

namespace {

// A module whose children are named by whoever holds it: the decoder's parts under "decoder."
struct Parts : Module {
  template <class M>
  std::shared_ptr<M> add(const std::string& name, std::shared_ptr<M> m) {
    return register_module(name, std::move(m));
  }
};

// (B, S) bool -> (B, 1, d) int64: each row's last real position (0 for an empty row), as
// gather's index over a (B, S, d) tensor.
Tensor last_positions(const Tensor& valid, int64_t d) {
  const int64_t b = valid.size(0), s = valid.size(1);
  const Tensor v = valid.contiguous();
  const uint8_t* p = v.data<uint8_t>();
  Tensor idx = zeros({b, 1, d}, DType::i64);
  int64_t* q = idx.data<int64_t>();
  for (int64_t i = 0; i < b; ++i) {
    int64_t last = 0;
    for (int64_t j = 0; j < s; ++j)
      if (p[i * s + j]) last = j;
    std::fill(q + i * d, q + (i + 1) * d, last);
  }
  return idx;
}

}  // namespace

void ModelConfig::validate_recurrent_decoder() const {
  auto need = [](bool ok, const std::string& key, const std::string& why) {
    if (!ok) throw Error("model." + key + ": " + why);
  };
  const std::string gru = "the gru decoder ";
  need(kind == ModelKind::encoder_decoder, "decoder",
       "\"gru\" is an encoder-decoder's decoder; model.kind = \"" + std::string(name_of(kind)) +
           "\" takes only \"attention\"");
  need(encoder == EncoderKind::gru || encoder == EncoderKind::lstm, "encoder",
       gru +
           "starts from a recurrent encoder's final states: encoder = \"gru\" or \"lstm\", "
           "got \"" +
           std::string(name_of(encoder)) + "\"");
  need(decoder_layers == 1, "decoder_layers",
       gru + "is one recurrent layer (as Bahdanau et al.'s): decoder_layers = 1, got " +
           std::to_string(decoder_layers));
  need(position == PositionKind::none, "position",
       gru +
           "model orders tokens by its recurrence and adds no positions: position = \"none\", "
           "got \"" +
           std::string(name_of(position)) + "\"");
  need(!tie_output, "tie_output",
       gru +
           "reads out through a d_model / 2 maxout, not the embedding's width: tie_output = "
           "false");
  need(!cross_attention || attention == AttentionKind::additive, "attention",
       gru +
           "attends with Bahdanau's additive score: attention = \"additive\" (or "
           "cross_attention = false), got \"" +
           std::string(name_of(attention)) + "\"");
}

RecurrentSeq2Seq::RecurrentSeq2Seq(const ModelConfig& c, Generator& gen)
    : EncoderDecoder(std::make_shared<Generator>(gen.next_u64()), ""), config(c) {
  c.validate();
  QKV_CHECK(c.decoder == DecoderKind::gru, "RecurrentSeq2Seq",
            "model.decoder = \"attention\" is the Transformer: nn::Seq2Seq");
  const int64_t d = c.d_model;
  src_embed = register_module("src_embed",
                              std::make_shared<Embedding>(c.src_vocab, d, gen, c.scale_embedding));
  tgt_embed = c.share_embeddings
                  ? src_embed
                  : register_module("tgt_embed", std::make_shared<Embedding>(c.tgt_vocab, d, gen,
                                                                             c.scale_embedding));
  encoder = register_module(
      "encoder",
      std::make_shared<SequenceEncoder>(
          SequenceEncoderOptions{c.encoder, d, c.encoder_layers, c.norm, c.activation}, gen));
  encoder->name_hooks("encoder.");
  auto parts = register_module("decoder", std::make_shared<Parts>());
  // s_0 reads h<-_1 (d / 2) with attention, the context [h->_S; h<-_1] (d) without
  w_s = parts->add("W_s", std::make_shared<Linear>(c.cross_attention ? d / 2 : d, d, gen, false));
  if (c.cross_attention)
    attention = parts->add("attention", std::make_shared<BahdanauAttention>(d, d, d, gen));
  rnn = parts->add("rnn", std::make_shared<Recurrent>(RecurrentCell::gru, 2 * d, d, gen));
  u_o = parts->add("U_o", std::make_shared<Linear>(d, d, gen));
  v_o = parts->add("V_o", std::make_shared<Linear>(d, d, gen, false));
  c_o = parts->add("C_o", std::make_shared<Linear>(d, d, gen, false));
  dropout = parts->add("dropout", std::make_shared<Dropout>(c.dropout, dropout_gen_));
  output = register_module("output", std::make_shared<Linear>(d / 2, c.tgt_vocab, gen));
}

Var RecurrentSeq2Seq::encode(const Tensor& src, const Tensor& src_valid) const {
  QKV_CHECK(src.dim() == 2 && src_valid.shape() == src.shape(), "RecurrentSeq2Seq::encode", "src ",
            src.shape(), " and src_valid ", src_valid.shape(), " must both be (B, S)");
  ag::ModuleScope scope("encoder");
  return encoder->forward(hook_point(src_embed->forward(src), "encoder.embed"), src_valid);
}

RecurrentSeq2Seq::Cache RecurrentSeq2Seq::start(const Var& memory, const Tensor& src_valid) const {
  const int64_t b = memory.size(0), d = config.d_model, half = d / 2;
  QKV_CHECK(memory.dim() == 3 && memory.size(2) == d && src_valid.dim() == 2 &&
                src_valid.size(0) == b && src_valid.size(1) == memory.size(1),
            "RecurrentSeq2Seq", "memory ", memory.shape(), " and src_valid ", src_valid.shape(),
            " must be (B, S, ", d, ") and (B, S)");
  Cache c;
  c.memory = memory;
  c.mask = key_padding_mask(src_valid);
  // h<-_1: the reverse direction's output at the first position is its final state
  const Var back = ag::select(ag::narrow(memory, 2, half, half), 1, 0);  // (B, d / 2)
  if (attention) {
    c.keys = attention->keys(memory);
    c.state = ag::tanh(w_s->forward(back));
  } else {
    const Var fwd = ag::reshape(  // h->_S: the forward direction at each row's last real token
        ag::gather(ag::narrow(memory, 2, 0, half), 1, last_positions(src_valid, half)), {b, half});
    c.context = hook_point(ag::concat({fwd, back}, 1), "decoder.context");  // (B, d)
    c.state = ag::tanh(w_s->forward(c.context));
  }
  c.state = hook_point(c.state, "decoder.rnn.0.h0");
  return c;
}

RecurrentSeq2Seq::Step RecurrentSeq2Seq::step(Cache& c, const Var& y) const {
  Step out;
  if (attention) {
    const BahdanauAttention::Step a = attention->attend(c.state, c.keys, c.memory, c.mask);
    out.context = a.context;
    out.weights = a.weights;
  } else {
    out.context = c.context;
  }
  const Recurrent::Weights& w = rnn->weights[0];
  const Var x = ag::unsqueeze(ag::concat({y, out.context}, 1), 1);  // (B, 1, 2d)
  c.state = ag::gru(x, Tensor(), c.state, w.w_ih, w.w_hh, w.b_ih, w.b_hh).h;
  out.state = c.state;
  return out;
}

Var RecurrentSeq2Seq::maxout(const Var& s, const Var& y, const Var& c) const {
  const Var t = ag::add(ag::add(u_o->forward(s), v_o->forward(y)), c_o->forward(c));
  const int64_t last = t.dim() - 1, d = t.size(last);
  // t_j = max(t~_{2j}, t~_{2j+1}): maxout over adjacent pairs
  return ag::maximum(ag::slice(t, last, 0, d, 2), ag::slice(t, last, 1, d, 2));
}

Var RecurrentSeq2Seq::readout(const Var& memory, const Tensor& src_valid,
                              const Tensor& tgt_in) const {
  ag::ModuleScope scope("decoder");
  const int64_t b = tgt_in.size(0), t = tgt_in.size(1), d = config.d_model;
  const Var y = hook_point(tgt_embed->forward(tgt_in), "decoder.embed");  // (B, T, d)
  Cache c = start(memory, src_valid);
  Var states, contexts;  // (B, T, d)
  if (attention) {       // the context of step i needs s_{i-1}: one step at a time
    std::vector<Var> s, ctx, a;
    for (int64_t i = 0; i < t; ++i) {
      const Step st = step(c, ag::select(y, 1, i));
      s.push_back(st.state);
      ctx.push_back(st.context);
      a.push_back(st.weights);
    }
    hook_point(ag::unsqueeze(ag::stack(a, 1), 1), "decoder.rnn.0.cross.pattern");  // (B, 1, T, S)
    contexts = ag::reshape(hook_point(ag::unsqueeze(ag::stack(ctx, 1), 1), "decoder.rnn.0.cross.z"),
                           {b, t, d});
    states = ag::stack(s, 1);
  } else {  // a fixed context: the whole target is one GRU op
    contexts = ag::expand(ag::unsqueeze(c.context, 1), {b, t, d});
    const Recurrent::Weights& w = rnn->weights[0];
    states =
        ag::gru(ag::concat({y, contexts}, 2), Tensor(), c.state, w.w_ih, w.w_hh, w.b_ih, w.b_hh)
            .out;
  }
  states = hook_point(states, "decoder.rnn.0.out");
  return hook_point(maxout(states, y, contexts), "decoder.readout");
}

Var RecurrentSeq2Seq::features(const Tensor& src, const Tensor& tgt_in, const Tensor& src_valid,
                               const Tensor& tgt_valid) const {
  QKV_CHECK(
      tgt_in.dim() == 2 && tgt_valid.shape() == tgt_in.shape() && src.size(0) == tgt_in.size(0),
      "RecurrentSeq2Seq", "tgt_in ", tgt_in.shape(), " and tgt_valid ", tgt_valid.shape(),
      " must both be (B, T) for src ", src.shape());
  return dropout->forward(readout(encode(src, src_valid), src_valid, tgt_in));
}

Var RecurrentSeq2Seq::project(const Var& t) const {
  return hook_point(soft_cap(output->forward(t), config.logit_softcap), "logits");
}

Var RecurrentSeq2Seq::forward(const Tensor& src, const Tensor& tgt_in, const Tensor& src_valid,
                              const Tensor& tgt_valid) const {
  return project(features(src, tgt_in, src_valid, tgt_valid));
}

Var RecurrentSeq2Seq::decode(const Var& memory, const Tensor& src_valid, const Tensor& tgt_in,
                             const Tensor& tgt_valid) const {
  QKV_CHECK(tgt_in.dim() == 2 && tgt_valid.shape() == tgt_in.shape(), "RecurrentSeq2Seq::decode",
            "tgt_in ", tgt_in.shape(), " and tgt_valid ", tgt_valid.shape(),
            " must both be (B, T)");
  return project(dropout->forward(readout(memory, src_valid, tgt_in)));
}

DecodeState RecurrentSeq2Seq::start_decoding(const Var& memory, const Tensor& src_valid) const {
  ag::NoGrad no_grad;
  return DecodeState(std::make_unique<Cache>(start(memory, src_valid)));
}

Var RecurrentSeq2Seq::decode_step(DecodeState& state, const Tensor& tokens) const {
  Cache& c = state.as<Cache>();
  QKV_CHECK(tokens.dim() == 1 && tokens.size(0) == c.memory.size(0),
            "RecurrentSeq2Seq::decode_step", "tokens ", tokens.shape(), " for a batch of ",
            c.memory.size(0));
  ag::NoGrad no_grad;
  const int64_t b = tokens.size(0), d = config.d_model;
  const Var y = hook_point(tgt_embed->forward(tokens.unsqueeze(1)), "decoder.embed");  // (B, 1, d)
  Step st = step(c, ag::reshape(y, {b, d}));
  Var context = ag::unsqueeze(st.context, 1);  // (B, 1, d)
  if (attention) {                             // this step's row of the pattern: (B, 1, 1, S)
    hook_point(ag::unsqueeze(ag::unsqueeze(st.weights, 1), 1), "decoder.rnn.0.cross.pattern");
    context =
        ag::reshape(hook_point(ag::unsqueeze(context, 1), "decoder.rnn.0.cross.z"), {b, 1, d});
  }
  const Var s = hook_point(ag::unsqueeze(st.state, 1), "decoder.rnn.0.out");
  const Var t = hook_point(maxout(s, y, context), "decoder.readout");
  return ag::select(project(dropout->forward(t)), 1, 0);  // (B, V)
}

void RecurrentSeq2Seq::Cache::reorder(const Tensor& rows) {
  const auto pick = [&](Var& v) {
    if (v.defined()) v = Var(index_select(v.data(), 0, rows));
  };
  pick(memory);
  pick(keys);
  pick(state);
  pick(context);
  mask = index_select(mask, 0, rows);
}

std::vector<std::string> RecurrentSeq2Seq::hook_points() const {
  std::vector<std::string> out{"encoder.embed"};
  encoder->list_hooks(out);
  out.push_back("decoder.embed");
  if (!attention) out.push_back("decoder.context");
  out.push_back("decoder.rnn.0.h0");
  if (attention) {
    out.push_back("decoder.rnn.0.cross.pattern");
    out.push_back("decoder.rnn.0.cross.z");
  }
  for (const char* p : {"decoder.rnn.0.out", "decoder.readout", "logits"}) out.push_back(p);
  return out;
}

std::vector<AttentionSite> RecurrentSeq2Seq::attention_sites() const {
  return recurrent_seq2seq_sites(config);
}

std::vector<AttentionSite> recurrent_seq2seq_sites(const ModelConfig& c) {
  if (!c.cross_attention) return {};
  return {{"cross", "additive cross-attention", "decoder.rnn.", "cross", Side::output, Side::input,
           false, 1, 1, "output token", "key (source)", "cross"}};
}

const MultiHeadAttention& RecurrentSeq2Seq::attention_of(const AttentionSite& site, int64_t) const {
  throw Error(cat("RecurrentSeq2Seq: the ", site.name,
                  " attention of a gru decoder (Bahdanau's) has no heads' W_O: its context "
                  "enters the recurrence and the read-out directly"));
}

Model::OutputLayer RecurrentSeq2Seq::output_layer() const {
  return {output->weight, output->bias, config.logit_softcap};
}

Model::Stream RecurrentSeq2Seq::output_stream() const { return {"decoder.rnn.", 0, nullptr}; }

// The encoder's, and the decoder's: W_s (d/2 or d -> d), the alignment model's W_a and U_a
// (2 d^2), the GRU cell over [E y; c] (9 d^2), the readout U_o, V_o, C_o (3 d^2); the output
// reads the d / 2 maxout. Saved per target token: the cell's input, gates and state, the
// context, the readout and the maxout (about 12 d); per (target, source) pair the alignment
// model's W_a s + U_a h_j, its tanh and the tanh times v_a, d wide each, and in backward their
// gradient (measured: about 4 d at the peak), and the score and weight.
StackCost recurrent_seq2seq_cost(const ModelConfig& c) {
  const double d = static_cast<double>(c.d_model);
  StackCost s =
      sequence_encoder_cost({c.encoder, c.d_model, c.encoder_layers, c.norm, c.activation});
  s.params_d += (c.cross_attention ? 0.5 + 2 : 1) * d * d + 9 * d * d + 3 * d * d;
  s.act_d += 12 * d;
  s.pair_always = c.cross_attention ? 4 * d + 2 : 0;
  s.output_in = d / 2;
  return s;
}

}  // namespace qkv::nn
