// Direct logit attribution (inspect/attribution.hpp) from captured activations and the
// model's own parameters, found by their registered names.
#include "inspect/attribution.hpp"

#include <cmath>
#include <map>

#include "core/error.hpp"
#include "inspect/heads.hpp"
#include "nn/model.hpp"
#include "run/inference.hpp"

namespace qkv::inspect {

namespace {

using Vec = std::vector<double>;

Vec row_of_tensor(const Tensor& t) { return to_vector<double>(t.to(DType::f64).contiguous()); }

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// The frozen norm: part -> (part - mean) / s * g (LayerNorm) or part / s * g (RMSNorm).
struct FrozenNorm {
  Vec gain_times_u;  // g * u, elementwise
  double s = 1;
  bool centre = true;
  double operator()(const Vec& part) const {
    double mean = 0;
    if (centre)
      for (double v : part) mean += v / static_cast<double>(part.size());
    double out = 0;
    for (size_t i = 0; i < part.size(); ++i) out += (part[i] - mean) / s * gain_times_u[i];
    return out;
  }
};

}  // namespace

Attribution direct_logit_attribution(const run::Inference& inf, const data::Ids& input,
                                     int64_t target) {
  const nn::ModelConfig& mc = inf.run().config.model;
  QKV_CHECK(mc.norm_first, "lens --target",
            "direct logit attribution needs a pre-LN model (model.norm_first = true): in this "
            "post-LN model a norm follows every residual add, so the last block's output is no "
            "sum of the heads' and MLPs' outputs; the logit lens (without --target) still applies");
  QKV_CHECK(mc.logit_softcap == 0, "lens --target",
            "direct logit attribution needs linear logits; model.logit_softcap is set");
  std::map<std::string, ag::Var> params;
  for (auto& [name, v] : inf.model().named_parameters()) params[name] = v;
  const std::vector<Attention> atts = attentions_of(inf);
  const bool pairs = atts.size() > 1;
  const std::string stack = pairs ? "decoder." : "blocks.";  // module names of the output side
  const std::string hooks_prefix = pairs ? "decoder.blocks." : "blocks.";
  const int64_t layers = mc.decoder_layers;
  const std::string out_w = params.count("output.weight") ? "output.weight"
                            : pairs                       ? "tgt_embed.weight"
                                                          : "embed.weight";
  QKV_CHECK(params.count(out_w) && params.count(stack + "norm.weight"), "lens --target",
            "the model's output layer or final norm was not found by name");
  const run::Inspection in = inf.inspect(input);
  nn::Hooks h;  // a layer inside the caller's (an ablation stays in place)
  h.capture = nn::names_matching({hooks_prefix + "*"});
  const Tensor logits = inf.logits(input, in.tgt_in, &h);
  const int64_t t = logits.size(0) - 1;
  Attribution a;
  a.target = inf.output_labels({target})[0];
  a.logit = row_of_tensor(logits.select(0, t))[static_cast<size_t>(target)];
  const auto at_last = [&](const std::string& point) {  // (1, n, d) -> (d) at t
    return row_of_tensor(h.cache.at(point).data().select(0, 0).select(0, t));
  };
  // The norm, frozen at the stream's scale.
  const Vec x = at_last(hooks_prefix + std::to_string(layers - 1) + ".resid_post");
  const Vec u = row_of_tensor(params.at(out_w).data().select(0, target));
  const Vec g = row_of_tensor(params.at(stack + "norm.weight").data());
  const bool layernorm = params.count(stack + "norm.bias") > 0;
  FrozenNorm f{Vec(u.size()), 0, layernorm};
  double mean = 0, sq = 0;
  for (double v : x) mean += v / static_cast<double>(x.size());
  for (double v : x)
    sq += (layernorm ? (v - mean) * (v - mean) : v * v) / static_cast<double>(x.size());
  f.s = std::sqrt(sq + mc.layer_norm_eps);
  for (size_t i = 0; i < u.size(); ++i) f.gain_times_u[i] = g[i] * u[i];
  a.parts.push_back({"embed", f(at_last(hooks_prefix + "0.resid_pre"))});
  std::vector<LogitPart> biases;
  for (int64_t l = 0; l < layers; ++l) {
    for (const Attention& att : atts) {
      if (att.on_source) continue;
      const std::string module = stack + "layers." + std::to_string(l) +
                                 (att.cross ? ".cross_attn.w_o." : ".self_attn.w_o.");
      const Tensor wo = params.at(module + "weight").data().to(DType::f64);      // (d, d): out x in
      const Tensor z = h.cache.at(att.z(l)).data().select(0, 0).to(DType::f64);  // (h, n, dh)
      const int64_t dh = z.size(2);
      for (int64_t head = 0; head < att.heads; ++head) {
        const Vec zh = row_of_tensor(z.select(0, head).select(0, t));
        Vec out(static_cast<size_t>(wo.size(0)), 0.0);
        const Vec w = row_of_tensor(wo);
        for (int64_t i = 0; i < wo.size(0); ++i)
          for (int64_t j = 0; j < dh; ++j) out[i] += w[i * wo.size(1) + head * dh + j] * zh[j];
        a.parts.push_back({att.head_name(l, head), f(out)});
      }
      if (params.count(module + "bias"))
        biases.push_back({(att.cross ? "cross_bias." : "attn_bias.") + std::to_string(l),
                          f(row_of_tensor(params.at(module + "bias").data()))});
    }
    if (!mc.attn_only)
      a.parts.push_back(
          {"mlp." + std::to_string(l), f(at_last(hooks_prefix + std::to_string(l) + ".mlp_out"))});
  }
  if (layernorm)
    biases.push_back({"norm_bias", dot(row_of_tensor(params.at(stack + "norm.bias").data()), u)});
  if (params.count("output.bias"))
    biases.push_back({"output_bias",
                      row_of_tensor(params.at("output.bias").data())[static_cast<size_t>(target)]});
  a.parts.insert(a.parts.end(), biases.begin(), biases.end());
  return a;
}

int64_t output_token_id(const run::Inference& inf, const std::string& token, const char* op) {
  const data::Vocab& v = inf.run().data.tgt_vocab;
  for (int64_t i = 0; i < v.size(); ++i)
    if (v.token(i) == token || inf.output_labels({i})[0] == token) return i;
  throw Error(cat(op, ": '", token, "' is no token of the model's output (", v.size(),
                  " tokens; a space is shown and given as _)"));
}

}  // namespace qkv::inspect
