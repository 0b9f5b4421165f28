// Sliding-window attention: per tile of query rows, the keys any of its rows can see form one
// contiguous range (at most tile + 2w keys), so a tile is one small GEMM for the scores, an
// exact softmax per row over that range (out-of-band entries at -inf), and one GEMM for the
// output. Nothing of size n x m exists; the backward recomputes each tile's weights from lse.
//
// Work items: the forward runs (batch entry, query tile) items in parallel; the backward runs
// batch entries in parallel, each sweeping its tiles in order (neighbouring tiles share keys,
// so dk and dv are summed in that fixed order).
#include <cmath>
#include <limits>

#include "attention_variants.hpp"
#include "kernel_util.hpp"
#include "lanes.hpp"
#include "parallel.hpp"

namespace qkv {
namespace {

using kernel::gemm;
using kernel::Mat;
using kernel::mat;
using kernel::workspace;

constexpr int64_t kTile = 64;  // query rows per tile

struct Band : kernel::QKVDims, kernel::ScoreMask {
  int64_t window = 0, off = 0;  // off = m - n: query i sits at key position i + off
  bool causal = false;
  // Keys [lo, hi) that rows [q0, q0 + qb) may see, clipped to [0, m).
  void keys(int64_t q0, int64_t qb, int64_t& lo, int64_t& hi) const {
    lo = std::clamp<int64_t>(q0 + off - window, 0, m);
    hi = std::clamp<int64_t>(q0 + qb - 1 + off + (causal ? 0 : window) + 1, 0, m);
    if (hi < lo) hi = lo;
  }
};

Band check(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, int64_t window,
           bool causal, const char* op) {
  QKV_CHECK(window >= 0, op, "window must be >= 0, got ", window);
  Band b;
  static_cast<kernel::QKVDims&>(b) = kernel::check_qkv(q, k, v, op);
  b.window = window;
  b.off = b.m - b.n;
  b.causal = causal;
  static_cast<kernel::ScoreMask&>(b) = kernel::expand_mask(mask, b, op);
  return b;
}

// Row i (query q0 + i) of a tile of raw scores s over keys [lo, lo + kb): scaled, and -inf
// outside the band or where the mask forbids. Returns the row's max.
template <class T>
T band_row(const Band& b, const uint8_t* mbase, int64_t bi, int64_t qi, int64_t lo, T* s,
           int64_t kb, T sc) {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  const int64_t p = qi + b.off;
  const int64_t jlo = std::max(lo, p - b.window),
                jhi = std::min(lo + kb, p + (b.causal ? 0 : b.window) + 1);
  const uint8_t* mrow = mbase ? mbase + b.moff[bi] + qi * b.msn : nullptr;
  T mx = ninf;
  for (int64_t j = lo; j < lo + kb; ++j) {
    const bool ok = j >= jlo && j < jhi && (!mrow || mrow[j * b.msm]);
    const T x = ok ? s[j - lo] * sc : ninf;
    s[j - lo] = x;
    mx = std::max(mx, x);
  }
  return mx;
}

template <class T>
void forward_impl(const Band& b, const Tensor& q, const Tensor& k, const Tensor& v, T sc,
                  Tensor& out, Tensor& lse) {
  const Mat<T> Q = mat<T>(q, b.nb), K = mat<T>(k, b.nb), V = mat<T>(v, b.nb), O = mat<T>(out, b.nb);
  T* L = lse.data<T>();
  const uint8_t* mbase =
      b.mask.defined() ? static_cast<const uint8_t*>(b.mask.storage()->data()) : nullptr;
  const int64_t nqt = (b.n + kTile - 1) / kTile;
  const int64_t span = std::min(b.m, kTile + 2 * b.window);
  parallel_for(b.nb * nqt, kTile * span * (b.dk + b.dv) * 2, [&](int64_t lo_it, int64_t hi_it) {
    T* S = workspace<T>(kTile * std::max<int64_t>(span, 1)).data();
    for (int64_t it = lo_it; it < hi_it; ++it) {
      const int64_t bi = it / nqt, q0 = (it % nqt) * kTile, qb = std::min(kTile, b.n - q0);
      int64_t lo, hi;
      b.keys(q0, qb, lo, hi);
      const int64_t kb = hi - lo;
      if (kb == 0) {
        for (int64_t i = 0; i < qb; ++i) {
          std::fill(O.row(bi, q0 + i), O.row(bi, q0 + i) + b.dv, T(0));
          L[bi * b.n + q0 + i] = -std::numeric_limits<T>::infinity();
        }
        continue;
      }
      gemm<T>(false, true, qb, kb, b.dk, T(1), Q.row(bi, q0), Q.ld, K.row(bi, lo), K.ld, T(0), S,
              kb);
      std::vector<T> inv(static_cast<size_t>(qb));
      for (int64_t i = 0; i < qb; ++i) {
        T* s = S + i * kb;
        const T mx = band_row<T>(b, mbase, bi, q0 + i, lo, s, kb, sc);
        if (mx == -std::numeric_limits<T>::infinity()) {  // nothing to attend to
          // (a NaN score is skipped by max: it propagates as NaN instead of passing for a mask)
          const bool nan = kernel::any_nan(s, kb);
          std::fill(s, s + kb, T(0));
          inv[i] = nan ? std::numeric_limits<T>::quiet_NaN() : T(0);
          L[bi * b.n + q0 + i] =
              nan ? std::numeric_limits<T>::quiet_NaN() : -std::numeric_limits<T>::infinity();
          continue;
        }
        for (int64_t j = 0; j < kb; ++j) s[j] = kernel::fast_exp<T>(s[j] - mx);
        const double z = kernel::sum_lanes(s, kb);
        inv[i] = static_cast<T>(1.0 / z);
        L[bi * b.n + q0 + i] = static_cast<T>(mx + std::log(z));
      }
      // out rows = (unnormalised weights @ V) / z
      T* o = O.row(bi, q0);
      gemm<T>(false, false, qb, b.dv, kb, T(1), S, kb, V.row(bi, lo), V.ld, T(0), o, O.ld);
      for (int64_t i = 0; i < qb; ++i)
        for (int64_t j = 0; j < b.dv; ++j) o[i * O.ld + j] *= inv[i];
    }
  });
}

template <class T>
void backward_impl(const Band& b, const Tensor& q, const Tensor& k, const Tensor& v,
                   const Tensor& out, const Tensor& lse, const Tensor& dout, T sc,
                   AttentionGrads& g) {
  const Mat<T> Q = mat<T>(q, b.nb), K = mat<T>(k, b.nb), V = mat<T>(v, b.nb);
  const Mat<T> O = mat<T>(out, b.nb), dO = mat<T>(dout, b.nb);
  const Mat<T> dQ = mat<T>(g.dq, b.nb), dK = mat<T>(g.dk, b.nb), dV = mat<T>(g.dv, b.nb);
  const T* L = lse.data<T>();
  const uint8_t* mbase =
      b.mask.defined() ? static_cast<const uint8_t*>(b.mask.storage()->data()) : nullptr;
  const int64_t span = std::min(b.m, kTile + 2 * b.window);
  parallel_for(b.nb, b.n * span * (2 * b.dk + 2 * b.dv), [&](int64_t lo_b, int64_t hi_b) {
    std::vector<T>& ws = workspace<T>(2 * kTile * std::max<int64_t>(span, 1) + kTile);
    T* P = ws.data();
    T* dS = P + kTile * span;
    T* D = dS + kTile * span;
    for (int64_t bi = lo_b; bi < hi_b; ++bi) {
      for (int64_t j = 0; j < b.m; ++j) {
        std::fill(dK.row(bi, j), dK.row(bi, j) + b.dk, T(0));
        std::fill(dV.row(bi, j), dV.row(bi, j) + b.dv, T(0));
      }
      for (int64_t q0 = 0; q0 < b.n; q0 += kTile) {
        const int64_t qb = std::min(kTile, b.n - q0);
        int64_t lo, hi;
        b.keys(q0, qb, lo, hi);
        const int64_t kb = hi - lo;
        if (kb == 0) {
          for (int64_t i = 0; i < qb; ++i)
            std::fill(dQ.row(bi, q0 + i), dQ.row(bi, q0 + i) + b.dk, T(0));
          continue;
        }
        // D_i = dO_i . O_i = sum_j P_ij dP_ij, the softmax backward's row term
        for (int64_t i = 0; i < qb; ++i) {
          D[i] = static_cast<T>(kernel::dot_lanes(O.row(bi, q0 + i), dO.row(bi, q0 + i), b.dv));
        }
        gemm<T>(false, true, qb, kb, b.dk, T(1), Q.row(bi, q0), Q.ld, K.row(bi, lo), K.ld, T(0), P,
                kb);
        for (int64_t i = 0; i < qb; ++i) {
          T* s = P + i * kb;
          const T l = L[bi * b.n + q0 + i];
          if (l == -std::numeric_limits<T>::infinity()) {
            std::fill(s, s + kb, T(0));
            continue;
          }
          (void)band_row<T>(b, mbase, bi, q0 + i, lo, s, kb, sc);
          for (int64_t j = 0; j < kb; ++j) s[j] = kernel::fast_exp<T>(s[j] - l);
        }
        // dV += P^T dO;  dP = dO V^T;  dS = P (dP - D) * scale
        gemm<T>(true, false, kb, b.dv, qb, T(1), P, kb, dO.row(bi, q0), dO.ld, T(1), dV.row(bi, lo),
                dV.ld);
        gemm<T>(false, true, qb, kb, b.dv, T(1), dO.row(bi, q0), dO.ld, V.row(bi, lo), V.ld, T(0),
                dS, kb);
        for (int64_t i = 0; i < qb; ++i) {
          T* ds = dS + i * kb;
          const T* pr = P + i * kb;
          for (int64_t j = 0; j < kb; ++j) ds[j] = pr[j] * (ds[j] - D[i]) * sc;
        }
        // dQ = dS K (each query tile once);  dK += dS^T Q
        gemm<T>(false, false, qb, b.dk, kb, T(1), dS, kb, K.row(bi, lo), K.ld, T(0), dQ.row(bi, q0),
                dQ.ld);
        gemm<T>(true, false, kb, b.dk, qb, T(1), dS, kb, Q.row(bi, q0), Q.ld, T(1), dK.row(bi, lo),
                dK.ld);
      }
    }
  });
}

}  // namespace

AttentionResult local_attention_forward(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                        const Tensor& mask, double scale, int64_t window,
                                        bool causal) {
  const Band b = check(q_in, k_in, v_in, mask, window, causal, "local_attention");
  const Tensor q = kernel::blas_rows(q_in), k = kernel::blas_rows(k_in),
               v = kernel::blas_rows(v_in);
  AttentionResult r = kernel::attention_result_for(b, q.dtype());
  if (r.out.numel() == 0 || b.m == 0) return r;  // nothing to compute, or all rows masked
  visit_float(q.dtype(), "local_attention", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forward_impl<T>(b, q, k, v, static_cast<T>(scale), r.out, r.lse);
  });
  return r;
}

AttentionGrads local_attention_backward(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                        const Tensor& mask, double scale, int64_t window,
                                        bool causal, const Tensor& out_in, const Tensor& lse,
                                        const Tensor& dout_in) {
  const Band b = check(q_in, k_in, v_in, mask, window, causal, "local_attention backward");
  QKV_CHECK(dout_in.shape() == out_in.shape() && dout_in.dtype() == q_in.dtype(),
            "local_attention backward", "gradient ", dout_in.shape(), " for an output ",
            out_in.shape());
  const Tensor q = kernel::blas_rows(q_in), k = kernel::blas_rows(k_in),
               v = kernel::blas_rows(v_in);
  const Tensor out = kernel::blas_rows(out_in), dout = kernel::blas_rows(dout_in);
  const bool empty = b.nb == 0 || b.n == 0 || b.m == 0;
  AttentionGrads g = kernel::attention_grads_like(q, k, v, empty);
  if (empty) return g;
  const Tensor l = lse.contiguous();
  visit_float(q.dtype(), "local_attention backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    backward_impl<T>(b, q, k, v, out, l, dout, static_cast<T>(scale), g);
  });
  return g;
}

}  // namespace qkv
