// Attention without the n x m matrix: a tiled forward with an online softmax, and a backward
// that recomputes each tile's weights from the saved log-sum-exp of its rows.
//
// Work is split into items that own their outputs: the forward into (batch entry, query
// tile), the backward into batch entries (the key-tile gradients dk, dv are sums over query
// tiles). Items run in parallel, each doing single-threaded GEMMs on its tiles in a fixed
// order, so results are the same whichever thread runs an item.
#include <cblas.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "attention_backend.hpp"
#include "attention_bf16.hpp"
#include "attention_onednn.hpp"
#include "attention_rows.hpp"
#include "fused.hpp"
#include "kernel_util.hpp"
#include "lanes.hpp"
#include "parallel.hpp"

namespace qkv {
namespace {

// BLAS on raw pointers and per-batch-entry addressing, shared with the variant kernels.
using kernel::batch_offsets;
using kernel::blas_rows;
using kernel::empty_heads_layout;
using kernel::exp_row;
using kernel::fast_exp;
using kernel::gemm;
using kernel::Mat;
using kernel::mat;
using kernel::scale_mask_row;
using kernel::ScoredRow;
using kernel::workspace;

constexpr int64_t kTileQ = 64;    // query rows per tile
constexpr int64_t kTileK = 256;   // keys per tile (forward)
constexpr int64_t kTileKB = 128;  // keys per tile (backward: S, dP and P tiles side by side)

using Problem = kernel::AttentionProblem;

Problem check(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
              const char* op) {
  Problem p;
  static_cast<kernel::QKVDims&>(p) = kernel::check_qkv(q, k, v, op);
  static_cast<kernel::ScoreMask&>(p) = kernel::expand_mask(mask, p, op);
  return p;
}

template <class T>
void forward_impl(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, T sc,
                  Tensor& out, Tensor& lse) {
  const Mat<T> Q = mat<T>(q, p.nb), K = mat<T>(k, p.nb), V = mat<T>(v, p.nb);
  Mat<T> O = mat<T>(out, p.nb);
  T* L = lse.data<T>();
  const uint8_t* mbase =
      p.mask.defined() ? static_cast<const uint8_t*>(p.mask.storage()->data()) : nullptr;
  const int64_t nqt = (p.n + kTileQ - 1) / kTileQ;
  const int64_t tk = std::min(kTileK, p.m);
  parallel_for(p.nb * nqt, kTileQ * p.m * (p.dk + p.dv) * 2, [&](int64_t lo, int64_t hi) {
    std::vector<T>& ws = workspace<T>(kTileQ * tk + kTileQ * p.dv);
    T* S = ws.data();
    T* acc = S + kTileQ * tk;
    double mrun[kTileQ], lrun[kTileQ];
    for (int64_t it = lo; it < hi; ++it) {
      const int64_t bi = it / nqt, q0 = (it % nqt) * kTileQ, qb = std::min(kTileQ, p.n - q0);
      const T* qp = Q.p + Q.off[bi] + q0 * Q.ld;
      std::fill(acc, acc + qb * p.dv, T(0));
      for (int64_t i = 0; i < qb; ++i) mrun[i] = -INFINITY, lrun[i] = 0;
      for (int64_t k0 = 0; k0 < p.m; k0 += tk) {
        const int64_t kb = std::min(tk, p.m - k0);
        gemm<T>(false, true, qb, kb, p.dk, T(1), qp, Q.ld, K.p + K.off[bi] + k0 * K.ld, K.ld, T(0),
                S, kb);
        for (int64_t i = 0; i < qb; ++i) {
          T* s = S + i * kb;
          const uint8_t* mrow =
              mbase ? mbase + p.moff[bi] + (q0 + i) * p.msn + k0 * p.msm : nullptr;
          const ScoredRow<T> row = scale_mask_row(s, kb, sc, mrow, p.msm);
          const double mnew = std::max<double>(mrun[i], row.max);
          if (mnew == -INFINITY) {  // nothing to attend to so far: weights all 0
            // unless a score is NaN: it propagates
            if (kernel::any_nan(s + row.lo, row.hi - row.lo)) mrun[i] = lrun[i] = NAN;
            std::fill(s, s + kb, T(0));
            continue;
          }
          const T mt = static_cast<T>(mnew);
          exp_row(s, kb, row, mt);
          const double z = kernel::sum_lanes(s, kb);
          if (mrun[i] != mnew) {
            const T alpha = mrun[i] == -INFINITY ? T(0) : fast_exp<T>(static_cast<T>(mrun[i]) - mt);
            lrun[i] *= alpha;
            T* a = acc + i * p.dv;
            for (int64_t j = 0; j < p.dv; ++j) a[j] *= alpha;
            mrun[i] = mnew;
          }
          lrun[i] += z;
        }
        gemm<T>(false, false, qb, p.dv, kb, T(1), S, kb, V.p + V.off[bi] + k0 * V.ld, V.ld, T(1),
                acc, p.dv);
      }
      for (int64_t i = 0; i < qb; ++i) {
        T* o = O.p + O.off[bi] + (q0 + i) * O.ld;
        const T* a = acc + i * p.dv;
        if (lrun[i] == 0) {
          std::fill(o, o + p.dv, T(0));
          L[bi * p.n + q0 + i] = -std::numeric_limits<T>::infinity();
          continue;
        }
        const T inv = static_cast<T>(1.0 / lrun[i]);
        for (int64_t j = 0; j < p.dv; ++j) o[j] = a[j] * inv;
        L[bi * p.n + q0 + i] = static_cast<T>(mrun[i] + std::log(lrun[i]));
      }
    }
  });
}

template <class T>
void zero_rows(T* p, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) std::fill(p + r * ld, p + r * ld + cols, T(0));
}

template <class T>
void backward_impl(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                   const Tensor& out, const Tensor& lse, const Tensor& dout, T sc,
                   AttentionGrads& g) {
  const Mat<T> Q = mat<T>(q, p.nb), K = mat<T>(k, p.nb), V = mat<T>(v, p.nb);
  const Mat<T> O = mat<T>(out, p.nb), dO = mat<T>(dout, p.nb);
  Mat<T> dQ = mat<T>(g.dq, p.nb), dK = mat<T>(g.dk, p.nb), dV = mat<T>(g.dv, p.nb);
  const T* L = lse.data<T>();
  const uint8_t* mbase =
      p.mask.defined() ? static_cast<const uint8_t*>(p.mask.storage()->data()) : nullptr;
  const int64_t tq = std::min(kTileQ, p.n), tk = std::min(kTileKB, p.m);
  parallel_for(p.nb, p.n * p.m * (2 * p.dk + 2 * p.dv), [&](int64_t lo, int64_t hi) {
    std::vector<T>& ws = workspace<T>(2 * tq * tk + p.n);
    T* P = ws.data();
    T* dS = P + tq * tk;
    T* D = dS + tq * tk;
    for (int64_t bi = lo; bi < hi; ++bi) {
      T* dq = dQ.p + dQ.off[bi];
      T* dk = dK.p + dK.off[bi];
      T* dv = dV.p + dV.off[bi];
      zero_rows(dq, p.n, p.dk, dQ.ld);
      zero_rows(dk, p.m, p.dk, dK.ld);
      zero_rows(dv, p.m, p.dv, dV.ld);
      const T* lrow = L + bi * p.n;
      // D_i = sum_j dO_ij O_ij = sum_j P_ij dP_ij: the softmax backward's row term.
      for (int64_t i = 0; i < p.n; ++i) {
        const T* o = O.p + O.off[bi] + i * O.ld;
        const T* go = dO.p + dO.off[bi] + i * dO.ld;
        D[i] = static_cast<T>(kernel::dot_lanes(o, go, p.dv));
      }
      for (int64_t k0 = 0; k0 < p.m; k0 += tk) {
        const int64_t kb = std::min(tk, p.m - k0);
        const T* kp = K.p + K.off[bi] + k0 * K.ld;
        const T* vp = V.p + V.off[bi] + k0 * V.ld;
        for (int64_t q0 = 0; q0 < p.n; q0 += tq) {
          const int64_t qb = std::min(tq, p.n - q0);
          const T* qp = Q.p + Q.off[bi] + q0 * Q.ld;
          const T* gop = dO.p + dO.off[bi] + q0 * dO.ld;
          // P = softmax weights of this tile, recomputed: exp(s - lse); masked or dead rows 0.
          gemm<T>(false, true, qb, kb, p.dk, T(1), qp, Q.ld, kp, K.ld, T(0), P, kb);
          for (int64_t i = 0; i < qb; ++i) {
            T* s = P + i * kb;
            const T l = lrow[q0 + i];
            if (l == -std::numeric_limits<T>::infinity()) {
              std::fill(s, s + kb, T(0));
              continue;
            }
            const uint8_t* mrow =
                mbase ? mbase + p.moff[bi] + (q0 + i) * p.msn + k0 * p.msm : nullptr;
            exp_row(s, kb, scale_mask_row(s, kb, sc, mrow, p.msm), l);
          }
          // dV += P^T dO;  dP = dO V^T
          gemm<T>(true, false, kb, p.dv, qb, T(1), P, kb, gop, dO.ld, T(1), dv + k0 * dV.ld, dV.ld);
          gemm<T>(false, true, qb, kb, p.dv, T(1), gop, dO.ld, vp, V.ld, T(0), dS, kb);
          // dS = P (dP - D) * scale: the gradient of the scaled scores, through the softmax
          for (int64_t i = 0; i < qb; ++i) {
            const T di = D[q0 + i];
            T* ds = dS + i * kb;
            const T* pr = P + i * kb;
            for (int64_t j = 0; j < kb; ++j) ds[j] = pr[j] * (ds[j] - di) * sc;
          }
          // dQ += dS K;  dK += dS^T Q
          gemm<T>(false, false, qb, p.dk, kb, T(1), dS, kb, kp, K.ld, T(1), dq + q0 * dQ.ld, dQ.ld);
          gemm<T>(true, false, kb, p.dk, qb, T(1), dS, kb, qp, Q.ld, T(1), dk + k0 * dK.ld, dK.ld);
        }
      }
    }
  });
}

}  // namespace

