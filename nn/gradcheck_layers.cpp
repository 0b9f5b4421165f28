#include "nn/gradcheck_layers.hpp"

#include <cmath>
#include <cstdlib>

#include "core/parallel.hpp"
#include "core/random.hpp"
#include "nn/attention_variants.hpp"
#include "nn/bahdanau_attention.hpp"
#include "nn/conv.hpp"
#include "nn/recurrent.hpp"
#include "nn/relative_bias.hpp"
#include "nn/rotary.hpp"

namespace qkv::nn {

using ag::Var;
using Ins = const std::vector<Var>&;

MaskKind parse_mask_kind(const std::string& s) {
  if (s == "none") return MaskKind::none;
  if (s == "causal") return MaskKind::causal;
  if (s == "padding") return MaskKind::padding;
  if (s == "both") return MaskKind::both;
  throw Error(cat("gradcheck: --mask must be none, causal, padding or both, got '", s, "'"));
}

AttentionScale parse_scale(const std::string& s) {
  if (s == "default") return {};
  if (s == "none") return 1.0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  QKV_CHECK(end && *end == '\0' && !s.empty() && v > 0 && std::isfinite(v), "gradcheck",
            "--scale must be default, none or a positive number, got '", s, "'");
  return v;
}

namespace {

bool has_causal(MaskKind k) { return k == MaskKind::causal || k == MaskKind::both; }
bool has_padding(MaskKind k) { return k == MaskKind::padding || k == MaskKind::both; }

// The attention mask for n queries over m keys of a batch of two whose second sequence has
// `short_len` real keys.
Tensor attention_mask(MaskKind k, int64_t n, int64_t m, int64_t short_len) {
  Tensor mask;
  if (has_causal(k)) mask = causal_mask(n, m);
  if (has_padding(k)) mask = combine_masks(mask, key_padding_mask(valid_mask({m, short_len}, m)));
  return mask;
}

Var leaf(const Shape& s, Generator& g) { return Var(uniform(s, -1, 1, g, DType::f64), true); }

bool ends_with(const std::string& s, const std::string& end) {
  return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}

// Float64, and the 1-D parameters (biases, LayerNorm gains) and relative-position tables moved
// off their initial 0 / 1 so no term passes by symmetry.
template <class M>
std::shared_ptr<M> prepare(std::shared_ptr<M> m, Generator& g) {
  m->to(DType::f64);
  m->eval();
  for (auto& [name, p] : m->named_parameters()) {
    if (ends_with(name, "relative_bias")) {
      Var v = p;
      v.data().copy_(uniform(p.shape(), -1, 1, g, DType::f64));
      continue;
    }
    if (p.dim() != 1) continue;
    const bool gain = ends_with(name, "weight");
    Var v = p;
    v.data().copy_(gain ? uniform(p.shape(), 0.5, 1.5, g, DType::f64)
                        : uniform(p.shape(), -0.5, 0.5, g, DType::f64));
  }
  return m;
}

// inputs, then the module's parameters under their names
GradcheckProblem with_params(ag::GradcheckFn f, std::vector<Var> inputs, std::shared_ptr<Module> m,
                             const std::string& prefix) {
  if (!m) return {std::move(f), with_parameters(std::move(inputs), nullptr, prefix), {}};
  GradcheckProblem p{std::move(f), with_parameters(std::move(inputs), m.get(), prefix), {}};
  p.keep.push_back(std::move(m));
  return p;
}

BlockConfig tiny_block(bool norm_first, AttentionScale scale) {
  BlockConfig c;
  c.d_model = 6;
  c.heads = 2;
  c.d_ff = 10;
  c.dropout = 0;
  c.norm_first = norm_first;
  c.scale = scale;
  return c;
}

GradcheckProblem encoder_block(const LayerCheckOptions& o, bool nf) {
  Generator g(o.seed);
  auto enc =
      prepare(std::make_shared<TransformerEncoderBlock>(tiny_block(nf, o.scale), g, nullptr), g);
  const Tensor mask = attention_mask(o.mask, 3, 3, 2);
  return with_params([enc, mask](Ins in) { return enc->forward(in[0], mask); },
                     {leaf({2, 3, 6}, g).set_name("x")}, enc, "");
}

GradcheckProblem decoder_block(const LayerCheckOptions& o, bool nf) {
  Generator g(o.seed);
  auto dec =
      prepare(std::make_shared<TransformerDecoderBlock>(tiny_block(nf, o.scale), g, nullptr), g);
  const Tensor self_mask = attention_mask(o.mask, 3, 3, 2);
  const Tensor cross_mask =
      has_padding(o.mask) ? key_padding_mask(valid_mask({4, 2}, 4)) : Tensor();
  return with_params(
      [dec, self_mask, cross_mask](Ins in) {
        return dec->forward(in[0], in[1], self_mask, cross_mask);
      },
      {leaf({2, 3, 6}, g).set_name("x"), leaf({2, 4, 6}, g).set_name("memory")}, dec, "");
}

ModelConfig tiny_model(bool nf) {
  ModelConfig c;  // vocabularies: model_gradcheck_problem's 11 tokens
  c.d_model = 4;
  c.heads = 2;
  c.d_ff = 6;
  c.encoder_layers = 1;
  c.decoder_layers = 1;
  c.dropout = 0;
  c.norm_first = nf;
  return c;
}

// Multi-head self-attention (d_model 8, 2 heads of 4, x (2, 4, 8)) with one variant or
// position kind: the scorer's own parameters (additive_v, relative_bias) are checked too.
// --scale reaches the scorers that take one (QKV_ATTENTIONS' scale column).
GradcheckProblem mha_variant(const LayerCheckOptions& o, AttentionKind kind, int64_t window,
                             PositionKind position) {
  Generator g(o.seed);
  const AttentionScale scale = traits_of(kind).takes_scale ? o.scale : AttentionScale();
  auto mha = std::make_shared<MultiHeadAttention>(8, 2, g, true, scale, 0.0, nullptr, kind, window);
  if (position != PositionKind::none) mha->use_positions(position, 2);
  prepare(mha, g);
  const Tensor mask = attention_mask(o.mask, 4, 4, 3);
  return with_params([mha, mask](Ins in) { return mha->forward(in[0], in[0], in[0], mask); },
                     {leaf({2, 4, 8}, g).set_name("x")}, mha, "");
}

// q (2, 2, 4, 4), k (2, 2, 4, 4), v (2, 2, 4, 3): the attention functions without projections.
std::vector<Var> qkv_leaves(Generator& g) {
  return {leaf({2, 2, 4, 4}, g).set_name("q"), leaf({2, 2, 4, 4}, g).set_name("k"),
          leaf({2, 2, 4, 3}, g).set_name("v")};
}

// The attention variants (nn/attention_variants.hpp) and the positions inside attention
// (nn/rotary.hpp, nn/relative_bias.hpp), as functions and inside multi-head attention.
void add_variant_layers(std::vector<GradcheckLayer>& L) {
  L.push_back({"rope", "rotary position embedding of x (2, 2, 3, 4) at offset 3", false,
               [](const LayerCheckOptions& o) {
                 Generator g(o.seed);
                 return with_params([](Ins in) { return rotary(in[0], 3); },
                                    {leaf({2, 2, 3, 4}, g).set_name("x")}, nullptr, "");
               }});
  L.push_back({"relative_bias", "relative position bias, table (2, 5), 3 queries at 1 over 4 keys",
               false, [](const LayerCheckOptions& o) {
                 Generator g(o.seed);
                 return with_params([](Ins in) { return relative_position_bias(in[0], 3, 4, 1); },
                                    {leaf({2, 5}, g).set_name("table")}, nullptr, "");
               }});
  L.push_back({"additive_attention", "additive (Bahdanau) attention, w (2, 4), q, k (2, 2, 4, 4)",
               false, [](const LayerCheckOptions& o) {
                 Generator g(o.seed);
                 const Tensor mask = attention_mask(o.mask, 4, 4, 3);
                 std::vector<Var> in = qkv_leaves(g);
                 in.push_back(leaf({2, 4}, g).set_name("w"));
                 return with_params(
                     [mask](Ins x) { return additive_attention(x[0], x[1], x[2], x[3], mask); }, in,
                     nullptr, "");
               }});
  L.push_back({"linear_attention", "linear attention, elu + 1 features, q, k (2, 2, 4, 4)", false,
               [](const LayerCheckOptions& o) {
                 Generator g(o.seed);
                 const Tensor mask = attention_mask(o.mask, 4, 4, 3);
                 return with_params(
                     [mask](Ins x) { return linear_attention(x[0], x[1], x[2], mask); },
                     qkv_leaves(g), nullptr, "");
               }});
  L.push_back({"window_attention", "sliding-window attention, window 1, q, k (2, 2, 4, 4)", false,
               [](const LayerCheckOptions& o) {
                 Generator g(o.seed);
                 const Tensor mask = attention_mask(o.mask, 4, 4, 3);
                 const AttentionScale scale = o.scale;
                 return with_params(
                     [mask, scale](Ins x) {
                       return sliding_window_attention(x[0], x[1], x[2], mask, scale, 1);
                     },
                     qkv_leaves(g), nullptr, "");
               }});
  struct Variant {
    std::string name, description;
    AttentionKind kind;
    int64_t window;
    PositionKind position;
  };
  std::vector<Variant> variants;
  for (const EnumName<AttentionKind>& a : kAttentionNames)  // every scorer of the registry
    if (a.value != AttentionKind::dot)                      // dot: "mha" and the rows below
      variants.push_back({"mha_" + std::string(a.name),
                          cat("multi-head self-attention, ", scorer_of(a.value).description),
                          a.value, 0, PositionKind::none});
  variants.push_back({"mha_window", "multi-head self-attention, sliding window 1",
                      AttentionKind::dot, 1, PositionKind::none});
  variants.push_back({"mha_relative", "multi-head self-attention, relative position bias (clip 2)",
                      AttentionKind::dot, 0, PositionKind::relative});
  variants.push_back({"mha_rope", "multi-head self-attention, rotary positions", AttentionKind::dot,
                      0, PositionKind::rope});
  for (const Variant& v : variants)
    L.push_back(
        {v.name, v.description + ", d_model 8, 2 heads", false,
         [v](const LayerCheckOptions& o) { return mha_variant(o, v.kind, v.window, v.position); }});
}

// The recurrent and convolutional layers (nn/recurrent.hpp, nn/conv.hpp) on x (2, 5, 3), the
// second sequence 3 long under a padding mask (causal masks do not apply: the causal conv stack
// is causal by construction). The recurrences return outputs and final states side by side.
void add_sequence_layers(std::vector<GradcheckLayer>& L) {
  for (bool lstm : {false, true})
    L.push_back(
        {lstm ? "lstm" : "gru",
         std::string(lstm ? "LSTM" : "GRU") +
             "(3, 4), 2 layers, bidirectional, with initial states, x (2, 5, 3)",
         false, [lstm](const LayerCheckOptions& o) {
           Generator g(o.seed);
           auto m = prepare(std::make_shared<Recurrent>(
                                lstm ? RecurrentCell::lstm : RecurrentCell::gru, 3, 4, g, 2, true),
                            g);
           const Tensor valid = has_padding(o.mask) ? valid_mask({5, 3}, 5) : Tensor();
           std::vector<Var> in = {leaf({2, 5, 3}, g).set_name("x"),
                                  leaf({4, 2, 4}, g).set_name("h0")};
           if (lstm) in.push_back(leaf({4, 2, 4}, g).set_name("c0"));
           return with_params(
               [m, valid, lstm](Ins in) {
                 const Recurrent::Output r = m->forward(in[0], valid, in[1], lstm ? in[2] : Var());
                 std::vector<Var> parts = {ag::reshape(r.out, {-1}), ag::reshape(r.h, {-1})};
                 if (lstm) parts.push_back(ag::reshape(r.c, {-1}));
                 return ag::concat(parts, 0);
               },
               in, m, "");
         }});
  for (bool causal : {false, true})
    L.push_back({causal ? "conv_stack_causal" : "conv_stack",
                 causal ? "2 causal conv layers (kernel 3, dilations 1, 2), residual + LayerNorm"
                        : "2 conv layers (kernel 2, dilations 1, 2), residual + LayerNorm",
                 false, [causal](const LayerCheckOptions& o) {
                   Generator g(o.seed);
                   const ConvStackOptions c{.d = 3,
                                            .layers = 2,
                                            .kernel = causal ? 3 : 2,
                                            .dilation_growth = 2,
                                            .causal = causal};
                   auto m = prepare(std::make_shared<ConvStack>(c, g), g);
                   const Tensor valid = has_padding(o.mask) ? valid_mask({5, 3}, 5) : Tensor();
                   return with_params([m, valid](Ins in) { return m->forward(in[0], valid); },
                                      {leaf({2, 5, 3}, g).set_name("x")}, m, "");
                 }});
}

// Bahdanau's alignment model alone, then the recurrent encoder-decoders with and without it
// (nn/rnn_seq2seq.hpp) through cross-entropy.
void add_recurrent_seq2seq_layers(std::vector<GradcheckLayer>& L) {
  L.push_back(
      {"bahdanau_attention",
       "Bahdanau's alignment model, state 3, annotations (2, 5, 4), hidden 5: context and "
       "weights",
       false, [](const LayerCheckOptions& o) {
         Generator g(o.seed);
         auto m = prepare(std::make_shared<BahdanauAttention>(3, 4, 5, g), g);
         const Tensor mask =
             has_padding(o.mask) ? key_padding_mask(valid_mask({5, 3}, 5)) : Tensor();
         return with_params(
             [m, mask](Ins in) {
               const auto a = m->attend(in[0], m->keys(in[1]), in[1], mask);
               return ag::concat({ag::reshape(a.context, {-1}), ag::reshape(a.weights, {-1})}, 0);
             },
             {leaf({2, 3}, g).set_name("s_prev"), leaf({2, 5, 4}, g).set_name("h")}, m, "");
       }});
  for (bool attend : {true, false})
    L.push_back({attend ? "rnn_seq2seq_additive" : "rnn_seq2seq_fixed",
                 std::string("a GRU encoder-decoder, d_model 4, ") +
                     (attend ? "Bahdanau's additive attention" : "one fixed context") +
                     ", through cross-entropy",
                 false, [attend](const LayerCheckOptions& o) {
                   ModelConfig c = tiny_model(false);
                   c.encoder = EncoderKind::gru;
                   c.decoder = DecoderKind::gru;
                   c.position = PositionKind::none;
                   c.attention = AttentionKind::additive;
                   c.cross_attention = attend;
                   LayerCheckOptions no_scale = o;  // no q . k to scale
                   no_scale.scale = {};
                   return model_gradcheck_problem(c, no_scale);
                 }});
}

std::vector<GradcheckLayer> make_layers() {
  std::vector<GradcheckLayer> L;
  L.push_back(
      {"linear", "Linear(4, 3) with bias on x (2, 5, 4)", false, [](const LayerCheckOptions& o) {
         Generator g(o.seed);
         auto m = prepare(std::make_shared<Linear>(4, 3, g), g);
         return with_params([m](Ins in) { return m->forward(in[0]); },
                            {leaf({2, 5, 4}, g).set_name("x")}, m, "");
       }});
  for (bool scaled : {false, true})
    L.push_back(
        {scaled ? "embedding_scaled" : "embedding",
         scaled ? "Embedding(5, 3) times sqrt(3), repeated ids" : "Embedding(5, 3), repeated ids",
         false, [scaled](const LayerCheckOptions& o) {
           Generator g(o.seed);
           auto m = prepare(std::make_shared<Embedding>(5, 3, g, scaled), g);
           const Tensor ids = from_vector<int64_t>({0, 4, 4, 2, 0, 1}, {2, 3});
           return with_params([m, ids](Ins) { return m->forward(ids); }, {}, m, "");
         }});
  L.push_back(
      {"layernorm", "LayerNorm(5, eps 1e-3) on x (2, 3, 5)", false, [](const LayerCheckOptions& o) {
         Generator g(o.seed);
         auto m = prepare(std::make_shared<LayerNorm>(5, 1e-3), g);
         return with_params([m](Ins in) { return m->forward(in[0]); },
                            {leaf({2, 3, 5}, g).set_name("x")}, m, "");
       }});
  for (Activation a : {Activation::relu, Activation::gelu}) {
    const bool relu = a == Activation::relu;
    L.push_back(
        {relu ? "ffn_relu" : "ffn_gelu",
         relu ? "position-wise FFN 4 -> 7 -> 4, ReLU" : "position-wise FFN 4 -> 7 -> 4, GELU",
         false, [a](const LayerCheckOptions& o) {
           Generator g(o.seed);
           auto m = prepare(std::make_shared<PositionwiseFeedForward>(4, 7, g, a, 0.0, nullptr), g);
           return with_params([m](Ins in) { return m->forward(in[0]); },
                              {leaf({2, 3, 4}, g).set_name("x")}, m, "");
         }});
  }
  L.push_back({"sdpa",
               "scaled dot-product attention, q (2, 2, 3, 5), k (2, 2, 4, 5), v (2, 2, 4, 3)",
               false, [](const LayerCheckOptions& o) {
                 Generator g(o.seed);
                 const Tensor mask = attention_mask(o.mask, 3, 4, 2);
                 const AttentionScale s = o.scale;
                 return with_params(
                     [mask, s](Ins in) {
                       return scaled_dot_product_attention(in[0], in[1], in[2], mask, s);
                     },
                     {leaf({2, 2, 3, 5}, g).set_name("q"), leaf({2, 2, 4, 5}, g).set_name("k"),
                      leaf({2, 2, 4, 3}, g).set_name("v")},
                     nullptr, "");
               }});
  L.push_back({"sdpa_weights", "the attention weights output of SDPA, q (3, 5), k (4, 5)", false,
               [](const LayerCheckOptions& o) {
                 Generator g(o.seed);
                 const Tensor mask = has_causal(o.mask) ? causal_mask(3, 4) : Tensor();
                 const AttentionScale s = o.scale;
                 return with_params(
                     [mask, s](Ins in) {
                       Var w;
                       scaled_dot_product_attention(in[0], in[1], in[2], mask, s, &w);
                       return w;
                     },
                     {leaf({3, 5}, g).set_name("q"), leaf({4, 5}, g).set_name("k"),
                      leaf({4, 2}, g).set_name("v")},
                     nullptr, "");
               }});
  L.push_back({"mha_self", "multi-head self-attention, d_model 6, 2 heads, x (2, 4, 6)", false,
               [](const LayerCheckOptions& o) {
                 Generator g(o.seed);
                 auto m = prepare(std::make_shared<MultiHeadAttention>(6, 2, g, true, o.scale), g);
                 const Tensor mask = attention_mask(o.mask, 4, 4, 3);
                 return with_params(
                     [m, mask](Ins in) { return m->forward(in[0], in[0], in[0], mask); },
                     {leaf({2, 4, 6}, g).set_name("x")}, m, "");
               }});
  L.push_back({"mha_cross", "multi-head cross-attention, d_model 6, 2 heads, 3 queries over 5 keys",
               false, [](const LayerCheckOptions& o) {
                 Generator g(o.seed);
                 auto m = prepare(std::make_shared<MultiHeadAttention>(6, 2, g, true, o.scale), g);
                 const Tensor mask = attention_mask(o.mask, 3, 5, 2);
                 return with_params(
                     [m, mask](Ins in) { return m->forward(in[0], in[1], in[1], mask); },
                     {leaf({2, 3, 6}, g).set_name("query"), leaf({2, 5, 6}, g).set_name("memory")},
                     m, "");
               }});
  L.push_back({"pos_sinusoidal", "sinusoidal positional encoding added at offset 5", false,
               [](const LayerCheckOptions& o) {
                 Generator g(o.seed);
                 auto m = std::make_shared<PositionalEncoding>(PositionKind::sinusoidal, 4, 0, g,
                                                               0.0, nullptr);
                 return with_params([m](Ins in) { return m->forward(in[0], 5); },
                                    {leaf({2, 3, 4}, g).set_name("x")}, m, "");
               }});
  L.push_back(
      {"pos_learned", "learned positional encoding (table 6 x 4) at offset 2", false,
       [](const LayerCheckOptions& o) {
         Generator g(o.seed);
         auto m = prepare(
             std::make_shared<PositionalEncoding>(PositionKind::learned, 4, 6, g, 0.0, nullptr), g);
         return with_params([m](Ins in) { return m->forward(in[0], 2); },
                            {leaf({2, 3, 4}, g).set_name("x")}, m, "");
       }});
  add_variant_layers(L);
  for (bool nf : {false, true}) {
    const std::string ln = nf ? "pre_ln" : "post_ln", what = nf ? "pre-LN" : "post-LN";
    L.push_back({"encoder_block_" + ln,
                 "Transformer encoder block, " + what + ", d_model 6, 2 heads", false,
                 [nf](const LayerCheckOptions& o) { return encoder_block(o, nf); }});
    L.push_back({"decoder_block_" + ln,
                 "Transformer decoder block, " + what + ", self + cross-attention", false,
                 [nf](const LayerCheckOptions& o) { return decoder_block(o, nf); }});
  }
  for (bool nf : {false, true})
    L.push_back({nf ? "seq2seq_pre_ln" : "seq2seq_post_ln",
                 std::string("a 1+1 layer Seq2Seq, ") + (nf ? "pre-LN" : "post-LN") +
                     ", through cross-entropy",
                 false, [nf](const LayerCheckOptions& o) {
                   return model_gradcheck_problem(tiny_model(nf), o);
                 }});
  add_sequence_layers(L);
  add_recurrent_seq2seq_layers(L);
  L.push_back({"cross_entropy", "cross-entropy, label smoothing 0.1, one ignored target", false,
               [](const LayerCheckOptions& o) {
                 Generator g(o.seed);
                 const Tensor t = from_vector<int64_t>({2, 0, 3, 3, 1, 2}, {6});  // 3 is ignored
                 Var logits(uniform({6, 4}, -3, 3, g, DType::f64), true);
                 logits.set_name("logits");
                 return with_params([t](Ins in) { return ag::cross_entropy(in[0], t, 3, 0.1); },
                                    {logits}, nullptr, "");
               }});
  return L;
}

}  // namespace

Tensor valid_mask(const std::vector<int64_t>& lens, int64_t n) {
  Tensor m = zeros({static_cast<int64_t>(lens.size()), n}, DType::b8);
  uint8_t* p = m.data<uint8_t>();
  for (size_t b = 0; b < lens.size(); ++b)
    for (int64_t j = 0; j < std::min(lens[b], n); ++j) p[static_cast<int64_t>(b) * n + j] = 1;
  return m;
}

std::vector<Var> with_parameters(std::vector<Var> inputs, const Module* m,
                                 const std::string& prefix) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].name().empty()) inputs[i].set_name("input " + std::to_string(i));
  if (m)
    for (const auto& [name, param] : m->named_parameters()) {
      Var v = param;
      v.set_name(prefix + name);
      inputs.push_back(v);
    }
  return inputs;
}

