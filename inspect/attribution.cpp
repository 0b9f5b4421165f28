// Direct logit attribution (inspect/attribution.hpp) from captured activations and the model's
// typed read-outs (nn::Model: its attention sites, W_O, output stream, final norm, pooling and
// output layer): no parameter is found by its name and no family is asked for.
#include "inspect/attribution.hpp"

#include <cmath>

#include "core/error.hpp"
#include "nn/layers.hpp"
#include "nn/model.hpp"
#include "run/inference.hpp"

namespace qkv::inspect {

namespace {

Tensor f64(const Tensor& t) { return t.to(DType::f64).contiguous(); }

// The final norm with its scale frozen at the value the whole stream x (n, d) gave it, at every
// position: part (n, d) -> (part - mean) / s * g (LayerNorm) or part / s * g (RMSNorm).
struct FrozenNorm {
  Tensor gain;   // (d) float64
  Tensor scale;  // (n, 1): s of each position
  bool centre = true;
  Tensor bias;  // (d) float64, or undefined (RMSNorm)

  FrozenNorm(const nn::Norm& norm, const Tensor& x) {
    double eps = 0;
    if (const auto* ln = dynamic_cast<const nn::LayerNorm*>(&norm)) {
      gain = f64(ln->weight.data()), eps = ln->eps;
      if (ln->bias.defined()) bias = f64(ln->bias.data());
    } else if (const auto* rms = dynamic_cast<const nn::RMSNorm*>(&norm)) {
      gain = f64(rms->weight.data()), eps = rms->eps, centre = false;
    } else {
      throw Error("lens --target: direct logit attribution knows LayerNorm and RMSNorm only");
    }
    const Tensor c = centre ? sub(x, mean(x, {1}, true)) : x;
    scale = sqrt(add(mean(mul(c, c), {1}, true), eps));  // (n, 1)
  }
  Tensor operator()(const Tensor& part) const {  // (n, d) -> (n, d)
    const Tensor c = centre ? sub(part, mean(part, {1}, true)) : part;
    return mul(div(c, scale), gain);
  }
};

}  // namespace

Attribution direct_logit_attribution(const run::Inference& inf, const data::Ids& input,
                                     int64_t target) {
  const nn::Model& model = inf.model();
  QKV_CHECK(inf.run().config.model.norm_first, "lens --target",
            "direct logit attribution needs a pre-LN model (model.norm_first = true): in this "
            "post-LN model a norm follows every residual add, so the last block's output is no "
            "sum of the heads' and MLPs' outputs; the logit lens (without --target) still applies");
  const nn::Model::OutputLayer out = model.output_layer();
  QKV_CHECK(out.softcap == 0, "lens --target",
            "direct logit attribution needs linear logits; model.logit_softcap is set");
  const nn::Model::Stream stream = model.output_stream();
  QKV_CHECK(stream.final_norm != nullptr, "lens --target",
            "direct logit attribution needs the final norm of a pre-LN model");
  const run::Inspection in = inf.inspect(input);
  nn::Hooks h;  // a layer inside the caller's (an ablation stays in place)
  h.capture = nn::names_matching({stream.blocks + "*"});
  const Tensor logits = inf.logits(input, in.tgt_in, &h);
  const int64_t t = logits.size(0) - 1;  // the last row the output layer reads
  Attribution a;
  a.target = inf.output_labels({target})[0];
  a.logit = f64(logits.select(0, t)).data<double>()[target];
  const auto captured = [&](const std::string& point) {  // (1, n, d) -> (n, d) float64
    return f64(h.cache.at(point).data().select(0, 0));
  };
  const Tensor u = f64(out.weight.data().select(0, target));  // (d): the target's row
  const FrozenNorm norm(*stream.final_norm,
                        captured(stream.blocks + std::to_string(stream.layers - 1) + ".resid_post"));
  // A part (n, d) of the stream -> its share of the target's logit: normed with the frozen
  // scale, pooled as the model pools (every position, or a classifier's one), at row t.
  const auto share = [&](const Tensor& part) {
    const ag::NoGrad no_grad;
    const Tensor pooled = model.pool(ag::Var(norm(part).unsqueeze(0)), Tensor()).data();
    return sum(mul(pooled.select(0, 0).select(0, t), u)).item();
  };
  const int64_t n = h.cache.at(stream.blocks + "0.resid_pre").size(1);
  const auto everywhere = [&](const Tensor& bias) {  // (d) -> (n, d): added at every position
    return add(zeros({n, bias.size(0)}, DType::f64), f64(bias));
  };
  a.parts.push_back({"embed", share(captured(stream.blocks + "0.resid_pre"))});
  std::vector<LogitPart> biases;
  for (int64_t l = 0; l < stream.layers; ++l) {
    for (const nn::AttentionSite& site : model.attention_sites()) {
      if (site.prefix != stream.blocks) continue;  // not in the stream read (an encoder's)
      const nn::Linear& w_o = model.W_O(site, l);
      const Tensor wo = f64(w_o.weight.data());                              // (d, d): out x in
      const Tensor z = f64(h.cache.at(site.z(l)).data().select(0, 0));      // (h, n, d_head)
      const int64_t dh = z.size(2);
      for (int64_t head = 0; head < site.heads; ++head) {
        // head's z (n, d_head) through its columns of W_O -> (n, d)
        const Tensor part = matmul(z.select(0, head), wo.narrow(1, head * dh, dh).t());
        a.parts.push_back({site.head_name(l, head), share(part)});
      }
      if (w_o.bias.defined())
        biases.push_back({site.point + "_bias." + std::to_string(l),
                          share(everywhere(w_o.bias.data()))});
    }
    const std::string mlp = stream.blocks + std::to_string(l) + ".mlp_out";
    if (h.cache.count(mlp)) a.parts.push_back({"mlp." + std::to_string(l), share(captured(mlp))});
  }
  if (norm.bias.defined()) biases.push_back({"norm_bias", sum(mul(norm.bias, u)).item()});
  if (out.bias.defined())
    biases.push_back({"output_bias", f64(out.bias.data()).data<double>()[target]});
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
