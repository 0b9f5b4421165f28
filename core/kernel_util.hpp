// Internal helpers of the attention kernels (core/attention.cpp, core/local_attention.cpp,
// core/linear_attention.cpp): BLAS calls on raw pointers and per-batch-entry addressing of
// strided tensors whose last two dims are (rows, cols). Not part of the public API.
#pragma once
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "fused.hpp"
#include "parallel.hpp"
#include "tensor.hpp"

namespace qkv::kernel {

// C = alpha op(A) op(B) + beta C, row-major; op transposes when ta / tb.
template <class T>
void gemm(bool ta, bool tb, int64_t n, int64_t m, int64_t k, T alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  const auto TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, TA, TB, n, m, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    cblas_dgemm(CblasRowMajor, TA, TB, n, m, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// For the scope, the calling thread's OpenMP thread count is 1, so a library call it makes
// outside a parallel region (OpenBLAS's OpenMP build, oneDNN) runs on it alone: a product whose
// bits must not depend on the thread count (some of OpenBLAS's kernels, Prescott's and Core2's
// among them, give other bits for a threaded call than for a single-threaded one).
class OmpOneThread {
 public:
  OmpOneThread() : was_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OmpOneThread() { omp_set_num_threads(was_); }
  OmpOneThread(const OmpOneThread&) = delete;
  OmpOneThread& operator=(const OmpOneThread&) = delete;

 private:
  int was_;
};

// The same product spread over the thread pool (core/matmul.cpp): each thread runs one
// single-threaded GEMM on its own band of C's rows (or columns, when C is wider than tall), so
// no thread ever waits on another inside BLAS. Called inside a parallel region, or for a small
// product, it is plain gemm. Each element of C is computed by one thread with the same
// reduction order for a given thread count, so results are deterministic; under
// ThreadInvariantProducts the bands are fixed by the shape, the same at any thread count.
// row_init (length m, or null): every row of C is first set to it by the thread that owns it,
// then the product is added (pass beta = 1): a bias written by the thread that owns the rows.
template <class T>
void gemm_bands(bool ta, bool tb, int64_t n, int64_t m, int64_t k, T alpha, const T* a, int64_t lda,
                const T* b, int64_t ldb, T beta, T* c, int64_t ldc, const T* row_init = nullptr);

// Below this many multiply-adds one thread does a product in one call: forking costs more than
// it saves (bench_matmul, 2 threads: 64^3 takes 5 us on one thread, 9 us in two bands; 80^3
// breaks even).
constexpr int64_t kBandMinWork = 2 * 64 * 64 * 64;
// Bands start at multiples of this many rows (columns), so every band but the last fills whole
// register tiles of the sgemm kernel.
constexpr int64_t kBandAlign = 16;
// Under ThreadInvariantProducts (core/parallel.hpp) a product is cut into at most this many
// bands, their boundaries fixed by the shape: enough to keep 2, 4 or 8 threads evenly busy.
constexpr int64_t kInvariantBands = 8;

// Where a band starts in a stored operand of row stride ld: row lo of op(A), column lo of
// op(B), op transposing when trans. Every banded product (gemm_bands, gemm_bf16) cuts this way.
inline int64_t op_row_offset(bool trans, int64_t ld, int64_t lo) { return trans ? lo : lo * ld; }
inline int64_t op_col_offset(bool trans, int64_t ld, int64_t lo) { return trans ? lo * ld : lo; }

// Rows (columns) per band of a thread-invariant product whose split dimension is len long.
inline int64_t invariant_band_size(int64_t len) {
  const int64_t per_band = (len + kInvariantBands - 1) / kInvariantBands;
  return (per_band + kBandAlign - 1) / kBandAlign * kBandAlign;
}

// Runs band(lo, hi) over [0, len) in the bands of a thread-invariant product, in parallel when
// called outside a parallel region.
template <class F>
void for_invariant_bands(int64_t len, F&& band) {
  const int64_t size = invariant_band_size(len), count = (len + size - 1) / size;
  parallel_for(count, kParallelGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) band(i * size, std::min(len, (i + 1) * size));
  });
}

// Runs band(lo, hi) over [0, len) in a banded product's split: under ThreadInvariantProducts
// the bands fixed by the shape (for_invariant_bands), otherwise one band per thread, each
// starting at a multiple of kBandAlign (deterministic for a given thread count). Inside a
// parallel region the bands run in turn on the calling thread (parallel_for does not nest).
template <class F>
void for_product_bands(int64_t len, F&& band) {
  if (thread_invariant_products()) return for_invariant_bands(len, band);
  const int64_t units = (len + kBandAlign - 1) / kBandAlign;
  // Cost per unit high enough that parallel_for always forks.
  parallel_for(units, kParallelGrain, [&](int64_t lo_u, int64_t hi_u) {
    band(lo_u * kBandAlign, std::min(hi_u * kBandAlign, len));
  });
}

// Storage offset of every batch entry of t (batch dims: all but the last two), row-major order.
inline std::vector<int64_t> batch_offsets(const Tensor& t, int64_t nb) {
  std::vector<int64_t> off(nb);
  const int64_t bd = t.dim() - 2;
  for (int64_t i = 0; i < nb; ++i) {
    int64_t rem = i, o = t.offset();
    for (int64_t d = bd - 1; d >= 0; --d) {
      o += (rem % t.size(d)) * t.stride(d);
      rem /= t.size(d);
    }
    off[i] = o;
  }
  return off;
}

// The shapes every attention kernel shares. q: (..., n, d_k), k: (..., m, d_k), v: (..., m, d_v).
struct QKVDims {
  Shape batch;
  int64_t nb = 0, n = 0, m = 0, dk = 0, dv = 0;
};

// Checks that q, k, v share one float dtype and one batch shape and that their widths fit;
// throws qkv::Error naming op and the three shapes.
inline QKVDims check_qkv(const Tensor& q, const Tensor& k, const Tensor& v, const char* op) {
  QKV_CHECK(q.defined() && k.defined() && v.defined(), op, "undefined tensor");
  QKV_CHECK(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim(), op, "q ", q.shape(), ", k ",
            k.shape(), ", v ", v.shape(), " must have one rank >= 2");
  QKV_CHECK(q.dtype() == k.dtype() && k.dtype() == v.dtype() && is_floating(q.dtype()), op,
            "q, k, v must share one float dtype, got ", dtype_name(q.dtype()), ", ",
            dtype_name(k.dtype()), ", ", dtype_name(v.dtype()));
  QKVDims d;
  d.batch = Shape(q.shape().begin(), q.shape().end() - 2);
  const Shape kb(k.shape().begin(), k.shape().end() - 2),
      vb(v.shape().begin(), v.shape().end() - 2);
  d.n = q.size(-2);
  d.m = k.size(-2);
  d.dk = q.size(-1);
  d.dv = v.size(-1);
  QKV_CHECK(kb == d.batch && vb == d.batch && k.size(-1) == d.dk && v.size(-2) == d.m, op, "q ",
            q.shape(), ", k ", k.shape(), ", v ", v.shape(),
            " do not fit (q: (..., n, d_k), k: (..., m, d_k), v: (..., m, d_v), one batch shape)");
  d.nb = numel_of(d.batch);
  return d;
}

// A bool mask (true = may attend) expanded to the scores (batch..., n, m) without a copy, with
// each batch entry's offset and the strides along n and m. Undefined mask: attend everywhere.
struct ScoreMask {
  Tensor mask;
  std::vector<int64_t> moff;
  int64_t msn = 0, msm = 0;
};

inline ScoreMask expand_mask(const Tensor& mask, const QKVDims& d, const char* op) {
  ScoreMask s;
  if (!mask.defined()) return s;
  QKV_CHECK(mask.dtype() == DType::b8, op, "mask must be bool (true = may attend), got ",
            dtype_name(mask.dtype()), " ", mask.shape());
  Shape full = d.batch;
  full.insert(full.end(), {d.n, d.m});
  QKV_CHECK(broadcast_shapes(full, mask.shape(), op) == full, op, "mask ", mask.shape(),
            " does not broadcast to the scores ", full);
  s.mask = mask.expand(full);
  s.moff = batch_offsets(s.mask, d.nb);
  s.msn = s.mask.stride(-2);
  s.msm = s.mask.stride(-1);
  return s;
}

// t itself when BLAS can read it row by row (unit column stride, rows at least a row apart),
// else a contiguous copy.
inline Tensor blas_rows(const Tensor& t) {
  if (t.stride(-1) == 1 && t.stride(-2) >= std::max<int64_t>(t.size(-1), 1)) return t;
  return t.contiguous();
}

// A fresh tensor of shape s; 4-d (B, H, n, d) is stored as (B, n, H, d), the layout merging
// heads reads without a copy.
inline Tensor empty_heads_layout(const Shape& s, DType dt) {
  if (s.size() != 4) return empty(s, dt);
  return empty({s[0], s[2], s[1], s[3]}, dt).permute({0, 2, 1, 3});
}

// The output (..., n, dv), in the heads layout, and log-sum-exp (..., n) of a q, k, v kernel.
// With no keys (m == 0) every row is fully masked: out comes back zero and lse -inf, and the
// caller returns them as they are.
inline AttentionResult attention_result_for(const QKVDims& d, DType dt) {
  Shape oshape = d.batch, lshape = d.batch;
  oshape.insert(oshape.end(), {d.n, d.dv});
  lshape.push_back(d.n);
  AttentionResult r{empty_heads_layout(oshape, dt), empty(lshape, dt)};
  if (d.m == 0) {
    r.out.zero_();
    r.lse.fill_(-INFINITY);
  }
  return r;
}

// Gradients for q, k, v, each shaped like its input and stored in the heads layout. When a
// side is empty (no batch, no query or no key) nothing reaches them: they come back zeroed and
// the caller returns them as they are (`empty` says whether that is the case).
inline AttentionGrads attention_grads_like(const Tensor& q, const Tensor& k, const Tensor& v,
                                           bool empty) {
  AttentionGrads g{empty_heads_layout(q.shape(), q.dtype()),
                   empty_heads_layout(k.shape(), q.dtype()),
                   empty_heads_layout(v.shape(), q.dtype())};
  if (empty) {
    g.dq.zero_();
    g.dk.zero_();
    g.dv.zero_();
  }
  return g;
}

// A scratch buffer of at least n elements, one per thread and element type, shared by every
// kernel in core/: valid until the next workspace call on the same thread (kernels never nest).
template <class T>
std::vector<T>& workspace(size_t n) {
  thread_local std::vector<T> ws;
  if (ws.size() < n) ws.resize(n);
  return ws;
}

// One operand: base pointer, per-batch-entry offsets, row stride.
template <class T>
struct Mat {
  T* p = nullptr;
  std::vector<int64_t> off;
  int64_t ld = 0;
  T* row(int64_t b, int64_t i) const { return p + off[b] + i * ld; }
};
template <class T>
Mat<T> mat(const Tensor& t, int64_t nb) {
  return Mat<T>{static_cast<T*>(t.storage()->data()), batch_offsets(t, nb), t.stride(-2)};
}

}  // namespace qkv::kernel
