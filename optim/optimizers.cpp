#include "optimizers.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <type_traits>

#include "core/parallel.hpp"
#include "optim/muon.hpp"

namespace qkv::optim {

namespace {
// Elementwise updates cost a few flops per element: parallel from ~8k elements.
constexpr int64_t kCostPerElement = 4;
}  // namespace

// ---------------------------------------------------------------- Optimizer

Optimizer::Optimizer(const char* name, std::vector<ParamGroup> groups, double lr,
                     double weight_decay)
    : name_(name), lr_(lr) {
  std::set<std::string> names;
  std::set<const ag::VarImpl*> seen;
  for (const ParamGroup& g : groups) {
    const double wd = g.weight_decay.value_or(weight_decay);
    QKV_CHECK(wd >= 0, name_, "weight_decay must be >= 0, got ", wd);
    for (const auto& [pname, p] : g.params) {
      QKV_CHECK(!pname.empty(), name_, "a parameter has an empty name");
      QKV_CHECK(p.defined(), name_, "parameter '", pname, "' is undefined");
      QKV_CHECK(is_floating(p.dtype()), name_, "parameter '", pname, "' is ", dtype_name(p.dtype()),
                "; optimizers update float32 or float64 tensors");
      QKV_CHECK(p.data().is_contiguous(), name_, "parameter '", pname, "' of shape ", p.shape(),
                " is not contiguous");
      QKV_CHECK(names.insert(pname).second, name_, "parameter name '", pname, "' appears twice");
      QKV_CHECK(seen.insert(p.impl()).second, name_, "parameter '", pname,
                "' is the same tensor as an earlier parameter");
      slots_.push_back(Slot{pname, p, wd, 0, {}});
    }
  }
  set_lr(lr);
}

void Optimizer::set_lr(double lr) {
  QKV_CHECK(std::isfinite(lr) && lr >= 0, name_, "learning rate must be finite and >= 0, got ", lr);
  lr_ = lr;
}

void Optimizer::step() {
  // Check every gradient before touching any parameter: a bad one leaves the model as it was.
  for (Slot& s : slots_) {
    Tensor& g = s.param.grad();
    if (!g.defined()) continue;
    const Tensor& p = s.param.data();
    QKV_CHECK(g.shape() == p.shape() && g.dtype() == p.dtype(), name_, "gradient of '", s.name,
              "' is ", g.shape(), " ", dtype_name(g.dtype()), " but the parameter is ", p.shape(),
              " ", dtype_name(p.dtype()));
    QKV_CHECK(p.is_contiguous(), name_, "parameter '", s.name, "' of shape ", p.shape(),
              " is not contiguous");
    // The gradient belongs to the parameter; packing it once keeps the update a flat loop.
    if (!g.is_contiguous()) g = g.contiguous();
  }
  std::vector<Slot*> todo, whole;
  std::vector<int64_t> begin{0};  // todo[i]'s elements are [begin[i], begin[i + 1]) of all
  for (Slot& s : slots_) {
    const Tensor& g = s.param.grad();
    if (!g.defined()) continue;
    if (s.buffers.empty())
      for (size_t i = 0, n = buffer_names(s).size(); i < n; ++i)
        s.buffers.push_back(zeros(g.shape(), g.dtype()));
    ++s.step;
    if (s.whole) {
      whole.push_back(&s);
      continue;
    }
    todo.push_back(&s);
    begin.push_back(begin.back() + g.numel());
  }
  if (!whole.empty()) update_whole(whole);
  // One parallel region over every parameter's elements, not one per parameter: a model has
  // dozens of small tensors, and each region costs a fork and a join. Every element's update
  // is independent of the others, so the split does not change any bit.
  parallel_for(begin.back(), kCostPerElement, [&](int64_t lo, int64_t hi) {
    size_t i = std::upper_bound(begin.begin(), begin.end(), lo) - begin.begin() - 1;
    for (; i < todo.size() && begin[i] < hi; ++i) {
      const int64_t from = std::max(lo, begin[i]) - begin[i];
      const int64_t to = std::min(hi, begin[i + 1]) - begin[i];
      if (from < to) update(*todo[i], todo[i]->param.grad(), from, to);
    }
  });
  ++steps_;
}

void Optimizer::update_whole(const std::vector<Slot*>& slots) {
  throw Error(cat(name_, ": parameter '", slots.front()->name,
                  "' is marked for a whole-tensor update, which this optimizer does not have"));
}

void Optimizer::zero_grad() {
  for (Slot& s : slots_) s.param.zero_grad();
}

std::vector<std::string> Optimizer::param_names() const {
  std::vector<std::string> out;
  for (const Slot& s : slots_) out.push_back(s.name);
  return out;
}

std::vector<double> Optimizer::param_weight_decays() const {
  std::vector<double> out;
  for (const Slot& s : slots_) out.push_back(s.weight_decay);
  return out;
}

OptimState Optimizer::state() const {
  OptimState st;
  st.optimizer = name_;
  st.scalars["step"] = static_cast<double>(steps_);
  for (const Slot& s : slots_) {
    st.scalars[s.name + ".step"] = static_cast<double>(s.step);
    const std::vector<std::string> bufs = buffer_names(s);
    for (size_t i = 0; i < s.buffers.size(); ++i)
      st.tensors.emplace_back(s.name + "." + bufs[i], s.buffers[i]);
  }
  return st;
}

void Optimizer::load_state(const OptimState& st) {
  const char* op = "optim.load_state";
  QKV_CHECK(st.optimizer == name_, op, "state is for optimizer '", st.optimizer, "', this is '",
            name_, "'");
  std::map<std::string, size_t> index;
  std::vector<std::vector<std::string>> bufs;  // slot i's buffer names
  for (size_t i = 0; i < slots_.size(); ++i) {
    index[slots_[i].name] = i;
    bufs.push_back(buffer_names(slots_[i]));
  }

  // Build everything first so a failed load leaves the optimizer as it was.
  std::vector<int64_t> steps(slots_.size(), -1);
  std::vector<std::vector<Tensor>> buffers;
  for (const auto& b : bufs) buffers.emplace_back(b.size());
  auto as_count = [&](const std::string& key, double v) {
    QKV_CHECK(v >= 0 && v == std::floor(v) && v < 9.007199254740992e15, op, "'", key,
              "' must be a non-negative integer, got ", v);
    return static_cast<int64_t>(v);
  };
  auto steps_it = st.scalars.find("step");
  QKV_CHECK(steps_it != st.scalars.end(), op, "missing scalar 'step'");
  const int64_t total = as_count("step", steps_it->second);
  for (const auto& [key, v] : st.scalars) {
    if (key == "step") continue;
    const size_t dot = key.rfind('.');
    QKV_CHECK(dot != std::string::npos && key.substr(dot + 1) == "step", op, "unknown scalar '",
              key, "'");
    auto it = index.find(key.substr(0, dot));
    QKV_CHECK(it != index.end(), op, "scalar '", key, "' names no parameter of this optimizer");
    steps[it->second] = as_count(key, v);
  }
  for (const auto& [key, t] : st.tensors) {
    const size_t dot = key.rfind('.');
    QKV_CHECK(dot != std::string::npos, op, "tensor '", key, "' is not '<param>.<buffer>'");
    auto it = index.find(key.substr(0, dot));
    QKV_CHECK(it != index.end(), op, "tensor '", key, "' names no parameter of this optimizer");
    const std::vector<std::string>& names = bufs[it->second];
    const auto b = std::find(names.begin(), names.end(), key.substr(dot + 1));
    QKV_CHECK(b != names.end(), op, "tensor '", key, "': '", key.substr(dot + 1),
              "' is not a buffer of ", name_, " for this parameter");
    const Slot& s = slots_[it->second];
    QKV_CHECK(t.defined() && is_floating(t.dtype()), op, "tensor '", key,
              "' is undefined or not float");
    QKV_CHECK(t.shape() == s.param.shape(), op, "tensor '", key, "' has shape ", t.shape(),
              ", parameter '", s.name, "' has shape ", s.param.shape());
    Tensor& dst = buffers[it->second][static_cast<size_t>(b - names.begin())];
    QKV_CHECK(!dst.defined(), op, "tensor '", key, "' appears twice");
    dst = t.to(s.param.dtype()).clone();
  }
  for (size_t i = 0; i < slots_.size(); ++i) {
    const std::string& n = slots_[i].name;
    QKV_CHECK(steps[i] >= 0, op, "missing scalar '", n, ".step'");
    for (size_t j = 0; j < bufs[i].size(); ++j) {
      if (steps[i] > 0)
        QKV_CHECK(buffers[i][j].defined(), op, "missing tensor '", n, ".", bufs[i][j],
                  "' (parameter has taken ", steps[i], " steps)");
      else
        QKV_CHECK(!buffers[i][j].defined(), op, "tensor '", n, ".", bufs[i][j],
                  "' given for a parameter that has taken no step");
    }
  }
  for (size_t i = 0; i < slots_.size(); ++i) {
    slots_[i].step = steps[i];
    slots_[i].buffers = steps[i] > 0 ? std::move(buffers[i]) : std::vector<Tensor>{};
  }
  steps_ = total;
}

// ---------------------------------------------------------------- update loops
// Each loop is one pass over a parameter's elements, in T with T-valued constants, with
// torch's operations in torch's order and rounding: its add(x, alpha=a) is a fused
// multiply-add, fma(x, a, self), and its addcmul(self, t1, t2, value) computes
// fma(value * t1, t2, self); mul, div, sqrt and addcdiv round each operation. The library is
// built with -ffp-contract=off, so these std::fma calls are the only fused operations.
// On this machine that reproduces torch.optim bit for bit (tests/optim/test_optim_reference).

namespace {

// with_flags(f, b1, b2, ...) calls f(std::bool_constant<b1>{}, ...): each runtime flag becomes
// a compile-time one, so the update loops have no branches and vectorize.
template <class F>
void with_flags(F&& f) {
  f();
}
template <class F, class... Rest>
void with_flags(F&& f, bool first, Rest... rest) {
  auto bind = [&](auto flag) { with_flags([&](auto... more) { f(flag, more...); }, rest...); };
  first ? bind(std::true_type{}) : bind(std::false_type{});
}

template <class T>
struct SgdArgs {
  T* p;
  const T* g;
  T* buf;  // null without momentum
  T lr, wd, momentum, damp1;
};

// kFirst: the momentum buffer starts as the first gradient, as torch's.
template <class T, bool kWd, bool kMomentum, bool kFirst, bool kNesterov>
void sgd_range(const SgdArgs<T>& a, int64_t lo, int64_t hi) {
  T* __restrict__ p = a.p;
  const T* __restrict__ g = a.g;
  T* __restrict__ buf = a.buf;
  for (int64_t i = lo; i < hi; ++i) {
    T d = g[i];
    if constexpr (kWd) d = std::fma(p[i], a.wd, d);
    if constexpr (kMomentum) {
      const T b = kFirst ? d : std::fma(d, a.damp1, buf[i] * a.momentum);
      buf[i] = b;
      d = kNesterov ? std::fma(b, a.momentum, d) : b;
    }
    p[i] = std::fma(d, -a.lr, p[i]);
  }
}

template <class T>
void sgd_loop(int64_t lo, int64_t hi, const SgdArgs<T>& a, bool first, bool nesterov) {
  with_flags(
      [&](auto wd, auto mom, auto fst, auto nes) {
        sgd_range<T, decltype(wd)::value, decltype(mom)::value, decltype(fst)::value,
                  decltype(nes)::value>(a, lo, hi);
      },
      a.wd != T(0), a.buf != nullptr, first, nesterov);
}

template <class T>
struct AdamArgs {
  T* p;
  const T* g;
  T *m, *v, *vmax;  // vmax: null without amsgrad
  T decay, wd, b1, one_b1, b2, one_b2, bc2_sqrt, eps, neg_step_size;
};

// kDecoupled: AdamW's p *= 1 - lr wd; kL2: Adam's g += wd p; kAms: AMSGrad's running max.
template <class T, bool kDecoupled, bool kL2, bool kAms>
void adam_range(const AdamArgs<T>& a, int64_t lo, int64_t hi) {
  T* __restrict__ p = a.p;
  const T* __restrict__ g = a.g;
  T* __restrict__ m = a.m;
  T* __restrict__ v = a.v;
  T* __restrict__ vmax = a.vmax;
  for (int64_t i = lo; i < hi; ++i) {
    T pi = p[i], gi = g[i];
    if constexpr (kDecoupled) pi = pi * a.decay;
    if constexpr (kL2) gi = std::fma(pi, a.wd, gi);
    const T mi = std::fma(gi, a.one_b1, m[i] * a.b1);
    T vi = std::fma(a.one_b2 * gi, gi, v[i] * a.b2);
    m[i] = mi;
    v[i] = vi;
    if constexpr (kAms) vi = vmax[i] = std::max(vmax[i], vi);
    const T denom = std::sqrt(vi) / a.bc2_sqrt + a.eps;
    p[i] = pi + a.neg_step_size * mi / denom;
  }
}

template <class T>
void adam_loop(int64_t lo, int64_t hi, const AdamArgs<T>& a, bool decoupled) {
  with_flags(
      [&](auto dec, auto l2, auto ams) {
        adam_range<T, decltype(dec)::value, decltype(l2)::value, decltype(ams)::value>(a, lo, hi);
      },
      decoupled, !decoupled && a.wd != T(0), a.vmax != nullptr);
}

}  // namespace

// ---------------------------------------------------------------- SGD

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& o)
    : Optimizer("sgd", std::move(groups), o.lr, o.weight_decay), o_(o) {
  QKV_CHECK(o.momentum >= 0, "sgd", "momentum must be >= 0, got ", o.momentum);
  QKV_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), "sgd",
            "nesterov needs momentum > 0 and dampening 0, got momentum ", o.momentum,
            ", dampening ", o.dampening);
}

