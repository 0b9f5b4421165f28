// Var: a Tensor that remembers how it was computed, so gradients can flow back through it.
//
// Every differentiable op (autograd/ops_*.cpp) computes its output Tensor and, when any input
// requires a gradient and recording is on, attaches a Node: the inputs plus a backward closure
// that maps the output's gradient to the inputs' gradients. Nodes are numbered in the order
// they are created; backward(loss) gathers the nodes reachable from loss and runs them in
// reverse creation order. That order is the tape.
//
// Ownership: a Var owns its Node, a Node owns its inputs. The graph lives exactly as long as
// the Vars computed from it; nothing is global, so two graphs (or two models, or two threads)
// never see each other. After backward() the closures are released (their saved tensors
// freed) unless retain_graph is set; backward through a released graph is an error.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace qkv::ag {

struct Node;

struct VarImpl {
  Tensor data;
  Tensor grad;  // accumulated by backward for leaves that require grad; undefined until then
  bool requires_grad = false;
  std::shared_ptr<Node> node;  // null for leaves and for results computed without recording
  std::string name;            // optional: parameter name for messages
};

class Var {
 public:
  Var() = default;
  // A leaf. requires_grad: backward accumulates into grad().
  explicit Var(Tensor data, bool requires_grad = false);

  bool defined() const { return impl_ != nullptr; }
  const Tensor& data() const { return impl_->data; }
  Tensor& data() { return impl_->data; }  // for optimizers: update parameters in place
  const Tensor& grad() const { return impl_->grad; }
  Tensor& grad() { return impl_->grad; }
  bool requires_grad() const { return impl_ && impl_->requires_grad; }
  Var& set_requires_grad(bool r);
  bool is_leaf() const { return !impl_->node; }
  void zero_grad() { impl_->grad = Tensor(); }
  const std::string& name() const { return impl_->name; }
  Var& set_name(std::string n);

  // Shorthands for the data's properties.
  const Shape& shape() const { return impl_->data.shape(); }
  int64_t size(int64_t d) const { return impl_->data.size(d); }
  int64_t dim() const { return impl_->data.dim(); }
  int64_t numel() const { return impl_->data.numel(); }
  DType dtype() const { return impl_->data.dtype(); }
  double item() const { return impl_->data.item(); }

  // A leaf sharing this Var's data, cut from the graph: no gradient flows through it.
  Var detach() const { return Var(impl_->data, false); }

  // Runs backward from this Var. A scalar may omit grad (it defaults to 1); any other shape
  // needs an explicit upstream gradient of its shape.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;

  VarImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<VarImpl>& impl_ptr() const { return impl_; }

 private:
  std::shared_ptr<VarImpl> impl_;
};

// The backward closure: given dL/d(output), returns dL/d(input) for each input, in order.
// An undefined Tensor means "no gradient for this input" (e.g. it doesn't require one).
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_out)>;

struct Node {
  const char* op;      // "matmul", "softmax", ...
  std::string module;  // module path active when recorded ("" outside modules)
  uint64_t seq;        // creation order: the tape position
  std::vector<Var> inputs;
  BackwardFn backward;  // null once released
};

// Wraps out as an op's result. Records a Node with backward when recording is on and some
// input requires grad; else returns a plain Var (backward is dropped unused, saving nothing).
// This is the one place ops touch the tape.
Var record(const char* op, Tensor out, std::vector<Var> inputs, BackwardFn backward);
// Whether record would keep a backward for these inputs: recording is on and one of them
// requires grad. An op whose forward can skip work kept only for its backward asks first.
bool will_record(const std::vector<Var>& inputs);

// Gradients of outputs with respect to inputs without touching any .grad() (for gradcheck
// and tests): returns d(sum over outputs of <output, grad_output>)/d(input) for each input;
// an input the outputs don't depend on gets zeros.
std::vector<Tensor> grad(const std::vector<Var>& outputs, const std::vector<Tensor>& grad_outputs,
                         const std::vector<Var>& inputs, bool retain_graph = false);

// While alive, ops record nothing and hold no memory for backward (inference, eval).
class NoGrad {
 public:
  NoGrad();
  ~NoGrad();
  NoGrad(const NoGrad&) = delete;
  NoGrad& operator=(const NoGrad&) = delete;

 private:
  bool prev_;
};
bool is_recording();

// Anomaly mode: every op's forward output and every backward gradient is checked for
// NaN/Inf, and the first one throws an Error naming the op and module path. Off by default;
// on with set_anomaly_mode(true) or the environment variable QKV_ANOMALY=1.
void set_anomaly_mode(bool on);
bool anomaly_mode();

// Module path for messages: nn modules push their name while they run forward.
class ModuleScope {
 public:
  explicit ModuleScope(const std::string& name);
  ~ModuleScope();
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;
};
std::string current_module_path();

}  // namespace qkv::ag
