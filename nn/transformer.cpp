#include "nn/transformer.hpp"

#include <string>

#include "nn/hooks.hpp"

namespace qkv::nn {
namespace {

// The window applies to self-attention only: a cross-attention query has no position among
// the source's keys.
std::shared_ptr<MultiHeadAttention> make_attention(const BlockConfig& c, Generator& gen,
                                                   const std::shared_ptr<Generator>& dgen,
                                                   bool self) {
  auto a = std::make_shared<MultiHeadAttention>(c.d_model, c.heads, gen, c.bias, c.scale,
                                                c.attention_dropout, dgen, c.attention,
                                                self ? c.window : 0);
  if (c.qk_norm) a->use_qk_norm(c.layer_norm_eps);
  return a;
}

// One residual sublayer around f: pre-LN x + f(norm(x)); post-LN norm(x + f(x)), the add and
// the norm in one pass.
template <class F>
Var residual(const Var& x, const Norm& norm, bool norm_first, const F& f) {
  return norm_first ? ag::add(x, f(norm.forward(x))) : norm.forward_add(x, f(x));
}

// A pre-LN block's last add, x + a, and the norm after it (the next block's first, or the
// stack's final norm) in one pass when there is one: then *next_h receives next(x + a).
Var last_add(const Var& x, const Var& a, const Norm* next, Var* next_h) {
  if (!next) return ag::add(x, a);
  Var s;
  *next_h = next->forward_add(x, a, &s);
  return s;
}

// Whether a pre-LN stack may fuse its adds with the norms after them: not while hooks are in
// scope, which may sit between (resid_mid, resid_post, resid_pre).
bool fuse_pre_ln(bool norm_first) { return norm_first && !hooks_active(); }

}  // namespace

Var cached_self_attention(const MultiHeadAttention& attn, const Var& h, Var& k_cache,
                          Var& v_cache) {
  const int64_t t = k_cache.defined() ? k_cache.size(2) : 0,
                n = h.size(1);  // t: first new position
  const Var k = attn.project_key(h, t), v = attn.project_value(h);
  k_cache = k_cache.defined() ? ag::concat({k_cache, k}, 2) : k;
  v_cache = v_cache.defined() ? ag::concat({v_cache, v}, 2) : v;
  return attn.attend(h, k_cache, v_cache, n > 1 ? causal_mask(n, t + n) : Tensor(), t);
}

// ------------------------------------------------------------------ encoder block

TransformerEncoderBlock::TransformerEncoderBlock(const BlockConfig& c, Generator& gen,
                                                 std::shared_ptr<Generator> dgen)
    : norm_first(c.norm_first) {
  self_attn = register_module("self_attn", make_attention(c, gen, dgen, true));
  self_attn->use_positions(c.position, c.relative_clip);
  if (!c.attn_only)
    ffn = register_module("ffn", std::make_shared<PositionwiseFeedForward>(
                                     c.d_model, c.d_ff, gen, c.activation, c.dropout, dgen));
  norm1 = register_module("norm1", make_norm(c.norm, c.d_model, c.layer_norm_eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(c.dropout, dgen));
  if (c.attn_only) return;
  norm2 = register_module("norm2", make_norm(c.norm, c.d_model, c.layer_norm_eps));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(c.dropout, dgen));
}

Var TransformerEncoderBlock::forward(const Var& x, const Tensor& mask) const {
  auto sa = [&](const Var& h) { return attention_sublayer(h, mask); };
  auto ff = [&](const Var& h) { return ffn_sublayer(h); };
  return sublayers(x, sa, ff);
}

Var TransformerEncoderBlock::forward_pre_ln(const Var& x, const Var& h, const Tensor& mask,
                                            const Norm* next, Var* next_h) const {
  auto sa = [&](const Var& a) { return attention_sublayer(a, mask); };
  auto ff = [&](const Var& a) { return ffn_sublayer(a); };
  return pre_ln(x, h, sa, ff, next, next_h);
}

Var TransformerEncoderBlock::attention_sublayer(const Var& h, const Tensor& mask) const {
  return dropout1->forward(hook_point(self_attn->forward(h, h, h, mask), hook_prefix, "attn_out"));
}

Var TransformerEncoderBlock::ffn_sublayer(const Var& h) const {
  return dropout2->forward(hook_point(ffn->forward(h), hook_prefix, "mlp_out"));
}

template <class SA, class FF>
Var TransformerEncoderBlock::pre_ln(const Var& x, const Var& h, const SA& sa, const FF& ff,
                                    const Norm* next, Var* next_h) const {
  if (!ffn) return last_add(x, sa(h), next, next_h);
  Var x1;
  const Var h2 = norm2->forward_add(x, sa(h), &x1);
  return last_add(x1, ff(h2), next, next_h);
}

Var TransformerEncoderBlock::forward_step(const Var& x, SelfAttentionCache& cache) const {
  auto sa = [&](const Var& h) {
    return hook_point(cached_self_attention(*self_attn, h, cache.k, cache.v), hook_prefix,
                      "attn_out");
  };
  auto ff = [&](const Var& h) { return hook_point(ffn->forward(h), hook_prefix, "mlp_out"); };
  return sublayers(x, sa, ff);
}

template <class SA, class FF>
Var TransformerEncoderBlock::sublayers(const Var& x, const SA& sa, const FF& ff) const {
  const Var x0 = hook_point(x, hook_prefix, "resid_pre");
  if (fuse_pre_ln(norm_first)) return pre_ln(x0, norm1->forward(x0), sa, ff, nullptr, nullptr);
  // Attention alone: its sublayer's output is the block's (no resid_mid between sublayers).
  if (!ffn) return hook_point(residual(x0, *norm1, norm_first, sa), hook_prefix, "resid_post");
  const Var x1 = hook_point(residual(x0, *norm1, norm_first, sa), hook_prefix, "resid_mid");
  return hook_point(residual(x1, *norm2, norm_first, ff), hook_prefix, "resid_post");
}

void TransformerEncoderBlock::name_hooks(const std::string& prefix) {
  hook_prefix = prefix;
  self_attn->hook_prefix = prefix + "attn.";
  if (ffn) ffn->hook_prefix = prefix + "mlp.";
}

void TransformerEncoderBlock::list_hooks(std::vector<std::string>& out) const {
  out.push_back(hook_prefix + "resid_pre");
  self_attn->list_hooks(out);
  out.push_back(hook_prefix + "attn_out");
  if (ffn) {
    out.push_back(hook_prefix + "resid_mid");
    ffn->list_hooks(out);
    out.push_back(hook_prefix + "mlp_out");
  }
  out.push_back(hook_prefix + "resid_post");
}

// ------------------------------------------------------------------ decoder block

TransformerDecoderBlock::TransformerDecoderBlock(const BlockConfig& c, Generator& gen,
                                                 std::shared_ptr<Generator> dgen)
    : norm_first(c.norm_first) {
  self_attn = register_module("self_attn", make_attention(c, gen, dgen, true));
  self_attn->use_positions(c.position, c.relative_clip);
  cross_attn = register_module("cross_attn", make_attention(c, gen, dgen, false));
  if (!c.attn_only)
    ffn = register_module("ffn", std::make_shared<PositionwiseFeedForward>(
                                     c.d_model, c.d_ff, gen, c.activation, c.dropout, dgen));
  norm1 = register_module("norm1", make_norm(c.norm, c.d_model, c.layer_norm_eps));
  norm2 = register_module("norm2", make_norm(c.norm, c.d_model, c.layer_norm_eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(c.dropout, dgen));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(c.dropout, dgen));
  if (c.attn_only) return;
  norm3 = register_module("norm3", make_norm(c.norm, c.d_model, c.layer_norm_eps));
  dropout3 = register_module("dropout3", std::make_shared<Dropout>(c.dropout, dgen));
}

Var TransformerDecoderBlock::forward(const Var& x, const Var& memory, const Tensor& self_mask,
                                     const Tensor& cross_mask) const {
  auto sa = [&](const Var& h) { return self_sublayer(h, self_mask); };
  auto ca = [&](const Var& h) { return cross_sublayer(h, memory, cross_mask); };
  auto ff = [&](const Var& h) { return ffn_sublayer(h); };
  return sublayers(x, sa, ca, ff);
}

Var TransformerDecoderBlock::forward_pre_ln(const Var& x, const Var& h, const Var& memory,
                                            const Tensor& self_mask, const Tensor& cross_mask,
                                            const Norm* next, Var* next_h) const {
  auto sa = [&](const Var& a) { return self_sublayer(a, self_mask); };
  auto ca = [&](const Var& a) { return cross_sublayer(a, memory, cross_mask); };
  auto ff = [&](const Var& a) { return ffn_sublayer(a); };
  return pre_ln(x, h, sa, ca, ff, next, next_h);
}

Var TransformerDecoderBlock::self_sublayer(const Var& h, const Tensor& mask) const {
  return dropout1->forward(hook_point(self_attn->forward(h, h, h, mask), hook_prefix, "attn_out"));
}

Var TransformerDecoderBlock::cross_sublayer(const Var& h, const Var& memory,
                                            const Tensor& mask) const {
  return dropout2->forward(
      hook_point(cross_attn->forward(h, memory, memory, mask), hook_prefix, "cross_out"));
}

Var TransformerDecoderBlock::ffn_sublayer(const Var& h) const {
  return dropout3->forward(hook_point(ffn->forward(h), hook_prefix, "mlp_out"));
}

template <class SA, class CA, class FF>
Var TransformerDecoderBlock::pre_ln(const Var& x, const Var& h, const SA& sa, const CA& ca,
                                    const FF& ff, const Norm* next, Var* next_h) const {
  Var x1;
  const Var h2 = norm2->forward_add(x, sa(h), &x1);
  if (!ffn) return last_add(x1, ca(h2), next, next_h);
  Var x2;
  const Var h3 = norm3->forward_add(x1, ca(h2), &x2);
  return last_add(x2, ff(h3), next, next_h);
}

Var TransformerDecoderBlock::forward_step(const Var& x, const Var& memory, const Tensor& cross_mask,
                                          DecoderBlockCache& cache) const {
  auto sa = [&](const Var& h) {
    return hook_point(cached_self_attention(*self_attn, h, cache.self_k, cache.self_v), hook_prefix,
                      "attn_out");
  };
  auto ca = [&](const Var& h) {
    if (!cache.cross_k.defined()) {
      cache.cross_k = cross_attn->project_key(memory);
      cache.cross_v = cross_attn->project_value(memory);
    }
    return hook_point(cross_attn->attend(h, cache.cross_k, cache.cross_v, cross_mask), hook_prefix,
                      "cross_out");
  };
  auto ff = [&](const Var& h) { return hook_point(ffn->forward(h), hook_prefix, "mlp_out"); };
  return sublayers(x, sa, ca, ff);
}

template <class SA, class CA, class FF>
Var TransformerDecoderBlock::sublayers(const Var& x, const SA& sa, const CA& ca,
                                       const FF& ff) const {
  const Var x0 = hook_point(x, hook_prefix, "resid_pre");
  if (fuse_pre_ln(norm_first)) return pre_ln(x0, norm1->forward(x0), sa, ca, ff, nullptr, nullptr);
  const Var x1 = hook_point(residual(x0, *norm1, norm_first, sa), hook_prefix, "resid_mid");
  // Attention alone: cross-attention's sublayer output is the block's.
  if (!ffn) return hook_point(residual(x1, *norm2, norm_first, ca), hook_prefix, "resid_post");
  const Var x2 = hook_point(residual(x1, *norm2, norm_first, ca), hook_prefix, "resid_cross");
  return hook_point(residual(x2, *norm3, norm_first, ff), hook_prefix, "resid_post");
}

void TransformerDecoderBlock::name_hooks(const std::string& prefix) {
  hook_prefix = prefix;
  self_attn->hook_prefix = prefix + "attn.";
  cross_attn->hook_prefix = prefix + "cross.";
  if (ffn) ffn->hook_prefix = prefix + "mlp.";
}

void TransformerDecoderBlock::list_hooks(std::vector<std::string>& out) const {
  out.push_back(hook_prefix + "resid_pre");
  self_attn->list_hooks(out);
  out.push_back(hook_prefix + "attn_out");
  out.push_back(hook_prefix + "resid_mid");
  cross_attn->list_hooks(out);
  out.push_back(hook_prefix + "cross_out");
  if (ffn) {
    out.push_back(hook_prefix + "resid_cross");
    ffn->list_hooks(out);
    out.push_back(hook_prefix + "mlp_out");
  }
  out.push_back(hook_prefix + "resid_post");
}

// ------------------------------------------------------------------ stacks

Encoder::Encoder(int64_t n, const BlockConfig& c, bool final_norm, Generator& gen,
                 std::shared_ptr<Generator> dgen) {
  QKV_CHECK(n >= 0, "Encoder", "negative layer count ", n);
  for (int64_t i = 0; i < n; ++i)
    layers.push_back(std::make_shared<TransformerEncoderBlock>(c, gen, dgen));
  register_module("layers", std::make_shared<ModuleList>(layers));
  if (final_norm) norm = register_module("norm", make_norm(c.norm, c.d_model, c.layer_norm_eps));
  name_hooks("");
}

void Encoder::name_hooks(const std::string& prefix) {
  hook_prefix = prefix;
  for (size_t i = 0; i < layers.size(); ++i)
    layers[i]->name_hooks(prefix + "blocks." + std::to_string(i) + ".");
}

void Encoder::list_hooks(std::vector<std::string>& out) const {
  for (const auto& layer : layers) layer->list_hooks(out);
  if (norm) out.push_back(hook_prefix + "final_norm");
}

Var Encoder::forward(const Var& x, const Tensor& mask) const {
  if (!layers.empty() && fuse_pre_ln(layers[0]->norm_first)) {
    // each block's last add fused with the next norm: the next block's first, or the final one
    Var s = x, h = layers[0]->norm1->forward(x);
    for (size_t i = 0; i < layers.size(); ++i) {
      ag::ModuleScope scope("layers." + std::to_string(i));
      const Norm* next = i + 1 < layers.size() ? layers[i + 1]->norm1.get() : norm.get();
      s = layers[i]->forward_pre_ln(s, h, mask, next, &h);
    }
    return norm ? h : s;
  }
  Var h = x;
  for (size_t i = 0; i < layers.size(); ++i) {
    ag::ModuleScope scope("layers." + std::to_string(i));
    h = layers[i]->forward(h, mask);
  }
  return norm ? hook_point(norm->forward(h), hook_prefix, "final_norm") : h;
}

Var Encoder::forward_step(const Var& x, std::vector<SelfAttentionCache>& cache) const {
  if (cache.size() != layers.size()) cache.resize(layers.size());
  Var h = x;
  for (size_t i = 0; i < layers.size(); ++i) h = layers[i]->forward_step(h, cache[i]);
  return norm ? hook_point(norm->forward(h), hook_prefix, "final_norm") : h;
}

Decoder::Decoder(int64_t n, const BlockConfig& c, bool final_norm, Generator& gen,
                 std::shared_ptr<Generator> dgen) {
  QKV_CHECK(n >= 0, "Decoder", "negative layer count ", n);
  for (int64_t i = 0; i < n; ++i)
    layers.push_back(std::make_shared<TransformerDecoderBlock>(c, gen, dgen));
  register_module("layers", std::make_shared<ModuleList>(layers));
  if (final_norm) norm = register_module("norm", make_norm(c.norm, c.d_model, c.layer_norm_eps));
  name_hooks("decoder.");
}

void Decoder::name_hooks(const std::string& prefix) {
  hook_prefix = prefix;
  for (size_t i = 0; i < layers.size(); ++i)
    layers[i]->name_hooks(prefix + "blocks." + std::to_string(i) + ".");
}

void Decoder::list_hooks(std::vector<std::string>& out) const {
  for (const auto& layer : layers) layer->list_hooks(out);
  if (norm) out.push_back(hook_prefix + "final_norm");
}

Var Decoder::forward(const Var& x, const Var& memory, const Tensor& self_mask,
                     const Tensor& cross_mask) const {
  if (!layers.empty() && fuse_pre_ln(layers[0]->norm_first)) {  // as Encoder::forward
    Var s = x, h = layers[0]->norm1->forward(x);
    for (size_t i = 0; i < layers.size(); ++i) {
      ag::ModuleScope scope("layers." + std::to_string(i));
      const Norm* next = i + 1 < layers.size() ? layers[i + 1]->norm1.get() : norm.get();
      s = layers[i]->forward_pre_ln(s, h, memory, self_mask, cross_mask, next, &h);
    }
    return norm ? h : s;
  }
  Var h = x;
  for (size_t i = 0; i < layers.size(); ++i) {
    ag::ModuleScope scope("layers." + std::to_string(i));
    h = layers[i]->forward(h, memory, self_mask, cross_mask);
  }
  return norm ? hook_point(norm->forward(h), hook_prefix, "final_norm") : h;
}

Var Decoder::forward_step(const Var& x, const Var& memory, const Tensor& cross_mask,
                          std::vector<DecoderBlockCache>& cache) const {
  if (cache.size() != layers.size()) cache.resize(layers.size());
  Var h = x;
  for (size_t i = 0; i < layers.size(); ++i)
    h = layers[i]->forward_step(h, memory, cross_mask, cache[i]);
  return norm ? hook_point(norm->forward(h), hook_prefix, "final_norm") : h;
}

}  // namespace qkv::nn
