#include "nn/module.hpp"

#include <set>

namespace qkv::nn {

Var Module::register_parameter(const std::string& name, const Tensor& init) {
  Var p(init, true);
  p.set_name(name);
  params_.emplace_back(name, p);
  return p;
}

void Module::collect(const std::string& prefix,
                     std::vector<std::pair<std::string, Var>>& out) const {
  for (const auto& [name, p] : params_) out.emplace_back(prefix + name, p);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

std::vector<std::pair<std::string, Var>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Var>> out;
  collect("", out);
  return out;
}

std::vector<Var> Module::parameters() const {
  std::vector<Var> out;
  for (auto& [name, p] : named_parameters()) out.push_back(p);
  return out;
}

int64_t Module::parameter_count() const {
  int64_t n = 0;
  for (const Var& p : parameters()) n += p.numel();
  return n;
}

void Module::zero_grad() {
  for (Var p : parameters()) p.zero_grad();
}

void Module::train(bool on) {
  // Written only when it changes: a model in eval mode is read by passes on many threads (a
  // served checkpoint), and asking it for eval mode again must not be a write they race with.
  if (training_ != on) training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

NamedTensors Module::state_dict() const {
  NamedTensors out;
  for (const auto& [name, p] : named_parameters()) out.emplace_back(name, p.data());
  return out;
}

void Module::load_state_dict(const NamedTensors& state, bool strict) {
  std::map<std::string, const Tensor*> given;
  for (const auto& [name, t] : state) given[name] = &t;
  std::set<std::string> used;
  for (auto& [name, p] : named_parameters()) {
    auto it = given.find(name);
    if (it == given.end()) {
      QKV_CHECK(!strict, "load_state_dict", "missing tensor '", name, "' of shape ", p.shape());
      continue;
    }
    const Tensor& t = *it->second;
    QKV_CHECK(t.shape() == p.shape(), "load_state_dict", "tensor '", name, "' has shape ",
              t.shape(), ", the model expects ", p.shape());
    QKV_CHECK(t.dtype() == p.dtype(), "load_state_dict", "tensor '", name, "' is ",
              dtype_name(t.dtype()), ", the model expects ", dtype_name(p.dtype()));
    p.data().copy_(t);
    used.insert(name);
  }
  if (strict)
    for (const auto& [name, t] : state)
      QKV_CHECK(used.count(name), "load_state_dict", "unexpected tensor '", name, "' of shape ",
                t.shape());
}

void Module::to(DType dt) {
  for (auto& [name, p] : named_parameters()) {
    Var v = p;
    v.data() = v.data().to(dt);
  }
}

}  // namespace qkv::nn
