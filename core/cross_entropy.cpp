// Cross-entropy's kernels (see fused.hpp): log-softmax and NLL fused.
#include <cmath>
#include <vector>

#include "fused.hpp"
#include "lanes.hpp"
#include "parallel.hpp"

namespace qkv {

CrossEntropyResult cross_entropy_forward(const Tensor& logits, const Tensor& targets,
                                         int64_t ignore_index, double label_smoothing) {
  QKV_CHECK(logits.dim() == 2, "cross_entropy", "logits must be (N, C), got ", logits.shape());
  QKV_CHECK(
      targets.dtype() == DType::i64 && targets.dim() == 1 && targets.size(0) == logits.size(0),
      "cross_entropy", "targets must be int64 (N) for logits ", logits.shape(), ", got ",
      dtype_name(targets.dtype()), " ", targets.shape());
  QKV_CHECK(label_smoothing >= 0 && label_smoothing <= 1, "cross_entropy",
            "label_smoothing must be in [0, 1], got ", label_smoothing);
  const int64_t n = logits.size(0), c = logits.size(1);
  CrossEntropyResult r;
  r.log_probs = log_softmax(logits, 1).contiguous();  // (N, C)
  r.targets = to_vector<int64_t>(targets);
  r.ignore_index = ignore_index;
  r.label_smoothing = label_smoothing;
  const std::vector<int64_t>& t = r.targets;
  for (int64_t i = 0; i < n; ++i) {
    if (t[i] == ignore_index) continue;
    QKV_CHECK(t[i] >= 0 && t[i] < c, "cross_entropy", "target ", t[i], " at row ", i,
              " out of range [0, ", c, ") for logits ", logits.shape());
    ++r.count;
  }
  const double eps = label_smoothing;
  std::vector<double> row_loss(n, 0.0);
  visit_float(r.log_probs.dtype(), "cross_entropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = r.log_probs.data<T>();
    parallel_for(n, c, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        if (t[i] == ignore_index) continue;
        row_loss[i] = -(1.0 - eps) * p[i * c + t[i]];
        if (eps > 0) row_loss[i] -= eps * kernel::sum_lanes(p + i * c, c) / c;
      }
    });
  });
  double total = 0;
  for (double l : row_loss) total += l;  // fixed order: deterministic
  r.loss = r.count ? total / r.count : 0.0;
  return r;
}

Tensor cross_entropy_backward(const CrossEntropyResult& f, double g) {
  const Tensor& lp = f.log_probs;
  const int64_t n = lp.size(0), c = lp.size(1);
  if (!f.count) return zeros({n, c}, lp.dtype());
  Tensor dx = empty({n, c}, lp.dtype());  // every row written below
  const double scale = g / f.count, eps = f.label_smoothing;
  const std::vector<int64_t>& t = f.targets;
  visit_float(lp.dtype(), "cross_entropy backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = lp.data<T>();
    T* o = dx.data<T>();
    parallel_for(n, c, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        T* oi = o + i * c;
        if (t[i] == f.ignore_index) {  // padding: no gradient
          std::fill(oi, oi + c, T(0));
          continue;
        }
        // d/dlogit_j = softmax_j - q_j, q = (1 - eps) onehot(t) + eps / C
        const T* pi = p + i * c;
        // In T, so that the loop vectorizes at the full width: scale * softmax - scale * eps / C
        const T s = static_cast<T>(scale), s_eps = static_cast<T>(scale * eps / c);
        for (int64_t j = 0; j < c; ++j) oi[j] = s * kernel::fast_exp<T>(pi[j]) - s_eps;
        oi[t[i]] =
            static_cast<T>(scale * (double(kernel::fast_exp<T>(pi[t[i]])) - eps / c - (1.0 - eps)));
      }
    });
  });
  return dx;
}

}  // namespace qkv
