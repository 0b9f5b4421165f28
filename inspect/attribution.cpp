// Direct logit attribution (inspect/attribution.hpp) from captured activations and the model's
// typed read-outs (nn::Model: its attention sites, W_O, output stream, final norm, pooling and
// output layer): no parameter is found by its name and no family is asked for.
#include "inspect/attribution.hpp"

#include <cmath>
#include <functional>
#include <tuple>

#include "core/error.hpp"
#include "nn/layers.hpp"
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

// The final norm at one position, its scale frozen at the value the whole stream x (d) there
// gave it, times the target's row u: part -> (part - mean) / s * g . u (LayerNorm) or
// part / s * g . u (RMSNorm).
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

// The norm's gain, bias (undefined: none), eps and whether it centres: LayerNorm or RMSNorm.
struct NormParams {
  Vec gain;
  Tensor bias;
  double eps = 0;
  bool centre = true;
};
NormParams params_of(const nn::Norm& norm) {
  if (const auto* ln = dynamic_cast<const nn::LayerNorm*>(&norm))
    return {row_of_tensor(ln->weight.data()), ln->bias.defined() ? ln->bias.data() : Tensor(),
            ln->eps, true};
  if (const auto* rms = dynamic_cast<const nn::RMSNorm*>(&norm))
    return {row_of_tensor(rms->weight.data()), Tensor(), rms->eps, false};
  throw Error("lens --target: direct logit attribution knows LayerNorm and RMSNorm only");
}

FrozenNorm frozen_at(const NormParams& n, const Vec& x, const Vec& u) {
  FrozenNorm f{Vec(u.size()), 0, n.centre};
  double mean = 0, sq = 0;
  for (double v : x) mean += v / static_cast<double>(x.size());
  for (double v : x)
    sq += (n.centre ? (v - mean) * (v - mean) : v * v) / static_cast<double>(x.size());
  f.s = std::sqrt(sq + n.eps);
  for (size_t i = 0; i < u.size(); ++i) f.gain_times_u[i] = n.gain[i] * u[i];
  return f;
}

}  // namespace

std::vector<double> read_weights(const nn::Model& model, int64_t n, int64_t t) {
  const ag::NoGrad no_grad;
  Tensor eye = zeros({1, n, n}, DType::f64);
  for (int64_t p = 0; p < n; ++p) eye.data<double>()[p * n + p] = 1;
  return row_of_tensor(model.pool(ag::Var(eye), Tensor()).data().select(0, 0).select(0, t));
}

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
  const NormParams norm = params_of(*stream.final_norm);
  const run::Inspection in = inf.inspect(input);
  nn::Hooks h;  // a layer inside the caller's (an ablation stays in place)
  h.capture = nn::names_matching({stream.blocks + "*"});
  const Tensor logits = inf.logits(input, in.tgt_in, &h);
  const int64_t t = logits.size(0) - 1;  // the last row the output layer reads
  Attribution a;
  a.target = inf.output_labels({target})[0];
  a.logit = row_of_tensor(logits.select(0, t))[static_cast<size_t>(target)];
  const auto at = [&](const std::string& point, int64_t p) {  // (1, n, d) -> (d) at p
    return row_of_tensor(h.cache.at(point).data().select(0, 0).select(0, p));
  };
  const Vec u = row_of_tensor(out.weight.data().select(0, target));
  // The positions row t reads, each with its weight and its norm frozen at the stream there.
  const std::string last = stream.blocks + std::to_string(stream.layers - 1) + ".resid_post";
  const Vec weights = read_weights(model, h.cache.at(last).size(1), t);
  std::vector<std::tuple<int64_t, double, FrozenNorm>> reads;
  for (size_t p = 0; p < weights.size(); ++p)
    if (weights[p] != 0) {
      const auto pos = static_cast<int64_t>(p);
      reads.emplace_back(pos, weights[p], frozen_at(norm, at(last, pos), u));
    }
  // A part of the stream (its value at position p) -> its share of the target's logit.
  const auto share = [&](const std::function<Vec(int64_t p)>& part) {
    double sum = 0;
    for (const auto& [p, w, f] : reads) sum += w * f(part(p));
    return sum;
  };
  const auto captured = [&](const std::string& point) {
    return share([&](int64_t p) { return at(point, p); });
  };
  a.parts.push_back({"embed", captured(stream.blocks + "0.resid_pre")});
  std::vector<LogitPart> biases;
  for (int64_t l = 0; l < stream.layers; ++l) {
    for (const nn::AttentionSite& site : model.attention_sites()) {
      if (site.prefix != stream.blocks) continue;  // not in the stream read (an encoder's)
      const nn::Linear& w_o = model.W_O(site, l);
      const Tensor& wo = w_o.weight.data();  // (d, d): out x in
      const Vec w = row_of_tensor(wo);       // once per layer, every head reads it
      const Tensor z = h.cache.at(site.z(l)).data().select(0, 0).to(DType::f64);  // (h, n, dh)
      const int64_t dh = z.size(2), d_out = wo.size(0), d_in = wo.size(1);
      for (int64_t head = 0; head < site.heads; ++head) {
        // head's z at p through its columns of W_O -> (d)
        const auto part = [&](int64_t p) {
          const Vec zh = row_of_tensor(z.select(0, head).select(0, p));
          Vec o(static_cast<size_t>(d_out), 0.0);
          for (int64_t i = 0; i < d_out; ++i)
            for (int64_t j = 0; j < dh; ++j) o[i] += w[i * d_in + head * dh + j] * zh[j];
          return o;
        };
        a.parts.push_back({site.head_name(l, head), share(part)});
      }
      if (w_o.bias.defined()) {
        const Vec b = row_of_tensor(w_o.bias.data());
        biases.push_back(
            {site.point + "_bias." + std::to_string(l), share([&](int64_t) { return b; })});
      }
    }
    const std::string mlp = stream.blocks + std::to_string(l) + ".mlp_out";
    if (h.cache.count(mlp)) a.parts.push_back({"mlp." + std::to_string(l), captured(mlp)});
  }
  if (norm.bias.defined()) biases.push_back({"norm_bias", dot(row_of_tensor(norm.bias), u)});
  if (out.bias.defined())
    biases.push_back({"output_bias", row_of_tensor(out.bias.data())[static_cast<size_t>(target)]});
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
