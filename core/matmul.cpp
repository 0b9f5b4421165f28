// matmul through cblas_sgemm / cblas_dgemm.
//
// A view whose last dim has stride 1 goes to BLAS as is (row-major, leading dim = stride of
// dim -2); one whose dim -2 has stride 1 (a transpose) goes as a BLAS transpose. Anything
// else is packed first.
//
// Threads: every product is split by qkv into bands, one single-threaded BLAS call per thread
// (kernel::gemm_bands), or, for a batch of matrices, whole matrices per thread. OpenBLAS's own
// threaded GEMM makes its threads wait for each other at every packed panel; at the sizes these
// models run (2048 x 128 x 128) that waiting took a third of the time, and the bands run at the
// sgemm peak (measured in docs/performance.md).
#include <optional>

#include <cblas.h>

#include "bf16_cache.hpp"
#include "fused.hpp"
#include "gemm_stats.hpp"
#include "kernel_util.hpp"
#include "onednn.hpp"
#include "parallel.hpp"
#include "precision.hpp"
#include "tensor.hpp"

namespace qkv {
namespace {

struct Operand {
  Tensor t;    // possibly packed copy
  bool trans;  // pass CblasTrans
  int64_t ld;  // leading dimension
};

// m: a (..., r, c) view. Chooses how BLAS reads its last two dims.
Operand as_blas(const Tensor& m) {
  const int64_t r = m.size(-2), c = m.size(-1);
  const int64_t sr = m.stride(-2), sc = m.stride(-1);
  if ((sc == 1 || c == 1) && sr >= std::max<int64_t>(c, 1)) return {m, false, sr};
  if ((sr == 1 || r == 1) && sc >= std::max<int64_t>(r, 1)) return {m, true, sc};
  const Tensor p = m.contiguous();
  return {p, false, std::max<int64_t>(c, 1)};
}

// The stored matrix behind an operand read as (r, c): itself, or a (c, r) one read transposed.
detail::StoredMatrix stored(const Operand& o, int64_t r, int64_t c) {
  return o.trans ? detail::StoredMatrix{o.t, c, r, o.ld} : detail::StoredMatrix{o.t, r, c, o.ld};
}

// Whether a product of these float tensors runs in bf16 (core/precision.hpp).
bool bf16_product(const Tensor& a, const Tensor& b) {
  return a.dtype() == DType::f32 && b.dtype() == DType::f32 &&
         current_precision() == Precision::bf16;
}

// out (n, m), contiguous = op(a) (n, k) op(b) (k, m) [+ bias] on oneDNN in bf16; each operand
// a weight (rounded once per scope) or an activation (rounded now). a_weight / b_weight say which.
void bf16_product_into(const Tensor& a, bool a_weight, const Tensor& b, bool b_weight,
                       const Tensor& bias, Tensor& out) {
  const int64_t n = a.size(0), k = a.size(1), m = b.size(1);
  const Operand oa = as_blas(a), ob = as_blas(b);
  const detail::StoredMatrix sa = stored(oa, n, k), sb = stored(ob, k, m);
  detail::timed_products(
      n, m, k, oa.trans, ob.trans, 1,
      [&] {
        const bf16_t* pa = a_weight ? detail::bf16_weight(sa) : detail::bf16_activation(sa, 0);
        const bf16_t* pb = b_weight ? detail::bf16_weight(sb) : detail::bf16_activation(sb, 1);
        kernel::gemm_bf16(oa.trans, ob.trans, n, m, k, pa, sa.cols, pb, sb.cols, out.data<float>(),
                          m, bias.defined() ? bias.data<float>() : nullptr);
      },
      true);
}

}  // namespace

namespace kernel {

template <class T>
void gemm_bands(bool ta, bool tb, int64_t n, int64_t m, int64_t k, T alpha, const T* a, int64_t lda,
                const T* b, int64_t ldb, T beta, T* c, int64_t ldc, const T* row_init) {
  // C's rows r0..r1, columns c0..c1 start as row_init (then the GEMM adds onto them).
  auto init = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    if (!row_init) return;
    for (int64_t r = r0; r < r1; ++r) std::copy(row_init + c0, row_init + c1, c + r * ldc + c0);
  };
  const bool invariant = thread_invariant_products();
  if (n * m * k < kBandMinWork ||
      (!invariant && (get_num_threads() <= 1 || in_parallel_region()))) {
    init(0, n, 0, m);
    std::optional<OmpOneThread> one;  // invariant: BLAS must not split it by the thread count
    if (invariant) one.emplace();
    gemm<T>(ta, tb, n, m, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const bool by_rows = n >= m;
  const int64_t len = by_rows ? n : m;
  auto band = [&](int64_t lo, int64_t hi) {
    if (by_rows) {  // rows lo..hi of op(A) and of C
      init(lo, hi, 0, m);
      gemm<T>(ta, tb, hi - lo, m, k, alpha, a + op_row_offset(ta, lda, lo), lda, b, ldb, beta,
              c + lo * ldc, ldc);
    } else {  // columns lo..hi of op(B) and of C
      init(0, n, lo, hi);
      gemm<T>(ta, tb, n, hi - lo, k, alpha, a, lda, b + op_col_offset(tb, ldb, lo), ldb, beta,
              c + lo, ldc);
    }
  };
  for_product_bands(len, band);
}

template void gemm_bands<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                                const float*, int64_t, float, float*, int64_t, const float*);
template void gemm_bands<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*,
                                 int64_t, const double*, int64_t, double, double*, int64_t,
                                 const double*);

}  // namespace kernel

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  QKV_CHECK(a_in.defined() && b_in.defined(), "matmul", "undefined tensor");
  QKV_CHECK(a_in.dim() >= 2 && b_in.dim() >= 2, "matmul", "needs 2-d or batched operands, got ",
            a_in.shape(), " and ", b_in.shape());
  QKV_CHECK(a_in.dtype() == b_in.dtype(), "matmul", "dtype mismatch: ", dtype_name(a_in.dtype()),
            " ", a_in.shape(), " and ", dtype_name(b_in.dtype()), " ", b_in.shape());
  QKV_CHECK(is_floating(a_in.dtype()), "matmul", "expected float32 or float64 operands, got ",
            dtype_name(a_in.dtype()), " ", a_in.shape(), " and ", b_in.shape());
  const int64_t n = a_in.size(-2), k = a_in.size(-1), m = b_in.size(-1);
  QKV_CHECK(b_in.size(-2) == k, "matmul", "inner dims differ: ", a_in.shape(), " @ ", b_in.shape());
  const Shape abatch(a_in.shape().begin(), a_in.shape().end() - 2);
  const Shape bbatch(b_in.shape().begin(), b_in.shape().end() - 2);
  Shape batch;
  try {
    batch = broadcast_shapes(abatch, bbatch, "matmul");
  } catch (const Error& e) {
    throw Error(cat(e.what(), " (batch dims of ", a_in.shape(), " @ ", b_in.shape(), ")"));
  }
  Shape ashape = batch, bshape = batch, oshape = batch;
  ashape.insert(ashape.end(), {n, k});
  bshape.insert(bshape.end(), {k, m});
  oshape.insert(oshape.end(), {n, m});
  const Tensor a = a_in.expand(ashape), b = b_in.expand(bshape);
  Tensor out = empty(oshape, a.dtype());
  const int64_t nb = numel_of(batch);
  if (out.numel() == 0) return out;
  if (k == 0) return out.zero_();
  visit_float(a.dtype(), "matmul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    // The batch entries as (offset into a, offset into b), row-major over batch.
    std::vector<int64_t> aoff(nb), boff(nb);
    for (int64_t i = 0; i < nb; ++i) {
      int64_t rem = i, ao = 0, bo = 0;
      for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
        const int64_t idx = rem % batch[d];
        rem /= batch[d];
        ao += idx * a.stride(d);
        bo += idx * b.stride(d);
      }
      aoff[i] = ao;
      boff[i] = bo;
    }
    // Pack per-matrix if its last two dims need it (rare: slices of slices).
    Operand oa = as_blas(a), ob = as_blas(b);
    if (oa.t.storage() != a.storage() || oa.t.offset() != a.offset()) {
      for (int64_t i = 0; i < nb; ++i) aoff[i] = i * n * k;
    }
    if (ob.t.storage() != b.storage() || ob.t.offset() != b.offset()) {
      for (int64_t i = 0; i < nb; ++i) boff[i] = i * k * m;
    }
    const T* pa = oa.t.template data<T>();
    const T* pb = ob.t.template data<T>();
    T* po = out.data<T>();
    auto one = [&](int64_t i) {
      kernel::gemm_bands<T>(oa.trans, ob.trans, n, m, k, T(1), pa + aoff[i], oa.ld, pb + boff[i],
                            ob.ld, T(0), po + i * n * m, m);
    };
    // Whole matrices per thread when there are small ones (3x3 heads stay on one thread: the
    // cost is their multiply-adds) or enough to go round evenly; else each is split in bands.
    const int threads = get_num_threads();
    const bool small = n * m * k < 64 * 64 * 64;
    detail::timed_products(n, m, k, oa.trans, ob.trans, nb, [&] {
      if (nb > 1 && (small || nb % threads == 0 || nb >= 4 * threads)) {
        parallel_for(nb, n * m * k, [&](int64_t lo, int64_t hi) {
          for (int64_t i = lo; i < hi; ++i) one(i);
        });
      } else {
        for (int64_t i = 0; i < nb; ++i) one(i);
      }
    });
  });
  return out;
}

}  // namespace qkv

