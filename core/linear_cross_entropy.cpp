// The output layer and its cross-entropy in one op, bf16 (see fused.hpp).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <vector>

#include "bf16_cache.hpp"
#include "fused.hpp"
#include "gemm_stats.hpp"
#include "lanes.hpp"
#include "onednn.hpp"
#include "parallel.hpp"

namespace qkv {
namespace {

void check_lce_inputs(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& targets,
                      double label_smoothing) {
  QKV_CHECK(x.defined() && w.defined() && x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1),
            "linear_cross_entropy", "input ", x.shape(), " and weight ", w.shape(),
            " do not fit (x: (N, d), w: (V, d))");
  QKV_CHECK(x.dtype() == DType::f32 && w.dtype() == DType::f32 &&
                (!b.defined() || b.dtype() == DType::f32),
            "linear_cross_entropy", "bf16 takes float32 inputs, got ", dtype_name(x.dtype()), " ",
            x.shape(), " and ", dtype_name(w.dtype()), " ", w.shape());
  QKV_CHECK(!b.defined() || b.shape() == Shape{w.size(0)}, "linear_cross_entropy", "bias ",
            b.shape(), " for weight ", w.shape());
  QKV_CHECK(targets.dtype() == DType::i64 && targets.dim() == 1 && targets.size(0) == x.size(0),
            "linear_cross_entropy", "targets must be int64 (N) for input ", x.shape(), ", got ",
            dtype_name(targets.dtype()), " ", targets.shape());
  QKV_CHECK(label_smoothing >= 0 && label_smoothing <= 1, "linear_cross_entropy",
            "label_smoothing must be in [0, 1], got ", label_smoothing);
  QKV_CHECK(w.size(0) > 0, "linear_cross_entropy", "no classes: weight ", w.shape());
}

// What one chunk's rows need besides their logits.
struct RowTask {
  const std::vector<int64_t>& t;
  int64_t ignore_index, v;
  double eps, scale;  // scale: 1 / count
  bool with_grad;
};

// Row i's logits l (v floats, overwritten with its gradient row when with_grad) -> its loss
// term; the gradient (softmax - q) * scale rounded into d (v bf16) and added to colsum.
double row_loss_and_grad(const RowTask& r, int64_t i, float* l, bf16_t* d, float* colsum) {
  const int64_t v = r.v, ti = r.t[i];
  if (ti == r.ignore_index) {
    if (r.with_grad) std::fill(d, d + v, bf16_t(0));
    return 0.0;
  }
  const float m = kernel::max_lanes(l, v);
  const double mean_logit = r.eps > 0 ? kernel::sum_lanes(l, v) / v : 0.0;
  const float l_t = l[ti];
  const double z = kernel::exp_sum_row(l, v, m, l);  // l now holds exp(l - m)
  const double lz = std::log(z);
  double loss = -(1.0 - r.eps) * (double(l_t) - m - lz);
  if (r.eps > 0) loss -= r.eps * (mean_logit - m - lz);
  if (!r.with_grad) return loss;
  const float s = static_cast<float>(r.scale / z), s_eps = static_cast<float>(r.scale * r.eps / v);
  for (int64_t j = 0; j < v; ++j) l[j] = s * l[j] - s_eps;  // scale * (softmax_j - eps / v)
  l[ti] -= static_cast<float>(r.scale * (1.0 - r.eps));
  if (colsum)
    for (int64_t j = 0; j < v; ++j) colsum[j] += l[j];
  to_bf16(l, d, v);
  return loss;
}

}  // namespace

