#include "nn/model.hpp"

#include "nn/hooks.hpp"
#include "nn/layers.hpp"
#include "nn/transformer.hpp"

namespace qkv::nn {

std::string Model::scoped(const std::string& name) const {
  return scope_.empty() ? name : scope_ + "." + name;
}

std::vector<std::pair<std::string, Var>> Model::checkpoint_parameters() const {
  std::vector<std::pair<std::string, Var>> out = named_parameters();
  for (auto& [name, p] : out) name = scoped(name);
  return out;
}

NamedTensors Model::checkpoint_state() const {
  NamedTensors out = state_dict();
  for (auto& [name, t] : out) name = scoped(name);
  return out;
}

void Model::load_checkpoint_state(const NamedTensors& state) {
  if (scope_.empty()) return load_state_dict(state);
  const std::string prefix = scope_ + ".";
  NamedTensors mine;
  mine.reserve(state.size());
  for (const auto& [name, t] : state)  // an unscoped name stays as is: load_state_dict names it
    mine.emplace_back(name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name, t);
  load_state_dict(mine);
}

Var Model::forward_loss(const Tensor& src, const Tensor& tgt_in, const Tensor& src_valid,
                        const Tensor& tgt_valid, const Tensor& tgt_out, int64_t ignore_index,
                        double label_smoothing) const {
  const OutputLayer out = output_layer();
  // The logits are needed as themselves: hooked, or soft-capped.
  if (out.softcap > 0 || (hooks_active() && hook_requested("logits"))) {
    const Var logits = forward(src, tgt_in, src_valid, tgt_valid);
    return ag::cross_entropy(ag::reshape(logits, {-1, logits.size(-1)}), tgt_out.flatten(),
                             ignore_index, label_smoothing);
  }
  const Var h = features(src, tgt_in, src_valid, tgt_valid);
  return ag::linear_cross_entropy(h, out.weight, out.bias, tgt_out.flatten(), ignore_index,
                                  label_smoothing);
}

const Linear& Model::W_O(const AttentionSite& site, int64_t layer) const {
  QKV_CHECK(layer >= 0 && layer < site.layers, "W_O", "layer ", layer, " of the ", site.name,
            " attention, which has layers 0..", site.layers - 1);
  return *attention_of(site, layer).w_o;
}

Var Model::pool(const Var& h, const Tensor&) const { return h; }

Var Model::read_out(const Var& resid, const Tensor& valid) const {
  const Stream s = output_stream();
  const OutputLayer out = output_layer();
  const Var h = pool(s.final_norm ? s.final_norm->forward(resid) : resid, valid);
  return soft_cap(ag::linear(h, out.weight, out.bias), out.softcap);
}

}  // namespace qkv::nn
