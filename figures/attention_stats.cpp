#include "figures/attention_stats.hpp"

#include <algorithm>
#include <cmath>

#include "interp/head_scores.hpp"

namespace qkv::figures {

std::vector<double> attention_entropy(const std::vector<ag::Var>& maps) {
  std::vector<double> out;
  for (const ag::Var& a : maps) {
    const Tensor h = interp::row_entropy(a.data());        // (B, h, n)
    const Tensor live = interp::attending_rows(a.data());  // rows that attend somewhere
    const double n = sum(live.to(DType::f64)).item();
    out.push_back(n > 0 ? sum(where(live, h, zeros({}, DType::f64))).item() / n : 0.0);
  }
  return out;
}

double softmax_jacobian_norm(const double* p, int64_t m) {
  double s2 = 0, s3 = 0;
  for (int64_t j = 0; j < m; ++j) s2 += p[j] * p[j], s3 += p[j] * p[j] * p[j];
  return std::sqrt(std::max(0.0, s2 - 2 * s3 + s2 * s2));
}

RowStats row_stats(const Tensor& probs, double threshold) {
  QKV_CHECK(probs.dim() == 2 && probs.size(0) > 0, "row_stats",
            "expects (R, m) probabilities, got ", probs.shape());
  const Tensor p = probs.to(DType::f64).contiguous();
  const int64_t r = p.size(0), m = p.size(1);
  const double* d = p.data<double>();
  RowStats s;
  for (int64_t i = 0; i < r; ++i) {
    const double* row = d + i * m;
    double h = 0, top = 0;
    for (int64_t j = 0; j < m; ++j) {
      if (row[j] > 0) h -= row[j] * std::log(row[j]);
      top = std::max(top, row[j]);
    }
    s.mean_entropy += h;
    s.mean_max_weight += top;
    s.saturated_fraction += top > threshold ? 1 : 0;
    s.jacobian_norm += softmax_jacobian_norm(row, m);
  }
  const double n = static_cast<double>(r);
  s.mean_entropy /= n, s.mean_max_weight /= n, s.saturated_fraction /= n, s.jacobian_norm /= n;
  return s;
}

}  // namespace qkv::figures
