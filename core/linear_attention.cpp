// Linear attention from feature maps. Non-causal: two GEMMs build the (d, d_v) key summary
// S = FK^T V and its (d) normaliser z once, then every query reads them. Causal: one sweep
// in position order keeps running S and z (prefix sums), so memory stays O(d d_v) per head.
//
// Backward, with num_i = fq_i^T S_i, den_i = fq_i . z_i, out_i = num_i / den_i and
// g_i = dL/dout_i:  a_i = g_i / den_i,  c_i = -(g_i . out_i) / den_i,
//   dfq_i = S_i a_i + c_i z_i
//   dfk_j = G_j v_j + h_j,  dv_j = G_j^T fk_j,  G_j = sum_{i sees j} fq_i a_i^T,  h_j = sum fq_i
//   c_i
// Non-causal G and h are one sum over all queries (GEMMs); causal they are suffix sums, built
// in a reverse sweep. Batch entries run in parallel, each one sequentially: deterministic.
#include <cmath>

#include "attention_variants.hpp"
#include "kernel_util.hpp"
#include "parallel.hpp"

namespace qkv {
namespace {

using kernel::gemm;
using kernel::Mat;
using kernel::mat;
using kernel::workspace;

struct Dims : kernel::QKVDims {
  int64_t d = 0, off = 0;  // d: the feature width (= dk); off = m - n
};

Dims check(const Tensor& fq, const Tensor& fk, const Tensor& v, const char* op) {
  Dims s;
  static_cast<kernel::QKVDims&>(s) = kernel::check_qkv(fq, fk, v, op);
  s.d = s.dk;
  s.off = s.m - s.n;
  return s;
}

template <class T>
T dot(const T* a, const T* b, int64_t n) {
  T s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// S += x y^T (S: (d, dv) packed), z += x
template <class T>
void rank1(T* S, T* z, const T* x, const T* y, int64_t d, int64_t dv) {
  for (int64_t a = 0; a < d; ++a) {
    T* s = S + a * dv;
    const T xa = x[a];
    for (int64_t c = 0; c < dv; ++c) s[c] += xa * y[c];
    z[a] += xa;
  }
}

// r = S y (S: (d, dv) packed, y: (dv))
template <class T>
void mat_vec(const T* S, const T* y, T* r, int64_t d, int64_t dv) {
  for (int64_t a = 0; a < d; ++a) r[a] = dot(S + a * dv, y, dv);
}

// r = S^T x
template <class T>
void mat_t_vec(const T* S, const T* x, T* r, int64_t d, int64_t dv) {
  std::fill(r, r + dv, T(0));
  for (int64_t a = 0; a < d; ++a) {
    const T* s = S + a * dv;
    for (int64_t c = 0; c < dv; ++c) r[c] += x[a] * s[c];
  }
}

// The key summary of all keys: S = FK^T V, z = column sums of FK.
template <class T>
void summary(const Dims& s, const Mat<T>& FK, const Mat<T>& V, int64_t bi, T* S, T* z) {
  gemm<T>(true, false, s.d, s.dv, s.m, T(1), FK.row(bi, 0), FK.ld, V.row(bi, 0), V.ld, T(0), S,
          s.dv);
  std::fill(z, z + s.d, T(0));
  for (int64_t j = 0; j < s.m; ++j) {
    const T* f = FK.row(bi, j);
    for (int64_t a = 0; a < s.d; ++a) z[a] += f[a];
  }
}

template <class T>
void forward_impl(const Dims& s, bool causal, const Tensor& fq, const Tensor& fk, const Tensor& v,
                  Tensor& out, Tensor& den) {
  const Mat<T> FQ = mat<T>(fq, s.nb), FK = mat<T>(fk, s.nb), V = mat<T>(v, s.nb),
               O = mat<T>(out, s.nb);
  T* DEN = den.data<T>();
  parallel_for(s.nb, (s.n + s.m) * s.d * s.dv * 2, [&](int64_t lo, int64_t hi) {
    T* S = workspace<T>(s.d * s.dv + s.d).data();
    T* z = S + s.d * s.dv;
    for (int64_t bi = lo; bi < hi; ++bi) {
      T* dn = DEN + bi * s.n;
      if (!causal) {
        summary(s, FK, V, bi, S, z);
        if (s.n > 0)
          gemm<T>(false, false, s.n, s.dv, s.d, T(1), FQ.row(bi, 0), FQ.ld, S, s.dv, T(0),
                  O.row(bi, 0), O.ld);
        for (int64_t i = 0; i < s.n; ++i) dn[i] = dot(FQ.row(bi, i), z, s.d);
      } else {
        std::fill(S, S + s.d * s.dv + s.d, T(0));
        int64_t j = 0;
        for (int64_t i = 0; i < s.n; ++i) {
          for (; j < s.m && j <= i + s.off; ++j)
            rank1(S, z, FK.row(bi, j), V.row(bi, j), s.d, s.dv);
          mat_t_vec(S, FQ.row(bi, i), O.row(bi, i), s.d, s.dv);
          dn[i] = dot(FQ.row(bi, i), z, s.d);
        }
      }
      for (int64_t i = 0; i < s.n; ++i) {
        T* o = O.row(bi, i);
        const T inv = dn[i] > 0 ? T(1) / dn[i] : T(0);  // no visible key: a zero row
        for (int64_t c = 0; c < s.dv; ++c) o[c] *= inv;
      }
    }
  });
}

template <class T>
void backward_impl(const Dims& s, bool causal, const Tensor& fq, const Tensor& fk, const Tensor& v,
                   const Tensor& out, const Tensor& den, const Tensor& dout,
                   LinearAttentionGrads& g) {
  const Mat<T> FQ = mat<T>(fq, s.nb), FK = mat<T>(fk, s.nb), V = mat<T>(v, s.nb);
  const Mat<T> O = mat<T>(out, s.nb), dO = mat<T>(dout, s.nb);
  const Mat<T> dFQ = mat<T>(g.dfq, s.nb), dFK = mat<T>(g.dfk, s.nb), dV = mat<T>(g.dv, s.nb);
  const T* DEN = den.data<T>();
  parallel_for(s.nb, (s.n + s.m) * s.d * s.dv * 6, [&](int64_t lo, int64_t hi) {
    // S, z (then G, h), the rows a_i (n x dv) and c_i (n)
    std::vector<T>& ws = workspace<T>(s.d * s.dv + s.d + s.n * s.dv + s.n);
    T* S = ws.data();
    T* z = S + s.d * s.dv;
    T* A = z + s.d;
    T* C = A + s.n * s.dv;
    for (int64_t bi = lo; bi < hi; ++bi) {
      const T* dn = DEN + bi * s.n;
      for (int64_t i = 0; i < s.n; ++i) {
        const T* go = dO.row(bi, i);
        T* a = A + i * s.dv;
        if (!(dn[i] > 0)) {
          std::fill(a, a + s.dv, T(0));
          C[i] = 0;
          continue;
        }
        const T inv = T(1) / dn[i];
        for (int64_t c = 0; c < s.dv; ++c) a[c] = go[c] * inv;
        C[i] = -dot(go, O.row(bi, i), s.dv) * inv;
      }
      if (!causal) {
        summary(s, FK, V, bi, S, z);
        // dFQ = A S^T + C z^T
        if (s.n > 0)
          gemm<T>(false, true, s.n, s.d, s.dv, T(1), A, s.dv, S, s.dv, T(0), dFQ.row(bi, 0),
                  dFQ.ld);
        for (int64_t i = 0; i < s.n; ++i) {
          T* r = dFQ.row(bi, i);
          for (int64_t a = 0; a < s.d; ++a) r[a] += C[i] * z[a];
        }
        // G = FQ^T A (into S), h = FQ^T C (into z)
        gemm<T>(true, false, s.d, s.dv, s.n, T(1), FQ.row(bi, 0), FQ.ld, A, s.dv, T(0), S, s.dv);
        std::fill(z, z + s.d, T(0));
        for (int64_t i = 0; i < s.n; ++i) {
          const T* f = FQ.row(bi, i);
          for (int64_t a = 0; a < s.d; ++a) z[a] += f[a] * C[i];
        }
        // dFK = V G^T + 1 h^T;  dV = FK G
        if (s.m > 0) {
          gemm<T>(false, true, s.m, s.d, s.dv, T(1), V.row(bi, 0), V.ld, S, s.dv, T(0),
                  dFK.row(bi, 0), dFK.ld);
          gemm<T>(false, false, s.m, s.dv, s.d, T(1), FK.row(bi, 0), FK.ld, S, s.dv, T(0),
                  dV.row(bi, 0), dV.ld);
        }
        for (int64_t j = 0; j < s.m; ++j) {
          T* r = dFK.row(bi, j);
          for (int64_t a = 0; a < s.d; ++a) r[a] += z[a];
        }
        continue;
      }
      // causal, sweep 1 in position order: dfq_i = S_i a_i + c_i z_i with the prefix S_i, z_i
      std::fill(S, S + s.d * s.dv + s.d, T(0));
      int64_t j = 0;
      for (int64_t i = 0; i < s.n; ++i) {
        for (; j < s.m && j <= i + s.off; ++j) rank1(S, z, FK.row(bi, j), V.row(bi, j), s.d, s.dv);
        T* r = dFQ.row(bi, i);
        mat_vec(S, A + i * s.dv, r, s.d, s.dv);
        for (int64_t a = 0; a < s.d; ++a) r[a] += C[i] * z[a];
      }
      // sweep 2 in reverse: G_j, h_j sum the queries that see key j (i + off >= j)
      std::fill(S, S + s.d * s.dv + s.d, T(0));
      int64_t i = s.n - 1;
      for (int64_t k = s.m - 1; k >= 0; --k) {
        for (; i >= 0 && i + s.off >= k; --i) {
          const T* f = FQ.row(bi, i);
          const T* a = A + i * s.dv;
          for (int64_t x = 0; x < s.d; ++x) {
            T* gr = S + x * s.dv;
            for (int64_t c = 0; c < s.dv; ++c) gr[c] += f[x] * a[c];
            z[x] += f[x] * C[i];
          }
        }
        T* r = dFK.row(bi, k);
        mat_vec(S, V.row(bi, k), r, s.d, s.dv);
        for (int64_t x = 0; x < s.d; ++x) r[x] += z[x];
        mat_t_vec(S, FK.row(bi, k), dV.row(bi, k), s.d, s.dv);
      }
    }
  });
}

}  // namespace

LinearAttentionResult linear_attention_forward(const Tensor& fq_in, const Tensor& fk_in,
                                               const Tensor& v_in, bool causal) {
  const Dims s = check(fq_in, fk_in, v_in, "linear_attention");
  const Tensor fq = kernel::blas_rows(fq_in), fk = kernel::blas_rows(fk_in),
               v = kernel::blas_rows(v_in);
  Shape oshape = s.batch, dshape = s.batch;
  oshape.insert(oshape.end(), {s.n, s.dv});
  dshape.push_back(s.n);
  LinearAttentionResult r{kernel::empty_heads_layout(oshape, fq.dtype()),
                          empty(dshape, fq.dtype())};
  if (s.nb == 0) return r;
  visit_float(fq.dtype(), "linear_attention", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forward_impl<T>(s, causal, fq, fk, v, r.out, r.den);
  });
  return r;
}

LinearAttentionGrads linear_attention_backward(const Tensor& fq_in, const Tensor& fk_in,
                                               const Tensor& v_in, bool causal,
                                               const Tensor& out_in, const Tensor& den,
                                               const Tensor& dout_in) {
  const Dims s = check(fq_in, fk_in, v_in, "linear_attention backward");
  QKV_CHECK(dout_in.shape() == out_in.shape() && dout_in.dtype() == fq_in.dtype(),
            "linear_attention backward", "gradient ", dout_in.shape(), " for an output ",
            out_in.shape());
  const Tensor fq = kernel::blas_rows(fq_in), fk = kernel::blas_rows(fk_in),
               v = kernel::blas_rows(v_in);
  const Tensor out = kernel::blas_rows(out_in), dout = kernel::blas_rows(dout_in);
  LinearAttentionGrads g{kernel::empty_heads_layout(fq.shape(), fq.dtype()),
                         kernel::empty_heads_layout(fk.shape(), fq.dtype()),
                         kernel::empty_heads_layout(v.shape(), fq.dtype())};
  if (s.nb == 0) return g;
  const Tensor dn = den.contiguous();
  visit_float(fq.dtype(), "linear_attention backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    backward_impl<T>(s, causal, fq, fk, v, out, dn, dout, g);
  });
  return g;
}

}  // namespace qkv
