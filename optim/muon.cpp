#include "muon.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>
#include <vector>

#include "core/bf16.hpp"
#include "core/parallel.hpp"
#include "core/precision.hpp"

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

// src: (s, l) float32 contiguous, the wide orientation -> the quintic's X, (s, l), in float32
Tensor quintic_f32(const Tensor& src) {
  const float denom = static_cast<float>(frobenius(src)) + kNormEps;
  // Each line is modded-nanogpt's float32 expression (tests/optim/reference_optim.py): the
  // scalar ops compute in double and round once, which gives the float32 operation's bits.
  Tensor x = div(src, denom);
  for (int k = 0; k < kSteps; ++k) {
    const Tensor a = matmul(x, x.t());                        // (s, s)
    const Tensor b = add(mul(a, kB), matmul(mul(a, kC), a));  // b A + (c A) A
    x = add(mul(x, kA), matmul(b, x));                        // a X + B X, (s, l)
  }
  return x;
}

// ---- the same in bfloat16, as modded-nanogpt runs it: every op's result is rounded to bf16,
// a product accumulates in float32 and rounds once, a scalar (a, b, c) multiplies in float32
// (as torch 2 and CUDA do; torch 1.13 on the CPU would round it to bf16 first).

float widen(bf16_t h) { return bf16_to_float(h); }

// out = bf16(x / bf16(||x||_F + 1e-7)), x: (n) bf16. The norm sums the bf16 values' squares in
// double in element order (the same bits at any thread count) and rounds to bf16, as torch's
// norm of a bf16 tensor returns bf16 (its own sum is float32 in another order: a norm on a
// bf16 rounding boundary may round the other way, which the reference test's tolerance allows).
void normalize_bf16(bf16_t* x, int64_t n) {
  double sq = 0;
  for (int64_t i = 0; i < n; ++i) sq += static_cast<double>(widen(x[i])) * widen(x[i]);
  const float norm = widen(bf16_round(static_cast<float>(std::sqrt(sq))));
  const float denom = widen(bf16_round(norm + kNormEps));
  for (int64_t i = 0; i < n; ++i) x[i] = bf16_round(widen(x[i]) / denom);
}

// out = bf16(c p), p, out: (n)
void scale_bf16(float c, const bf16_t* p, bf16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_round(c * widen(p[i]));
}

// out = bf16(bf16(c p) + bf16(prod)): p: (n) bf16, prod: (n) a product's float32 result; out
// may be p (each element reads its own index only).
void scaled_plus_product(float c, const bf16_t* p, const float* prod, bf16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = bf16_round(widen(bf16_round(c * widen(p[i]))) + widen(bf16_round(prod[i])));
}

// The bf16 quintic on one (s, l) matrix, in buffers of its own.
class QuinticBf16 {
 public:
  // src: (s, l) float32 contiguous; X = G.bfloat16(), then X = X / (||X||_F + 1e-7)
  explicit QuinticBf16(const Tensor& src)
      : s_(src.size(0)),
        l_(src.size(1)),
        x_(buffer(s_ * l_)),
        a_(buffer(s_ * s_)),
        ca_(buffer(s_ * s_)),
        prod_(static_cast<size_t>(std::max(s_ * s_, s_ * l_))) {
    to_bf16(src.data<float>(), x_.data(), s_ * l_);
    normalize_bf16(x_.data(), s_ * l_);
  }

  // One iteration: A = X X^T, B = b A + (c A) A, X = a X + B X.
  void step() {
    const int64_t ss = s_ * s_;
    // A (s, s) = X (s, l) X^T (l, s)
    bf16_gemm_this_thread(false, true, s_, s_, l_, x_.data(), l_, x_.data(), l_, prod_.data(), s_);
    to_bf16(prod_.data(), a_.data(), ss);
    scale_bf16(kC, a_.data(), ca_.data(), ss);
    // (c A) A: (s, s) (s, s)
    bf16_gemm_this_thread(false, false, s_, s_, s_, ca_.data(), s_, a_.data(), s_, prod_.data(),
                          s_);
    bf16_t* b = ca_.data();  // c A is spent: B takes its place
    scaled_plus_product(kB, a_.data(), prod_.data(), b, ss);
    // B X: (s, s) (s, l)
    bf16_gemm_this_thread(false, false, s_, l_, s_, b, s_, x_.data(), l_, prod_.data(), l_);
    scaled_plus_product(kA, x_.data(), prod_.data(), x_.data(), s_ * l_);
  }

  // X, (s, l): its bf16 values in float32
  Tensor result() const {
    Tensor out = empty({s_, l_});
    float* po = out.data<float>();
    for (int64_t i = 0, n = s_ * l_; i < n; ++i) po[i] = widen(x_[static_cast<size_t>(i)]);
    return out;
  }

 private:
  static std::vector<bf16_t> buffer(int64_t n) {
    return std::vector<bf16_t>(static_cast<size_t>(n));
  }

  int64_t s_, l_;
  std::vector<bf16_t> x_;    // X: (s, l)
  std::vector<bf16_t> a_;    // A = X X^T: (s, s)
  std::vector<bf16_t> ca_;   // c A: (s, s), then B = b A + (c A) A
  std::vector<float> prod_;  // a product's float32 result: (s, s) or (s, l)
};

// src: (s, l) float32 contiguous -> the quintic's X, (s, l), its bf16 values in float32.
Tensor quintic_bf16(const Tensor& src) {
  QuinticBf16 q(src);
  for (int k = 0; k < kSteps; ++k) q.step();
  return q.result();
}

}  // namespace

Tensor newton_schulz5(const Tensor& g, Precision precision) {
  QKV_CHECK(g.defined() && g.dim() == 2 && g.dtype() == DType::f32, "newton_schulz5",
            "expects a 2-D float32 matrix, got ",
            g.defined() ? cat(dtype_name(g.dtype()), " ", g.shape()) : "undefined");
  QKV_CHECK(precision != Precision::auto_, "newton_schulz5",
            "resolve \"auto\" first (resolve_precision)");
  if (precision == Precision::bf16) resolve_precision(precision, "newton_schulz5");
  const bool tall = g.size(0) > g.size(1);
  // (s, l), s = min(rows, cols), so that A = X X^T is the smaller square, (s, s)
  const Tensor src = (tall ? g.t() : g).contiguous();
  if (src.numel() == 0) return zeros(g.shape());
  const Tensor x = precision == Precision::bf16 ? quintic_bf16(src) : quintic_f32(src);
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
  // Read here: a PrecisionScope is the calling thread's, which the region's workers do not see.
  const Precision precision = current_precision();
  const int threads = std::max(1, get_num_threads());
  const std::vector<std::vector<Slot*>> work = share_out(slots, threads);
  // One region, each thread its share of whole matrices. Inside a region every matmul runs
  // single-threaded (core/parallel.hpp), so no matrix is split into bands whose bits would
  // depend on the thread count. With one thread there is no region and no split either.
  parallel_for(threads, kParallelGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t)
      for (Slot* s : work[static_cast<size_t>(t)]) orthogonal_step(*s, lr, precision);
  });
}

void Muon::orthogonal_step(Slot& s, double lr, Precision precision) const {
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
    // float64 (gradcheck) stays float32, as float64 products do in a bf16 scope
    const Tensor o =
        newton_schulz5(u.to(DType::f32), std::is_same_v<T, float> ? precision : Precision::fp32);
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
