// Cross-entropy's kernels (see fused.hpp): log-softmax and NLL fused.
#include <cmath>
#include <limits>
#include <vector>

#include "fused.hpp"
#include "lanes.hpp"
#include "parallel.hpp"

namespace qkv {
namespace {

// One row's log-softmax statistics, as log_softmax computes them (core/softmax.cpp): max m and
// lz = log(sum exp(x - m)) rounded to T (0 when m is -inf). e: n values of scratch.
template <class T>
struct RowStats {
  T m, lz;
};
template <class T>
RowStats<T> row_statistics(const T* x, int64_t n, T* e) {
  const T m = kernel::max_lanes(x, n);
  if (m == -std::numeric_limits<T>::infinity()) return {m, 0};
  return {m, static_cast<T>(std::log(kernel::exp_sum_row(x, n, m, e)))};
}

// The row's log-probabilities into p, with log_softmax's bits.
template <class T>
void row_log_probs(const T* x, int64_t n, RowStats<T> st, T* p) {
  if (st.m == -std::numeric_limits<T>::infinity()) return kernel::fill_masked_row<true>(x, n, p);
  kernel::log_probs_row(x, n, st.m, st.lz, p);
}

void check_inputs(const Tensor& logits, const Tensor& targets, double label_smoothing) {
  QKV_CHECK(logits.dim() == 2, "cross_entropy", "logits must be (N, C), got ", logits.shape());
  QKV_CHECK(is_floating(logits.dtype()), "cross_entropy", "logits must be float, got ",
            dtype_name(logits.dtype()), " ", logits.shape());
  QKV_CHECK(
      targets.dtype() == DType::i64 && targets.dim() == 1 && targets.size(0) == logits.size(0),
      "cross_entropy", "targets must be int64 (N) for logits ", logits.shape(), ", got ",
      dtype_name(targets.dtype()), " ", targets.shape());
  QKV_CHECK(label_smoothing >= 0 && label_smoothing <= 1, "cross_entropy",
            "label_smoothing must be in [0, 1], got ", label_smoothing);
}

}  // namespace

namespace detail {

int64_t count_targets(const std::vector<int64_t>& t, int64_t ignore_index, int64_t classes,
                      const char* op, const char* what, const Shape& shape) {
  int64_t count = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == ignore_index) continue;
    QKV_CHECK(t[i] >= 0 && t[i] < classes, op, "target ", t[i], " at row ", i, " out of range [0, ",
              classes, ") for ", what, " ", shape);
    ++count;
  }
  return count;
}

}  // namespace detail

CrossEntropyResult cross_entropy_forward(const Tensor& logits, const Tensor& targets,
                                         int64_t ignore_index, double label_smoothing) {
  check_inputs(logits, targets, label_smoothing);
  const int64_t n = logits.size(0), c = logits.size(1);
  CrossEntropyResult r;
  r.logits = logits.contiguous();
  r.row_max = empty({n}, logits.dtype());
  r.row_log_sum = empty({n}, logits.dtype());
  r.targets = to_vector<int64_t>(targets);
  r.ignore_index = ignore_index;
  r.label_smoothing = label_smoothing;
  const std::vector<int64_t>& t = r.targets;
  r.count = detail::count_targets(t, ignore_index, c, "cross_entropy", "logits", logits.shape());
  const double eps = label_smoothing;
  std::vector<double> row_loss(n, 0.0);
  visit_float(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = r.logits.data<T>();
    T* pm = r.row_max.data<T>();
    T* plz = r.row_log_sum.data<T>();
    parallel_for(n, 3 * c, [&](int64_t lo, int64_t hi) {
      std::vector<T> p(c);  // one row's exps, then its log-probabilities
      for (int64_t i = lo; i < hi; ++i) {
        const T* xi = x + i * c;
        pm[i] = plz[i] = 0;  // read by nothing when the row is ignored
        if (t[i] == ignore_index) continue;
        const RowStats<T> st = row_statistics(xi, c, p.data());
        pm[i] = st.m;
        plz[i] = st.lz;
        row_log_probs(xi, c, st, p.data());
        row_loss[i] = -(1.0 - eps) * p[t[i]];
        if (eps > 0) row_loss[i] -= eps * kernel::sum_lanes(p.data(), c) / c;
      }
    });
  });
  double total = 0;
  for (double l : row_loss) total += l;  // fixed order: deterministic
  r.loss = r.count ? total / r.count : 0.0;
  return r;
}

Tensor cross_entropy_backward(const CrossEntropyResult& f, double g) {
  const Tensor& x = f.logits;
  const int64_t n = x.size(0), c = x.size(1);
  if (!f.count) return zeros({n, c}, x.dtype());
  Tensor dx = empty({n, c}, x.dtype());  // every row written below
  const double scale = g / f.count, eps = f.label_smoothing;
  const std::vector<int64_t>& t = f.targets;
  visit_float(x.dtype(), "cross_entropy backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    const T* pm = f.row_max.data<T>();
    const T* plz = f.row_log_sum.data<T>();
    T* o = dx.data<T>();
    parallel_for(n, 2 * c, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        T* oi = o + i * c;
        if (t[i] == f.ignore_index) {  // padding: no gradient
          std::fill(oi, oi + c, T(0));
          continue;
        }
        // d/dlogit_j = softmax_j - q_j, q = (1 - eps) onehot(t) + eps / C, from the
        // log-probabilities written into oi first
        row_log_probs(px + i * c, c, RowStats<T>{pm[i], plz[i]}, oi);
        const T lp_t = oi[t[i]];
        // In T, so that the loop vectorizes at the full width: scale * softmax - scale * eps / C
        const T s = static_cast<T>(scale), s_eps = static_cast<T>(scale * eps / c);
        for (int64_t j = 0; j < c; ++j) oi[j] = s * kernel::fast_exp<T>(oi[j]) - s_eps;
        oi[t[i]] =
            static_cast<T>(scale * (double(kernel::fast_exp<T>(lp_t)) - eps / c - (1.0 - eps)));
      }
    });
  });
  return dx;
}

}  // namespace qkv
