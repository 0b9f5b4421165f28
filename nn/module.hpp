// Module: parameters and submodules under hierarchical dotted names.
//
// A module registers its parameters (Vars that require grad) and its children in its
// constructor; named_parameters() walks them in registration order, giving names such as
// "encoder.layers.0.self_attn.w_q.weight". Modules are held by shared_ptr; a parameter Var is
// a shared handle, so the member a layer uses and the entry in the registry are one tensor.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/ops.hpp"

namespace qkv::nn {

using ag::Var;
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  virtual ~Module() = default;

  std::vector<std::pair<std::string, Var>> named_parameters() const;
  std::vector<Var> parameters() const;
  int64_t parameter_count() const;
  void zero_grad();

  // Training mode switches dropout on; eval() switches it off. Applies to all children.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // The parameters' data under their names (handles, not copies).
  NamedTensors state_dict() const;
  // Copies values in. strict: a missing or unexpected name is an error; a shape or dtype
  // mismatch is always an error. The error names the tensor.
  void load_state_dict(const NamedTensors& state, bool strict = true);
  // Converts every parameter to dt in place (float64 for gradcheck).
  void to(DType dt);

 protected:
  Var register_parameter(const std::string& name, const Tensor& init);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    children_.emplace_back(name, m);
    return m;
  }

 private:
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Var>>& out) const;
  std::vector<std::pair<std::string, Var>> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// Children named "0", "1", ... (the layers of a stack).
class ModuleList : public Module {
 public:
  template <class M>
  explicit ModuleList(const std::vector<std::shared_ptr<M>>& modules) {
    for (size_t i = 0; i < modules.size(); ++i) register_module(std::to_string(i), modules[i]);
  }
};

}  // namespace qkv::nn
