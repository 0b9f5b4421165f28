#include "muon.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/parallel.hpp"

namespace qkv::optim {

// ---------------------------------------------------------------- routing

bool is_hidden_matrix(const std::string& name, const Var& p) {
  if (p.dim() != 2) return false;
  std::vector<std::string> parts;  // "encoder.layers.0.ffn.linear1.weight" split at '.'
  for (size_t at = 0;;) {
    const size_t dot = name.find('.', at);
    parts.push_back(name.substr(at, dot == std::string::npos ? std::string::npos : dot - at));
    if (dot == std::string::npos) break;
    at = dot + 1;
  }
  if (parts.back() != "weight") return false;
  auto is_index = [](const std::string& s) {
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  };
  for (size_t i = 0; i + 2 < parts.size(); ++i)
    if (parts[i] == "layers" && is_index(parts[i + 1])) return true;
  return false;
}

// ---------------------------------------------------------------- Newton-Schulz

namespace {

// Keller Jordan's quintic: its slope at 0 (a = 3.4445) lifts small singular values fast, at the
// price of not converging to exactly 1; five steps put all but tiny ones in roughly [0.7, 1.2].
constexpr float kA = 3.4445f, kB = -4.7750f, kC = 2.0315f;
constexpr int kSteps = 5;
constexpr float kNormEps = 1e-7f;

// Frobenius norm, summed in double in element order (the same bits at any thread count).
double frobenius(const Tensor& x) {
  const float* p = x.data<float>();
  double s = 0;
  for (int64_t i = 0, n = x.numel(); i < n; ++i) s += static_cast<double>(p[i]) * p[i];
  return std::sqrt(s);
}

}  // namespace

Tensor newton_schulz5(const Tensor& g) {
  QKV_CHECK(g.defined() && g.dim() == 2 && g.dtype() == DType::f32, "newton_schulz5",
            "expects a 2-D float32 matrix, got ",
            g.defined() ? cat(dtype_name(g.dtype()), " ", g.shape()) : "undefined");
  const bool tall = g.size(0) > g.size(1);
  // (s, l), s = min(rows, cols), so that A = X X^T is the smaller square, (s, s)
  const Tensor src = (tall ? g.t() : g).contiguous();
  const float denom = static_cast<float>(frobenius(src)) + kNormEps;
  // Each line is modded-nanogpt's float32 expression (tests/optim/reference_optim.py): the
  // scalar ops compute in double and round once, which gives the float32 operation's bits.
  Tensor x = div(src, denom);
  for (int k = 0; k < kSteps; ++k) {
    const Tensor a = matmul(x, x.t());                        // (s, s)
    const Tensor b = add(mul(a, kB), matmul(mul(a, kC), a));  // b A + (c A) A
    x = add(mul(x, kA), matmul(b, x));                        // a X + B X, (s, l)
  }
  return tall ? x.t().contiguous() : x;
}

// ---------------------------------------------------------------- Muon

namespace {

// All parameters of groups `first` and then `second`, for Adam's constructor.
std::vector<ParamGroup> joined(std::vector<ParamGroup> first, std::vector<ParamGroup> second) {
  for (ParamGroup& g : second) first.push_back(std::move(g));
  return first;
}

int64_t count(const std::vector<ParamGroup>& groups) {
  int64_t n = 0;
  for (const ParamGroup& g : groups) n += static_cast<int64_t>(g.params.size());
  return n;
}

// m = mu m + g (mul, then add, as torch's buf.mul_(mu).add_(g)); returns u = g + mu m, torch's
// g.add(buf, alpha=mu): a fused multiply-add. All contiguous, one dtype, one shape.
template <class T>
Tensor nesterov(const Tensor& grad, Tensor& buf, T mu) {
  Tensor u = empty(grad.shape(), grad.dtype());
  const T* __restrict__ g = grad.data<T>();
  T* __restrict__ m = buf.data<T>();
  T* __restrict__ pu = u.data<T>();
  for (int64_t i = 0, n = grad.numel(); i < n; ++i) {
    m[i] = m[i] * mu + g[i];
    pu[i] = std::fma(m[i], mu, g[i]);
  }
  return u;
}

// p = p * decay - step * o (torch: p.mul_(decay), then p.add_(o, alpha=-step), fused).
template <class T>
void apply(Tensor& param, const Tensor& o, T decay, T neg_step) {
  T* __restrict__ p = param.data<T>();
  const float* __restrict__ po = o.data<float>();
  for (int64_t i = 0, n = param.numel(); i < n; ++i)
    p[i] = std::fma(static_cast<T>(po[i]), neg_step, p[i] * decay);
}

// The multiply-adds of newton_schulz5 on a (rows, cols) matrix, s = min, l = max: per step
// X X^T and B X take s s l each, (c A) A takes s^3.
double ns_cost(const Tensor& p) {
  const double s = static_cast<double>(std::min(p.size(0), p.size(1)));
  const double l = static_cast<double>(std::max(p.size(0), p.size(1)));
  return 2 * s * s * l + s * s * s;
}

// The matrices shared out among `threads`, largest first to the least loaded: a model's FFN
// matrices cost several attention projections each, so equal counts would leave a thread idle.
// Each matrix is computed whole by one thread: the sharing moves the time, never a bit.
template <class S>
std::vector<std::vector<S*>> share_out(const std::vector<S*>& slots, int threads) {
  std::vector<size_t> order(slots.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return ns_cost(slots[a]->param.data()) > ns_cost(slots[b]->param.data());
  });
  std::vector<std::vector<S*>> work(static_cast<size_t>(threads));
  std::vector<double> load(static_cast<size_t>(threads), 0.0);
  for (size_t i : order) {
    const size_t t = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    work[t].push_back(slots[i]);
    load[t] += ns_cost(slots[i]->param.data());
  }
  return work;
}

}  // namespace

