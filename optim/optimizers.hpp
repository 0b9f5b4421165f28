// Optimizers: SGD (momentum, Nesterov, weight decay), Adam (L2 weight decay, as torch.optim.Adam),
// AdamW (decoupled weight decay, as torch.optim.AdamW), each with an AMSGrad option where torch
// has one. The update rules follow PyTorch 1.13's single-tensor code op for op, so float32
// results match torch.optim to rounding. Muon (orthogonalized momentum for the hidden layers'
// matrices, AdamW for the rest) is in optim/muon.hpp.
//
// Parameters are ag::Vars: step() updates p.data() in place from p.grad(); a parameter whose
// grad() is undefined (no gradient reached it) is skipped, its state and step count untouched,
// as torch does. Each parameter's update is one fused pass over its elements (parallel over
// elements, so bit-identical at any thread count); state buffers are allocated on a
// parameter's first update and reused, so a step allocates nothing after that.
//
// Ownership: the optimizer holds Var handles (sharing the parameters with the model) and owns
// its state tensors. state() hands out handles on them (no copy); load_state() copies.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/var.hpp"
#include "optim/kinds.hpp"

namespace qkv::optim {

using ag::Var;
// What nn::Module::named_parameters() returns: ("encoder.0.attn.w_q", Var), in a fixed order.
using NamedParams = std::vector<std::pair<std::string, Var>>;

// A set of parameters sharing hyperparameter overrides (torch's param_groups).
struct ParamGroup {
  NamedParams params;
  std::optional<double> weight_decay;  // unset: the optimizer's
};

// The optimizer's state as named tensors plus scalars, to be written beside the model
// (safetensors + JSON). Tensors: "<param>.<buffer>" with buffer one of momentum_buffer (SGD,
// and Muon's matrices), exp_avg, exp_avg_sq, max_exp_avg_sq (Adam/AdamW, and Muon's other
// parameters); each has its parameter's shape and dtype.
// Scalars: "step" (calls to step()) and "<param>.step" (updates of that parameter).
struct OptimState {
  std::string optimizer;  // "sgd", "adam", "adamw", "muon"
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, double> scalars;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient, then steps() += 1.
  void step();
  // Drops every parameter's gradient (undefined, as torch's set_to_none).
  void zero_grad();

  double lr() const { return lr_; }
  void set_lr(double lr);                   // the schedule calls this before each step
  int64_t steps() const { return steps_; }  // step() calls so far (restored by load_state)
  const char* name() const { return name_; }

  // Parameter names in order, and the weight decay each one gets.
  std::vector<std::string> param_names() const;
  std::vector<double> param_weight_decays() const;

  OptimState state() const;
  // Replaces this optimizer's state with a copy of s. Throws Error naming the entry when the
  // optimizer kind differs, a name is unknown or missing, or a shape does not match.
  void load_state(const OptimState& s);

 protected:
  struct Slot {
    std::string name;
    Var param;
    double weight_decay;
    int64_t step = 0;             // updates of this parameter
    std::vector<Tensor> buffers;  // in buffer_names(*this) order; empty until the first update
    // Updated by update_whole(), as one tensor, instead of elementwise by update(): an update
    // that is not elementwise (Muon's orthogonalization needs the whole matrix).
    bool whole = false;
  };

  Optimizer(const char* name, std::vector<ParamGroup> groups, double lr, double weight_decay);
  // The state buffers parameter s keeps, e.g. {"exp_avg", "exp_avg_sq"}. Per parameter because
  // an optimizer may update parameters by different rules (Muon).
  virtual std::vector<std::string> buffer_names(const Slot& s) const = 0;
  // Updates elements [lo, hi) of s.param.data() from grad (contiguous, the param's dtype and
  // shape); s.step has already been incremented and s.buffers allocated (zero-filled). Called
  // from inside step()'s one parallel region over all parameters' elements, on disjoint
  // ranges, so it must not open a region of its own.
  virtual void update(Slot& s, const Tensor& grad, int64_t lo, int64_t hi) = 0;
  // Updates the slots marked whole that have a gradient this step (steps incremented, buffers
  // allocated, gradients contiguous), before the elementwise pass and outside any parallel
  // region, so it may open its own. Only an optimizer that marks slots whole overrides it.
  virtual void update_whole(const std::vector<Slot*>& slots);