std::vector<std::string> SGD::buffers(const SGDOptions& o) {
  if (o.momentum == 0) return {};
  return {"momentum_buffer"};
}

std::vector<std::string> SGD::buffer_names(const Slot&) const { return buffers(o_); }

void SGD::update(Slot& s, const Tensor& grad, int64_t lo, int64_t hi) {
  visit_float(grad.dtype(), "sgd", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const SgdArgs<T> a{s.param.data().data<T>(),
                       grad.data<T>(),
                       s.buffers.empty() ? nullptr : s.buffers[0].data<T>(),
                       T(lr_),
                       T(s.weight_decay),
                       T(o_.momentum),
                       T(1 - o_.dampening)};
    sgd_loop<T>(lo, hi, a, s.step == 1, o_.nesterov);
  });
}

// ---------------------------------------------------------------- Adam, AdamW

Adam::Adam(const char* name, std::vector<ParamGroup> groups, const AdamOptions& o, bool decoupled)
    : Optimizer(name, std::move(groups), o.lr, o.weight_decay), o_(o), decoupled_(decoupled) {
  QKV_CHECK(o.beta1 >= 0 && o.beta1 < 1, name, "beta1 must be in [0, 1), got ", o.beta1);
  QKV_CHECK(o.beta2 >= 0 && o.beta2 < 1, name, "beta2 must be in [0, 1), got ", o.beta2);
  QKV_CHECK(o.eps >= 0, name, "eps must be >= 0, got ", o.eps);
}

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& o)
    : Adam("adam", std::move(groups), o, false) {}

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamOptions& o)
    : Adam("adamw", std::move(groups), o, true) {}

