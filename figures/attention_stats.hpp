// Statistics of attention weights: row entropies, largest weights, softmax Jacobians. Used by
// `qkv train` (attention entropy as a training metric) and `qkv saturation` (also during its
// short trainings).
#pragma once
#include <vector>

#include "autograd/var.hpp"

namespace qkv::figures {

// Mean entropy (nats) of the attention rows of each map (one per layer), averaged over batch,
// heads and query positions with at least one key: a fully masked query's row is all zeros
// and is left out. maps: each (B, h, n, m). The rows' entropies are interp::row_entropy's; as
// the heads share their masked rows, a layer's value is the mean over its heads of
// interp::score_entropy (interp/head_scores.hpp).
std::vector<double> attention_entropy(const std::vector<ag::Var>& maps);

// Over the rows of p (R, m) (each a probability vector, any float dtype):
struct RowStats {
  double mean_entropy = 0;        // mean of -sum p log p (nats); log m is the maximum
  double mean_max_weight = 0;     // mean of max_j p_j
  double saturated_fraction = 0;  // share of rows with max_j p_j > threshold
  double jacobian_norm = 0;       // mean Frobenius norm of the softmax Jacobian diag(p) - p p^T
};
RowStats row_stats(const Tensor& p, double threshold = 0.99);

// ||diag(p) - p p^T||_F for one probability vector, in closed form:
// sqrt(sum p^2 - 2 sum p^3 + (sum p^2)^2).
double softmax_jacobian_norm(const double* p, int64_t m);

}  // namespace qkv::figures