GradcheckProblem model_gradcheck_problem(ModelConfig m, const LayerCheckOptions& o) {
  if (m.src_vocab == 0) m.src_vocab = 11;
  if (m.tgt_vocab == 0) m.tgt_vocab = 11;
  if (!o.scale.is_default()) m.attention_scale = o.scale;
  m.validate();
  Generator g(o.seed);
  auto model = prepare(std::shared_ptr<EncoderDecoder>(make_encoder_decoder(m, g)),
                       g);  // eval(): dropout off
  const bool pad = has_padding(o.mask);
  // sources of lengths 4 and 2 (or 4 and 4), targets of 3 and 2 (or 3 and 3)
  const Tensor src = from_vector<int64_t>({4, 5, 6, 7, 8, 9, pad ? 0 : 5, pad ? 0 : 6}, {2, 4});
  const Tensor tgt_in = from_vector<int64_t>({1, 4, 5, 1, 6, pad ? 0 : 7}, {2, 3});
  const Tensor tgt_out = from_vector<int64_t>({4, 5, 2, 6, 2, pad ? -100 : 2}, {6});
  const Tensor sv = valid_mask({4, pad ? 2 : 4}, 4), tv = valid_mask({3, pad ? 2 : 3}, 3);
  const int64_t v = m.tgt_vocab;
  for (int64_t id : to_vector<int64_t>(src))
    QKV_CHECK(id < m.src_vocab, "gradcheck", "the model's vocabulary is too small (", m.src_vocab,
              ")");
  QKV_CHECK(v > 7, "gradcheck", "the model's target vocabulary is too small (", v, ")");
  return with_params(
      [model, src, tgt_in, tgt_out, sv, tv, v](Ins) {
        const Var logits = model->forward(src, tgt_in, sv, tv);
        return ag::cross_entropy(ag::reshape(logits, {6, v}), tgt_out, -100, 0.1);
      },
      {}, model, "");
}