std::vector<std::string> Adam::buffers(const AdamOptions& o) {
  if (o.amsgrad) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"exp_avg", "exp_avg_sq"};
}

std::vector<std::string> Adam::buffer_names(const Slot&) const { return buffers(o_); }

void Adam::update(Slot& s, const Tensor& grad, int64_t lo, int64_t hi) {
  // Scalars in double, as torch computes them in Python, then rounded to T once.
  const double t = static_cast<double>(s.step);
  const double bc1 = 1 - std::pow(o_.beta1, t), bc2 = 1 - std::pow(o_.beta2, t);
  const double step_size = lr_ / bc1;
  const double decay = decoupled_ ? 1 - lr_ * s.weight_decay : 1.0;
  const double wd = decoupled_ ? 0.0 : s.weight_decay;
  visit_float(grad.dtype(), name_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const AdamArgs<T> a{s.param.data().data<T>(),
                        grad.data<T>(),
                        s.buffers[0].data<T>(),
                        s.buffers[1].data<T>(),
                        o_.amsgrad ? s.buffers[2].data<T>() : nullptr,
                        T(decay),
                        T(wd),
                        T(o_.beta1),
                        T(1 - o_.beta1),
                        T(o_.beta2),
                        T(1 - o_.beta2),
                        T(std::sqrt(bc2)),
                        T(o_.eps),
                        T(-step_size)};
    adam_loop<T>(lo, hi, a, decoupled_);
  });
}

