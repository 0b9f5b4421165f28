// The tape: recording nodes and running them backward.
#include "var.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <unordered_map>
#include <unordered_set>

namespace qkv::ag {
namespace {

thread_local bool t_recording = true;
thread_local std::vector<std::string> t_module_stack;
std::atomic<uint64_t> g_next_seq{0};  // only orders nodes; carries no graph state

bool anomaly_from_env() {
  const char* v = std::getenv("QKV_ANOMALY");
  return v && *v && std::string(v) != "0";
}
std::atomic<bool> g_anomaly{anomaly_from_env()};

void check_finite(const Tensor& t, const char* op, const std::string& module, const char* what) {
  if (!all_finite(t))
    throw Error(cat("anomaly: ", what, " of op '", op, "'",
                    module.empty() ? std::string() : " in module '" + module + "'",
                    " has NaN or Inf (shape ", t.shape(), ")"));
}

// Walks the graph from the roots, runs each node's backward once in reverse tape order.
// capture == nullptr: gradients of leaves accumulate into their .grad().
// capture != nullptr: only the Vars named in capture receive gradients, into the map.
void run_backward(const std::vector<Var>& roots, const std::vector<Tensor>& root_grads,
                  bool retain_graph, std::unordered_map<VarImpl*, Tensor>* capture) {
  std::unordered_map<Node*, Tensor> pending;  // gradient flowing into each node's output
  auto accumulate = [](Tensor& slot, const Tensor& g) { slot = slot.defined() ? add(slot, g) : g; };
  auto route = [&](const Var& v, const Tensor& g) {
    if (!v.requires_grad()) return;
    if (capture) {
      auto it = capture->find(v.impl());
      if (it != capture->end()) accumulate(it->second, g);
      if (v.is_leaf()) return;
    } else if (v.is_leaf()) {
      // Cloned on first store: an op may hand the same gradient tensor to two inputs, and
      // optimizers scale .grad() in place.
      Tensor& slot = v.impl()->grad;
      slot = slot.defined() ? add(slot, g) : g.clone();
      return;
    }
    accumulate(pending[v.impl()->node.get()], g);
  };

  // Gather every node reachable from the roots.
  std::vector<Node*> nodes;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  for (const Var& r : roots)
    if (r.defined() && r.impl()->node && seen.insert(r.impl()->node.get()).second)
      stack.push_back(r.impl()->node.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    nodes.push_back(n);
    for (const Var& in : n->inputs)
      if (in.impl()->node && seen.insert(in.impl()->node.get()).second)
        stack.push_back(in.impl()->node.get());
  }
  std::sort(nodes.begin(), nodes.end(), [](Node* a, Node* b) { return a->seq > b->seq; });

  for (size_t i = 0; i < roots.size(); ++i) {
    const Var& r = roots[i];
    QKV_CHECK(r.requires_grad(), "backward", "a root of shape ", r.shape(),
              " does not require grad (computed without recording, or from constants only)");
    QKV_CHECK(root_grads[i].shape() == r.shape() && root_grads[i].dtype() == r.dtype(), "backward",
              "gradient of shape ", root_grads[i].shape(), " ", dtype_name(root_grads[i].dtype()),
              " for an output of shape ", r.shape(), " ", dtype_name(r.dtype()));
    route(r, root_grads[i]);
  }

  for (Node* n : nodes) {
    auto it = pending.find(n);
    if (it == pending.end()) continue;  // no gradient reaches this node
    const Tensor g = std::move(it->second);
    pending.erase(it);
    QKV_CHECK(n->backward, "backward",
              "trying to run backward through the graph a second time (through op '", n->op,
              "'); its saved tensors were freed. Pass retain_graph = true to the first call");
    std::vector<Tensor> grads = n->backward(g);
    QKV_CHECK(grads.size() == n->inputs.size(), n->op, "backward returned ", grads.size(),
              " gradients for ", n->inputs.size(), " inputs");
    for (size_t i = 0; i < grads.size(); ++i) {
      const Var& in = n->inputs[i];
      if (!grads[i].defined() || !in.requires_grad()) continue;
      QKV_CHECK(grads[i].shape() == in.shape(), n->op, "backward gave a gradient of shape ",
                grads[i].shape(), " for input ", i, " of shape ", in.shape());
      if (g_anomaly.load(std::memory_order_relaxed))
        check_finite(grads[i], n->op, n->module, "gradient");
      route(in, grads[i]);
    }
    if (!retain_graph) n->backward = nullptr;  // frees what the closure saved
  }
}

}  // namespace

Var::Var(Tensor data, bool requires_grad) : impl_(std::make_shared<VarImpl>()) {
  QKV_CHECK(data.defined(), "Var", "undefined tensor");
  QKV_CHECK(!requires_grad || is_floating(data.dtype()), "Var",
            "only float tensors can require grad, got ", dtype_name(data.dtype()), " ",
            data.shape());
  impl_->data = std::move(data);
  impl_->requires_grad = requires_grad;
}

Var& Var::set_requires_grad(bool r) {
  QKV_CHECK(is_leaf(), "set_requires_grad", "only leaves can change requires_grad");
  QKV_CHECK(!r || is_floating(dtype()), "set_requires_grad", "only float tensors can require grad");
  impl_->requires_grad = r;
  return *this;
}

Var& Var::set_name(std::string n) {
  impl_->name = std::move(n);
  return *this;
}

void Var::backward(const Tensor& grad, bool retain_graph) const {
  QKV_CHECK(defined(), "backward", "undefined Var");
  Tensor g = grad;
  if (!g.defined()) {
    QKV_CHECK(numel() == 1, "backward", "an output of shape ", shape(),
              " needs an explicit gradient (only a scalar's defaults to 1)");
    g = ones(shape(), dtype());
  }
  run_backward({*this}, {g}, retain_graph, nullptr);
}

bool will_record(const std::vector<Var>& inputs) {
  if (!t_recording) return false;
  for (const Var& v : inputs)
    if (v.requires_grad()) return true;
  return false;
}

Var record(const char* op, Tensor out, std::vector<Var> inputs, BackwardFn backward) {
  const bool anomaly = g_anomaly.load(std::memory_order_relaxed);
  if (anomaly) check_finite(out, op, current_module_path(), "output");
  if (!will_record(inputs)) return Var(std::move(out), false);
  auto node = std::make_shared<Node>();
  node->op = op;
  if (anomaly) node->module = current_module_path();
  node->seq = g_next_seq.fetch_add(1, std::memory_order_relaxed);
  node->inputs = std::move(inputs);
  node->backward = std::move(backward);
  Var v(std::move(out), true);
  v.impl()->node = std::move(node);
  return v;
}

std::vector<Tensor> grad(const std::vector<Var>& outputs, const std::vector<Tensor>& grad_outputs,
                         const std::vector<Var>& inputs, bool retain_graph) {
  QKV_CHECK(outputs.size() == grad_outputs.size(), "grad", outputs.size(), " outputs but ",
            grad_outputs.size(), " gradients");
  std::unordered_map<VarImpl*, Tensor> capture;
  for (const Var& v : inputs) capture[v.impl()] = Tensor();
  run_backward(outputs, grad_outputs, retain_graph, &capture);
  std::vector<Tensor> result;
  for (const Var& v : inputs) {
    const Tensor& g = capture[v.impl()];
    result.push_back(g.defined() ? g : zeros_like(v.data()));
  }
  return result;
}

NoGrad::NoGrad() : prev_(t_recording) { t_recording = false; }
NoGrad::~NoGrad() { t_recording = prev_; }
bool is_recording() { return t_recording; }

void set_anomaly_mode(bool on) { g_anomaly.store(on); }
bool anomaly_mode() { return g_anomaly.load(); }

ModuleScope::ModuleScope(const std::string& name) { t_module_stack.push_back(name); }
ModuleScope::~ModuleScope() { t_module_stack.pop_back(); }
std::string current_module_path() {
  std::string p;
  for (const std::string& s : t_module_stack) {
    if (s.empty()) continue;
    if (!p.empty()) p += '.';
    p += s;
  }
  return p;
}

}  // namespace qkv::ag
