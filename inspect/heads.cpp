// Heads by name and the hooks that remove or scale them (inspect/heads.hpp).
#include "inspect/heads.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "core/error.hpp"
#include "nn/model.hpp"
#include "run/inference.hpp"

namespace qkv::inspect {

std::vector<Attention> attentions_of(const nn::Model& model, int64_t heads) {
  std::vector<Attention> sites = model.attention_sites();
  for (const Attention& a : sites)
    QKV_CHECK(a.heads == heads, "heads", "the model's ", a.name, " attention has ", a.heads,
              " heads per layer, not ", heads);
  return sites;
}

std::vector<Attention> attentions_of(const run::Inference& inf) {
  return inf.model().attention_sites();
}

namespace {

// What a valid head looks like in this model, for messages: "0.0 .. 1.3" per attention.
std::string valid_heads(const std::vector<Attention>& attentions) {
  std::string s;
  for (const Attention& a : attentions)
    s += (s.empty() ? "" : ", ") + a.head_name(0, 0) + " .. " +
         a.head_name(a.layers - 1, a.heads - 1);
  return s;
}

// "encoder, decoder or cross": the sites' names, for messages.
std::string site_names(const std::vector<Attention>& attentions) {
  std::string s;
  for (size_t i = 0; i < attentions.size(); ++i)
    s += (i == 0 ? "" : i + 1 == attentions.size() ? " or " : ", ") + attentions[i].name;
  return s;
}

int64_t parse_index(const std::string& s, const std::string& whole, const char* op) {
  QKV_CHECK(!s.empty() && s.size() < 10 && std::all_of(s.begin(), s.end(), ::isdigit), op, "head '",
            whole, "': expected LAYER.HEAD, numbers from 0");
  return std::stoll(s);
}

HeadRef parse_head(const std::string& item, const std::vector<Attention>& attentions,
                   const char* op) {
  std::vector<std::string> parts;
  std::stringstream in(item);
  for (std::string p; std::getline(in, p, '.');) parts.push_back(p);
  // A model of one site names its heads without a prefix.
  const bool plain = attentions.size() == 1 && attentions[0].head_prefix().empty();
  const size_t want = plain ? 2 : 3;
  QKV_CHECK(parts.size() == want, op, "head '", item, "': expected ",
            plain ? "LAYER.HEAD (e.g. 0.1)"
                  : "ATTENTION.LAYER.HEAD (e.g. " + attentions.back().head_name(1, 0) + ")",
            "; this model's heads are ", valid_heads(attentions));
  const Attention* att = &attentions[0];  // copied into the HeadRef
  if (!plain) {
    auto it = std::find_if(attentions.begin(), attentions.end(),
                           [&](const Attention& a) { return a.name == parts[0]; });
    QKV_CHECK(it != attentions.end(), op, "head '", item, "': no attention '", parts[0], "' (",
              site_names(attentions), "); this model's heads are ", valid_heads(attentions));
    att = &*it;
  }
  const int64_t layer = parse_index(parts[want - 2], item, op),
                head = parse_index(parts[want - 1], item, op);
  if (layer >= att->layers || head >= att->heads)
    throw Error(std::string(op) + ": no head " + item + " (nearest: " +
                att->head_name(std::min(layer, att->layers - 1), std::min(head, att->heads - 1)) +
                "): layers 0.." + std::to_string(att->layers - 1) + ", heads 0.." +
                std::to_string(att->heads - 1));
  return {*att, layer, head};
}

// The heads of each z hook point, as a (1, h, 1, 1) float32 mask: 1 kept, 0 removed.
std::map<std::string, Tensor> removal_masks(const std::vector<HeadRef>& heads) {
  std::map<std::string, Tensor> keep;
  for (const HeadRef& h : heads) {
    const std::string z = h.attention.z(h.layer);
    if (!keep.count(z)) keep[z] = ones({1, h.attention.heads, 1, 1});
    keep[z].data<float>()[h.head] = 0;
  }
  return keep;
}

}  // namespace

std::vector<HeadRef> parse_heads(const std::string& spec, const std::vector<Attention>& attentions,
                                 const char* op) {
  std::vector<HeadRef> out;
  if (spec.empty()) return out;
  // Every comma separates two names: a leading, trailing or doubled one leaves an empty name
  // (getline would drop the trailing one and accept 'cross.0.1,').
  for (size_t at = 0, comma = 0; comma != std::string::npos; at = comma + 1) {
    comma = spec.find(',', at);
    const std::string item = spec.substr(at, comma == std::string::npos ? comma : comma - at);
    QKV_CHECK(!item.empty(), op, "an empty head name in '", spec, "'");
    const HeadRef h = parse_head(item, attentions, op);
    const bool seen = std::any_of(out.begin(), out.end(), [&](const HeadRef& o) {
      return o.attention.name == h.attention.name && o.layer == h.layer && o.head == h.head;
    });
    if (!seen) out.push_back(h);
  }
  return out;
}

void add_zero_ablation(nn::Hooks& hooks, const std::vector<HeadRef>& heads) {
  for (auto& [point, keep] : removal_masks(heads)) {
    const Tensor k = keep;
    hooks.add(point, [k](const ag::Var& z) {  // z: (B, h, n, d_head)
      return ag::mul(z, ag::Var(k.to(z.dtype())));
    });
  }
}

Ablation::Ablation(const run::Inference& inf, const std::string& spec, const char* op) {
  if (spec.empty()) return;
  const std::string where = std::string(op) + " --ablate";
  heads_ = parse_heads(spec, attentions_of(inf), where.c_str());
  add_zero_ablation(hooks_, heads_);
  scope_.emplace(hooks_);
}

MeanZ mean_z(const run::Inference& inf, const std::vector<Attention>& attentions,
             const std::string& split, int64_t max_batches) {
  nn::Hooks hooks;  // inside the caller's (an ablation stays in place)
  hooks.capture = nn::names_matching({"*.z"});
  MeanZ sums;
  std::map<std::string, double> counts;
  inf.for_each_batch(
      {.split = split, .max_batches = max_batches, .hooks = &hooks}, [&](const run::BatchPass& p) {
        for (const Attention& a : attentions)
          for (int64_t l = 0; l < a.layers; ++l) {
            const std::string point = a.z(l);
            const Tensor z = hooks.cache.at(point).data().to(DType::f32);
            const Tensor& valid = a.queries == nn::Side::input ? p.input_valid : p.output_valid;
            // valid (B, n) -> (B, 1, n, 1); z (B, h, n, d_head)
            const Tensor w = valid.to(DType::f32).reshape({valid.size(0), 1, valid.size(1), 1});
            const Tensor s = sum(mul(z, w), {0, 2}, true);  // (1, h, 1, d_head)
            sums[point] = sums.count(point) ? add(sums[point], s) : s;
            counts[point] += sum(valid.to(DType::f32)).item();
          }
      });
  for (auto& [point, s] : sums) s = div(s, std::max(1.0, counts[point]));
  return sums;
}

void add_mean_ablation(nn::Hooks& hooks, const std::vector<HeadRef>& heads, const MeanZ& means) {
  for (auto& [point, keep] : removal_masks(heads)) {
    const Tensor k = keep, mean = means.at(point);
    hooks.add(point, [k, mean](const ag::Var& z) {  // z: (B, h, n, d_head)
      const Tensor kz = k.to(z.dtype());
      // removed heads' slices: their mean; kept ones: z
      const Tensor fill = mul(sub(ones_like(kz), kz), mean.to(z.dtype()));  // (1, h, 1, d_head)
      return ag::add(ag::mul(z, ag::Var(kz)), ag::Var(fill));
    });
  }
}

std::map<std::string, ag::Var> add_head_masks(nn::Hooks& hooks,
                                              const std::vector<Attention>& attentions,
                                              DType dtype) {
  std::map<std::string, ag::Var> xi;
  for (const Attention& a : attentions)
    for (int64_t l = 0; l < a.layers; ++l) {
      ag::Var x(ones({1, a.heads, 1, 1}, dtype), true);
      xi[a.z(l)] = x;
      hooks.add(a.z(l), [x](const ag::Var& z) { return ag::mul(z, x); });
    }
  return xi;
}

}  // namespace qkv::inspect