namespace {
std::vector<GradcheckLayer>& registry() {
  static std::vector<GradcheckLayer> layers = make_layers();
  return layers;
}
}  // namespace

const std::vector<GradcheckLayer>& gradcheck_layers() { return registry(); }

void register_gradcheck_layer(GradcheckLayer layer) {
  for (const GradcheckLayer& l : registry())
    QKV_CHECK(l.name != layer.name, "gradcheck", "a layer named '", layer.name, "' exists");
  registry().push_back(std::move(layer));
}

const GradcheckLayer& find_gradcheck_layer(const std::string& name) {
  std::string names;
  for (const GradcheckLayer& l : gradcheck_layers()) {
    if (l.name == name) return l;
    names += (names.empty() ? "" : ", ") + l.name;
  }
  throw Error(cat("gradcheck: no layer '", name, "'; the layers are: ", names));
}

std::vector<GradcheckRow> run_gradcheck(const std::string& layer, const GradcheckProblem& p) {
  // A tiny model called thousands of times: one thread avoids a parallel region per small op.
  const int prev = get_num_threads();
  set_num_threads(1);
  ag::GradcheckReport r;
  try {
    r = ag::gradcheck(p.f, p.inputs);
  } catch (...) {
    set_num_threads(prev);
    throw;
  }
  set_num_threads(prev);
  std::vector<GradcheckRow> rows;
  for (const ag::InputCheck& c : r.inputs)
    rows.push_back(
        {layer, c.name, c.checked, c.directional, c.max_abs_err, c.max_rel_err, c.passed});
  return rows;
}

}  // namespace qkv::nn