// ---------------------------------------------------------------- fused linear

namespace qkv {

Tensor linear_forward(const Tensor& x, const Tensor& w, const Tensor& b) {
  QKV_CHECK(x.defined() && w.defined(), "linear", "undefined tensor");
  QKV_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && x.dtype() == w.dtype(),
            "linear", "input ", x.shape(), " and weight ", w.shape(),
            " do not fit (x: (N, in), w: (out, in), one dtype)");
  const int64_t n = x.size(0), in = x.size(1), out_f = w.size(0);
  if (bf16_product(x, w) && n > 0 && in > 0) {
    QKV_CHECK(!b.defined() || (b.shape() == Shape{out_f} && b.dtype() == x.dtype()), "linear",
              "bias ", b.shape(), " for weight ", w.shape());
    Tensor y = empty({n, out_f}, x.dtype());
    bf16_product_into(x, false, w.t(), true, b.defined() ? b.contiguous() : Tensor(), y);
    return y;
  }
  if (!b.defined()) return matmul(x, w.t());
  QKV_CHECK(b.shape() == Shape{out_f} && b.dtype() == x.dtype(), "linear", "bias ", b.shape(),
            " for weight ", w.shape());
  Tensor y = empty({n, out_f}, x.dtype());
  if (y.numel() == 0) return y;
  if (in == 0) return y.copy_(b);
  visit_float(x.dtype(), "linear", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Operand ox = as_blas(x), ow = as_blas(w.t());
    const Tensor bc = b.contiguous();
    // Each band's rows start as the bias, written by the thread that then runs the GEMM onto
    // them (beta = 1): no parallel region of its own for the bias (the write itself remains).
    detail::timed_products(n, out_f, in, ox.trans, ow.trans, 1, [&] {
      kernel::gemm_bands<T>(ox.trans, ow.trans, n, out_f, in, T(1), ox.t.template data<T>(), ox.ld,
                            ow.t.template data<T>(), ow.ld, T(1), y.data<T>(), out_f, bc.data<T>());
    });
  });
  return y;
}

Tensor linear_input_grad(const Tensor& g, const Tensor& w) {
  if (!bf16_product(g, w) || g.dim() != 2 || w.dim() != 2 || g.size(1) != w.size(0) ||
      g.numel() == 0 || w.numel() == 0)
    return matmul(g, w);
  Tensor dx = empty({g.size(0), w.size(1)}, g.dtype());
  bf16_product_into(g, false, w, true, Tensor(), dx);
  return dx;
}

Tensor linear_weight_grad(const Tensor& g, const Tensor& x) {
  if (!bf16_product(g, x) || g.dim() != 2 || x.dim() != 2 || g.size(0) != x.size(0) ||
      g.numel() == 0 || x.numel() == 0)
    return matmul(g.t(), x);
  Tensor dw = empty({g.size(1), x.size(1)}, g.dtype());
  bf16_product_into(g.t(), false, x, false, Tensor(), dw);
  return dw;
}

}  // namespace qkv