// ---------------------------------------------------------------- factory

NamedParams name_params(const std::vector<Var>& params) {
  NamedParams out;
  for (size_t i = 0; i < params.size(); ++i) {
    const Var& p = params[i];
    out.emplace_back(p.defined() && !p.name().empty() ? p.name() : std::to_string(i), p);
  }
  return out;
}

void OptimConfig::validate() const {
  QKV_CHECK(std::isfinite(lr) && lr >= 0, "optim.lr", "must be finite and >= 0, got ", lr);
  QKV_CHECK(beta1 >= 0 && beta1 < 1, "optim.betas", "beta1 must be in [0, 1), got ", beta1);
  QKV_CHECK(beta2 >= 0 && beta2 < 1, "optim.betas", "beta2 must be in [0, 1), got ", beta2);
  QKV_CHECK(std::isfinite(eps) && eps >= 0, "optim.eps", "must be finite and >= 0, got ", eps);
  QKV_CHECK(std::isfinite(weight_decay) && weight_decay >= 0, "optim.weight_decay",
            "must be finite and >= 0, got ", weight_decay);
  QKV_CHECK(std::isfinite(momentum) && momentum >= 0, "optim.momentum",
            "must be finite and >= 0, got ", momentum);
  QKV_CHECK(dampening >= 0 && dampening <= 1, "optim.dampening", "must be in [0, 1], got ",
            dampening);
  QKV_CHECK(!nesterov || (momentum > 0 && dampening == 0), "optim.nesterov",
            "needs momentum > 0 and dampening = 0, got momentum ", momentum, ", dampening ",
            dampening);
  QKV_CHECK(name == OptimizerKind::sgd || (momentum == 0 && dampening == 0 && !nesterov),
            "optim.momentum", "momentum, dampening and nesterov are SGD keys; optimizer is '",
            name_of(name), "'", name == OptimizerKind::muon ? " (its key is muon_momentum)" : "");
  QKV_CHECK(std::isfinite(muon_lr) && muon_lr >= 0, "optim.muon_lr",
            "must be finite and >= 0, got ", muon_lr);
  QKV_CHECK(muon_momentum >= 0 && muon_momentum < 1, "optim.muon_momentum",
            "must be in [0, 1), got ", muon_momentum);
  // The matrices' rate follows the schedule as muon_lr * lr_t / lr.
  QKV_CHECK(name != OptimizerKind::muon || lr > 0, "optim.lr",
            "muon scales muon_lr by the schedule's lr_t / lr, so lr must be > 0, got ", lr);
  QKV_CHECK(name != OptimizerKind::sgd || !amsgrad, "optim.amsgrad",
            "is an Adam/AdamW key; optimizer is 'sgd'");
  for (const std::string& s : no_decay)
    QKV_CHECK(!s.empty(), "optim.no_decay", "an empty pattern would match every parameter");
}