Muon::Muon(std::vector<ParamGroup> matrices, std::vector<ParamGroup> others, const MuonOptions& o)
    : Adam("muon", joined(matrices, std::move(others)), o.adamw, true), o_(o) {
  QKV_CHECK(std::isfinite(o.lr) && o.lr >= 0, "muon", "lr must be finite and >= 0, got ", o.lr);
  QKV_CHECK(o.momentum >= 0 && o.momentum < 1, "muon", "momentum must be in [0, 1), got ",
            o.momentum);
  QKV_CHECK(o.adamw.lr > 0, "muon",
            "the AdamW lr must be > 0: the matrices' rate follows the schedule as lr_t / lr, got ",
            o.adamw.lr);
  const int64_t n = count(matrices);
  for (int64_t i = 0; i < n; ++i) {
    Slot& s = slots_[static_cast<size_t>(i)];
    QKV_CHECK(s.param.dim() == 2, "muon", "parameter '", s.name, "' of shape ",
              shape_str(s.param.shape()),
              " is not a matrix; only 2-D parameters are orthogonalized");
    s.whole = true;
  }
}

std::vector<std::string> Muon::buffer_names(const Slot& s) const {
  if (s.whole) return {"momentum_buffer"};
  return Adam::buffer_names(s);
}

void Muon::update_whole(const std::vector<Slot*>& slots) {
  const double lr = muon_lr();
  const int threads = std::max(1, get_num_threads());
  const std::vector<std::vector<Slot*>> work = share_out(slots, threads);
  // One region, each thread its share of whole matrices. Inside a region every matmul runs
  // single-threaded (core/parallel.hpp), so no matrix is split into bands whose bits would
  // depend on the thread count. With one thread there is no region and no split either.
  parallel_for(threads, kParallelGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t)
      for (Slot* s : work[static_cast<size_t>(t)]) orthogonal_step(*s, lr);
  });
}

void Muon::orthogonal_step(Slot& s, double lr) const {
  const Tensor& grad = s.param.grad();
  const double rows = static_cast<double>(s.param.size(0)),
               cols = static_cast<double>(s.param.size(1));
  // An orthogonalized update's entries have RMS 1/sqrt(max(rows, cols)): the factor lifts a
  // tall matrix's to 1/sqrt(cols), what a wide one's are.
  const double step = lr * std::sqrt(std::max(1.0, rows / cols));
  const double decay = 1 - lr * s.weight_decay;
  visit_float(grad.dtype(), name_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Tensor u = nesterov<T>(grad, s.buffers[0], T(o_.momentum));
    const Tensor o = newton_schulz5(u.to(DType::f32));
    apply<T>(s.param.data(), o, T(decay), T(-step));
  });
}

// ---------------------------------------------------------------- from the config

MuonOptions muon_options(const OptimConfig& c) {
  return MuonOptions{c.muon_lr, c.muon_momentum, adam_options(c)};
}

std::unique_ptr<Muon> make_muon(const OptimConfig& c, const NamedParams& params) {
  NamedParams matrices, others;
  for (const auto& np : params) {
    QKV_CHECK(np.second.defined(), "optim", "parameter '", np.first, "' is undefined");
    (is_hidden_matrix(np.first, np.second) ? matrices : others).push_back(np);
  }
  QKV_CHECK(!matrices.empty(), "optim.name",
            "muon found no hidden-layer matrix among the parameters (a 2-D '...layers.<i>"
            "....weight'); for a model of other names build optim::Muon with explicit groups");
  return std::make_unique<Muon>(decay_groups(c, matrices), decay_groups(c, others),
                                muon_options(c));
}

}  // namespace qkv::optim
