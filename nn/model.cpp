#include "nn/model.hpp"

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

}  // namespace qkv::nn