bool skips_weight_decay(const OptimConfig& c, const std::string& name, const Var& p) {
  if (c.no_decay_1d && p.dim() <= 1) return true;
  for (const std::string& s : c.no_decay)
    if (name.find(s) != std::string::npos) return true;
  return false;
}

std::vector<ParamGroup> decay_groups(const OptimConfig& c, const NamedParams& params) {
  ParamGroup decay{{}, c.weight_decay}, no_decay{{}, 0.0};
  for (const auto& np : params) {
    QKV_CHECK(np.second.defined(), "optim", "parameter '", np.first, "' is undefined");
    (skips_weight_decay(c, np.first, np.second) ? no_decay : decay).params.push_back(np);
  }
  return {decay, no_decay};
}

SGDOptions sgd_options(const OptimConfig& c) {
  return SGDOptions{c.lr, c.momentum, c.dampening, c.weight_decay, c.nesterov};
}

AdamOptions adam_options(const OptimConfig& c) {
  return AdamOptions{c.lr, c.beta1, c.beta2, c.eps, c.weight_decay, c.amsgrad};
}

int64_t state_buffers(const OptimConfig& c) {
  switch (c.name) {
    case OptimizerKind::sgd:
      return static_cast<int64_t>(SGD::buffers(sgd_options(c)).size());
    case OptimizerKind::adam:
    case OptimizerKind::adamw:
    case OptimizerKind::muon:  // the AdamW parameters' two (or three); its matrices keep one
      break;
  }
  return static_cast<int64_t>(Adam::buffers(adam_options(c)).size());
}

std::unique_ptr<Optimizer> make_optimizer(const OptimConfig& c, const NamedParams& params) {
  c.validate();
  if (c.name == OptimizerKind::muon) return make_muon(c, params);
  std::vector<ParamGroup> groups = decay_groups(c, params);
  switch (c.name) {
    case OptimizerKind::sgd:
      return std::make_unique<SGD>(std::move(groups), sgd_options(c));
    case OptimizerKind::adam:
      return std::make_unique<Adam>(std::move(groups), adam_options(c));
    case OptimizerKind::adamw:
    case OptimizerKind::muon:  // made above
      break;
  }
  return std::make_unique<AdamW>(std::move(groups), adam_options(c));
}

std::unique_ptr<Optimizer> make_optimizer(const OptimConfig& c, const std::vector<Var>& params) {
  return make_optimizer(c, name_params(params));
}

}  // namespace qkv::optim