AttentionResult attention_forward(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                  const Tensor& mask, double scale) {
  const Problem p = check(q_in, k_in, v_in, mask, "attention");
  const Tensor q = blas_rows(q_in), k = blas_rows(k_in), v = blas_rows(v_in);
  AttentionResult r = kernel::attention_result_for(p, q.dtype());
  if (q.dtype() == DType::f32 && current_precision() == Precision::bf16)
    r.precision = Precision::bf16;
  if (r.out.numel() == 0 || p.m == 0) return r;  // nothing to compute, or all rows masked
  if (r.precision == Precision::bf16) {
    if (attention_backend_for(p.n, p.m) == AttentionBackend::onednn)
      kernel::attention_forward_onednn(p, q, k, v, static_cast<float>(scale), r.out, r.lse);
    else
      kernel::attention_forward_bf16(p, q, k, v, static_cast<float>(scale), r.out, r.lse);
    return r;
  }
  visit_float(q.dtype(), "attention", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forward_impl<T>(p, q, k, v, static_cast<T>(scale), r.out, r.lse);
  });
  return r;
}

AttentionGrads attention_backward(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                  const Tensor& mask, double scale, const Tensor& out_in,
                                  const Tensor& lse, const Tensor& dout_in, Precision precision) {
  const Problem p = check(q_in, k_in, v_in, mask, "attention backward");
  QKV_CHECK(dout_in.shape() == out_in.shape() && dout_in.dtype() == q_in.dtype(),
            "attention backward", "gradient ", dout_in.shape(), " for an output ", out_in.shape());
  const Tensor q = blas_rows(q_in), k = blas_rows(k_in), v = blas_rows(v_in);
  const Tensor out = blas_rows(out_in), dout = blas_rows(dout_in);
  const bool empty = p.nb == 0 || p.n == 0 || p.m == 0;
  AttentionGrads g = kernel::attention_grads_like(q, k, v, empty);
  if (empty) return g;
  const Tensor l = lse.contiguous();
  if (precision == Precision::bf16 && q.dtype() == DType::f32) {
    if (attention_backend_for(p.n, p.m) == AttentionBackend::onednn)
      kernel::attention_backward_onednn(p, q, k, v, out, l, dout, static_cast<float>(scale), g);
    else
      kernel::attention_backward_bf16(p, q, k, v, out, l, dout, static_cast<float>(scale), g);
    return g;
  }
  visit_float(q.dtype(), "attention backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    backward_impl<T>(p, q, k, v, out, l, dout, static_cast<T>(scale), g);
  });
  return g;
}

}  // namespace qkv