  const char* name_;
  double lr_;
  std::vector<Slot> slots_;
  int64_t steps_ = 0;
};

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;  // L2: added to the gradient
  bool nesterov = false;      // needs momentum > 0 and dampening == 0
};

// As torch.optim.SGD: d = g + wd * p; with momentum, buf = d on the first update, else
// buf = momentum * buf + (1 - dampening) * d; d = nesterov ? d + momentum * buf : buf;
// p -= lr * d.
class SGD : public Optimizer {
 public:
  SGD(std::vector<ParamGroup> groups, const SGDOptions& o);
  SGD(const NamedParams& params, const SGDOptions& o) : SGD({ParamGroup{params, {}}}, o) {}
  // The state buffers each parameter keeps under o: {"momentum_buffer"} with momentum, else none.
  static std::vector<std::string> buffers(const SGDOptions& o);

 protected:
  std::vector<std::string> buffer_names(const Slot& s) const override;
  void update(Slot& s, const Tensor& grad, int64_t lo, int64_t hi) override;

 private:
  SGDOptions o_;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // Adam: L2 added to the gradient; AdamW: decoupled
  bool amsgrad = false;
};

// As torch.optim.Adam: g += wd * p; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// vmax = max(vmax, v) with amsgrad; p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
class Adam : public Optimizer {
 public:
  Adam(std::vector<ParamGroup> groups, const AdamOptions& o);
  Adam(const NamedParams& params, const AdamOptions& o) : Adam({ParamGroup{params, {}}}, o) {}
  // The state buffers each parameter keeps under o (AdamW's too): the two moments, and the
  // running maximum with amsgrad.
  static std::vector<std::string> buffers(const AdamOptions& o);

 protected:
  Adam(const char* name, std::vector<ParamGroup> groups, const AdamOptions& o, bool decoupled);
  std::vector<std::string> buffer_names(const Slot& s) const override;
  void update(Slot& s, const Tensor& grad, int64_t lo, int64_t hi) override;

 private:
  AdamOptions o_;
  bool decoupled_;
};

// As torch.optim.AdamW: p *= 1 - lr * wd, then Adam's update without the L2 term.
class AdamW : public Adam {
 public:
  AdamW(std::vector<ParamGroup> groups, const AdamOptions& o);
  AdamW(const NamedParams& params, const AdamOptions& o) : AdamW({ParamGroup{params, {}}}, o) {}
};

// Names "0", "1", ... (or the Var's own name when it has one) for a bare list of parameters.
NamedParams name_params(const std::vector<Var>& params);

// --- configured from the [optim] section (see optim/config.hpp for the TOML keys) ---
struct OptimConfig {
  OptimizerKind name = OptimizerKind::adamw;  // sgd | adam | adamw | muon
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double momentum = 0.0, dampening = 0.0;
  bool nesterov = false;
  bool amsgrad = false;
  // muon: the hidden matrices' learning rate (the schedule scales it as it scales lr) and
  // their Nesterov momentum.
  double muon_lr = 0.02, muon_momentum = 0.95;
  // The no-decay rule: a parameter gets weight_decay 0 when it is 1-D (biases, LayerNorm
  // gains and shifts) and no_decay_1d is set, or when its name contains one of no_decay.
  bool no_decay_1d = true;
  std::vector<std::string> no_decay;

  // Throws Error naming the bad key ("optim.lr: must be >= 0, got -1").
  void validate() const;
};

// Whether the config's no-decay rule exempts this parameter from weight decay.
bool skips_weight_decay(const OptimConfig& c, const std::string& name, const Var& p);
// Splits params into a decayed group and a no-decay group (either may be empty), keeping the
// order within each group.
std::vector<ParamGroup> decay_groups(const OptimConfig& c, const NamedParams& params);
// The options of the optimizer c names (the fields it does not use are ignored).
SGDOptions sgd_options(const OptimConfig& c);
AdamOptions adam_options(const OptimConfig& c);
// The state tensors the optimizer c names keeps per parameter (for memory estimates; for muon
// the most any parameter keeps, AdamW's, though its matrices keep one).
int64_t state_buffers(const OptimConfig& c);
// Validates c and builds the optimizer it names over params, with the no-decay rule applied;
// muon routes params by is_hidden_matrix (optim/muon.hpp).
std::unique_ptr<Optimizer> make_optimizer(const OptimConfig& c, const NamedParams& params);
std::unique_ptr<Optimizer> make_optimizer(const OptimConfig& c, const std::vector<Var>& params);

}  // namespace qkv::optim