LinearCrossEntropyResult linear_cross_entropy_forward(const Tensor& x_in, const Tensor& w,
                                                      const Tensor& b, const Tensor& targets,
                                                      int64_t ignore_index, double label_smoothing,
                                                      bool with_grad) {
  check_lce_inputs(x_in, w, b, targets, label_smoothing);
  const int64_t n = x_in.size(0), d = x_in.size(1), v = w.size(0);
  LinearCrossEntropyResult r;
  r.x = x_in.contiguous();
  r.w = w.contiguous();
  const std::vector<int64_t> t = to_vector<int64_t>(targets);
  r.count = detail::count_targets(t, ignore_index, v, "linear_cross_entropy", "weight", w.shape());
  if (n == 0) return r;
  with_grad = with_grad && r.count > 0;
  const int64_t chunks = (n + kLinearCrossEntropyChunk - 1) / kLinearCrossEntropyChunk;
  const Tensor bc = b.defined() ? b.contiguous() : Tensor();
  // x: (N, d), w: (V, d), both packed bf16 copies (the cache keeps them for the backward)
  const bf16_t* xb = detail::bf16_activation(detail::StoredMatrix{r.x, n, d, d}, 0);
  const bf16_t* wb = detail::bf16_weight(detail::StoredMatrix{r.w, v, d, d});
  if (with_grad) r.dlogits = std::make_shared<Storage>(size_t(n) * v * sizeof(bf16_t));
  bf16_t* dl = with_grad ? static_cast<bf16_t*>(r.dlogits->data()) : nullptr;
  // Each chunk's column sums apart, added in chunk order after: the same bits at any thread count.
  const bool colsums = with_grad && b.defined();
  std::vector<float> partial(colsums ? size_t(chunks) * v : 0, 0.0f);
  std::vector<double> row_loss(n, 0.0);
  const RowTask task{
      t, ignore_index, v, label_smoothing, 1.0 / std::max<int64_t>(r.count, 1), with_grad};
  // --gemm-shapes: each chunk's product timed, their sum recorded as the whole (N, V) product
  const bool timing = gemm_stats_enabled();
  std::vector<double> product_seconds(timing ? chunks : 0);
  std::atomic<int> workers{0};
  parallel_for(chunks, kLinearCrossEntropyChunk * v * (2 * d + 8), [&](int64_t lo, int64_t hi) {
    ++workers;
    Storage scratch(size_t(kLinearCrossEntropyChunk) * v * sizeof(float));
    float* logits = static_cast<float*>(scratch.data());  // (rows, V): one chunk's logits
    for (int64_t c = lo; c < hi; ++c) {
      const int64_t r0 = c * kLinearCrossEntropyChunk;
      const int64_t rows = std::min(kLinearCrossEntropyChunk, n - r0);
      // logits (rows, V) = x[r0 : r0 + rows] (rows, d) w^T (d, V) + b
      const auto t0 = std::chrono::steady_clock::now();
      kernel::gemm_bf16_this_thread(false, true, rows, v, d, xb + r0 * d, d, wb, d, logits, v,
                                    bc.defined() ? bc.data<float>() : nullptr);
      if (timing)
        product_seconds[c] =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      float* colsum = colsums ? partial.data() + c * v : nullptr;
      for (int64_t i = 0; i < rows; ++i)
        row_loss[r0 + i] = row_loss_and_grad(task, r0 + i, logits + i * v,
                                             dl ? dl + (r0 + i) * v : nullptr, colsum);
    }
  });
  if (timing) {  // the threads ran their chunks side by side: their mean time is the wall time
    double sum = 0;
    for (double t : product_seconds) sum += t;
    detail::gemm_stats_record(n, v, d, false, true, sum / std::max(1, workers.load()), 1, true);
  }
  double total = 0;
  for (double l : row_loss) total += l;  // fixed order: deterministic
  r.loss = r.count ? total / r.count : 0.0;
  if (colsums) {
    r.bias_grad = zeros({v}, DType::f32);
    float* db = r.bias_grad.data<float>();
    for (int64_t c = 0; c < chunks; ++c)
      for (int64_t j = 0; j < v; ++j) db[j] += partial[c * v + j];
  }
  return r;
}

LinearCrossEntropyGrads linear_cross_entropy_backward(const LinearCrossEntropyResult& f, double g,
                                                      bool need_dx, bool need_dw, bool need_db) {
  const int64_t n = f.x.size(0), d = f.x.size(1), v = f.w.size(0);
  LinearCrossEntropyGrads out;
  if (!f.dlogits) {  // no row counted: a zero gradient
    if (need_dx) out.dx = zeros({n, d}, DType::f32);
    if (need_dw) out.dw = zeros({v, d}, DType::f32);
    if (need_db) out.db = zeros({v}, DType::f32);
    return out;
  }
  const bf16_t* dl = static_cast<const bf16_t*>(f.dlogits->data());
  if (need_dx) {  // dx (N, d) = dlogits (N, V) w (V, d)
    out.dx = empty({n, d}, DType::f32);
    const bf16_t* wb = detail::bf16_weight(detail::StoredMatrix{f.w, v, d, d});
    detail::timed_products(
        n, d, v, false, false, 1,
        [&] {
          kernel::gemm_bf16(false, false, n, d, v, dl, v, wb, d, out.dx.data<float>(), d, nullptr);
        },
        true);
  }
  if (need_dw) {  // dw (V, d) = dlogits^T (V, N) x (N, d)
    out.dw = empty({v, d}, DType::f32);
    const bf16_t* xb = detail::bf16_activation(detail::StoredMatrix{f.x, n, d, d}, 0);
    detail::timed_products(
        v, d, n, true, false, 1,
        [&] {
          kernel::gemm_bf16(true, false, v, d, n, dl, v, xb, d, out.dw.data<float>(), d, nullptr);
        },
        true);
  }
  if (need_db) out.db = f.bias_grad.defined() ? f.bias_grad.clone() : zeros({v}, DType::f32);
  if (g != 1.0)
    for (Tensor* t : {&out.dx, &out.dw, &out.db})
      if (t->defined()) *t = mul(*t, g);
  return out;
}

}  // namespace qkv
