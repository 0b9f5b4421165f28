// The 1-D convolution over positions as one GEMM over gathered taps (im2col), forward and
// backward (definition: core/recurrent.hpp). With cols (B n, k C_in) holding row (b, t)'s k taps
// x[b, t + j dilation - left] side by side (0 outside the sequence or at a padded position) and
// the weight packed as wp (C_out, k C_in), wp[o, j C_in + i] = w[o, i, j]:
//   out = cols wp^T + bias       dwp = dout^T cols      dcols = dout wp
// and dx[b, u] sums dcols over the (t, j) that read position u. Each dx row is summed by one
// thread in tap order, so the result does not depend on how rows are split.
#include <algorithm>

#include "fused.hpp"
#include "kernel_util.hpp"
#include "parallel.hpp"
#include "recurrent.hpp"

namespace qkv {
namespace conv_kernel {  // named, not anonymous: core/ builds as one unity file

struct Dims {
  int64_t B = 0, n = 0, cin = 0, cout = 0, k = 0, dil = 1, left = 0;
  const uint8_t* valid = nullptr;  // (B n) or null: every position real
  bool real(int64_t b, int64_t t) const { return !valid || valid[b * n + t]; }
  // The position tap j of output position t reads, or -1 when it reads a zero.
  int64_t source(int64_t b, int64_t t, int64_t j) const {
    const int64_t u = t + j * dil - left;
    return u >= 0 && u < n && real(b, u) ? u : -1;
  }
};

Dims check(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& valid,
           int64_t dilation, bool causal) {
  QKV_CHECK(x.defined() && x.dim() == 3 && is_floating(x.dtype()), "conv1d",
            "x must be a float (B, n, C_in) tensor, got ", x.defined() ? x.shape() : Shape{});
  QKV_CHECK(w.defined() && w.dim() == 3 && w.size(1) == x.size(2) && w.size(2) >= 1, "conv1d",
            "weight ", w.defined() ? w.shape() : Shape{}, " does not fit x ", x.shape(),
            " (weight: (C_out, C_in, k))");
  QKV_CHECK(w.dtype() == x.dtype() && (!bias.defined() || bias.dtype() == x.dtype()), "conv1d",
            "x, weight and bias must share one dtype");
  QKV_CHECK(!bias.defined() || bias.shape() == Shape{w.size(0)}, "conv1d", "bias ", bias.shape(),
            " for weight ", w.shape());
  QKV_CHECK(dilation >= 1, "conv1d", "dilation must be >= 1, got ", dilation);
  QKV_CHECK(!valid.defined() ||
                (valid.dtype() == DType::b8 && valid.shape() == (Shape{x.size(0), x.size(1)})),
            "conv1d", "valid must be bool (B, n) = (", x.size(0), ", ", x.size(1), "), got ",
            valid.shape());
  return Dims{x.size(0),
              x.size(1),
              x.size(2),
              w.size(0),
              w.size(2),
              dilation,
              conv1d_left_pad(w.size(2), dilation, causal)};
}

// cols: (B n, k C_in), row (b, t) = the taps of x (B n, C_in) that output position t reads
template <class T>
void gather_taps(const Dims& m, const T* x, T* cols) {
  const int64_t width = m.k * m.cin;
  parallel_for(m.B * m.n, width, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t b = r / m.n, t = r % m.n;
      for (int64_t j = 0; j < m.k; ++j) {
        T* dst = cols + r * width + j * m.cin;
        const int64_t u = m.source(b, t, j);
        if (u < 0)
          std::fill(dst, dst + m.cin, T(0));
        else
          std::copy(x + (b * m.n + u) * m.cin, x + (b * m.n + u + 1) * m.cin, dst);
      }
    }
  });
}

// dx: (B n, C_in), row (b, u) = the sum over taps j of dcols's row (b, t) part j, for the t
// whose tap j reads u (t = u - j dilation + left)
template <class T>
void scatter_taps(const Dims& m, const T* dcols, T* dx) {
  const int64_t width = m.k * m.cin;
  parallel_for(m.B * m.n, width, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t b = r / m.n, u = r % m.n;
      T* dst = dx + r * m.cin;
      std::fill(dst, dst + m.cin, T(0));
      if (!m.real(b, u)) continue;
      for (int64_t j = 0; j < m.k; ++j) {
        const int64_t t = u - j * m.dil + m.left;
        if (t < 0 || t >= m.n) continue;
        const T* src = dcols + (b * m.n + t) * width + j * m.cin;
        for (int64_t i = 0; i < m.cin; ++i) dst[i] += src[i];
      }
    }
  });
}

// w (C_out, C_in, k) <-> wp (C_out, k C_in)
Tensor pack_weight(const Tensor& w) {
  return w.permute({0, 2, 1}).contiguous().reshape({w.size(0), w.size(1) * w.size(2)});
}
Tensor unpack_weight(const Tensor& wp, int64_t cin, int64_t k) {
  return wp.reshape({wp.size(0), k, cin}).permute({0, 2, 1}).contiguous();
}

template <class T>
void zero_padded_rows(const Dims& m, T* rows, int64_t width) {
  for (int64_t b = 0; b < m.B; ++b)
    for (int64_t t = 0; t < m.n; ++t)
      if (!m.real(b, t))
        std::fill(rows + (b * m.n + t) * width, rows + (b * m.n + t + 1) * width, T(0));
}

template <class T>
void gemm_or_zero(bool ta, bool tb, int64_t rows, int64_t cols, int64_t inner, const T* a,
                  int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc, const T* row_init) {
  if (rows == 0 || cols == 0) return;
  if (inner == 0) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < cols; ++j) c[r * ldc + j] = row_init ? row_init[j] : T(0);
    return;
  }
  kernel::gemm_bands<T>(ta, tb, rows, cols, inner, T(1), a, lda, b, ldb, row_init ? T(1) : T(0), c,
                        ldc, row_init);
}

}  // namespace conv_kernel

int64_t conv1d_left_pad(int64_t k, int64_t dilation, bool causal) {
  return causal ? (k - 1) * dilation : (k - 1) * dilation / 2;
}

Tensor conv1d_forward(const Tensor& x_in, const Tensor& w, const Tensor& bias, const Tensor& valid,
                      int64_t dilation, bool causal) {
  conv_kernel::Dims m = conv_kernel::check(x_in, w, bias, valid, dilation, causal);
  const Tensor x = x_in.contiguous(), v = valid.defined() ? valid.contiguous() : Tensor();
  m.valid = v.defined() ? v.data<uint8_t>() : nullptr;
  const Tensor wp = conv_kernel::pack_weight(w), b = bias.defined() ? bias.contiguous() : Tensor();
  const int64_t rows = m.B * m.n, width = m.k * m.cin;
  Tensor out = empty({m.B, m.n, m.cout}, x.dtype());
  visit_float(x.dtype(), "conv1d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<T> cols(rows * width);  // cols: (B n, k C_in)
    conv_kernel::gather_taps<T>(m, x.data<T>(), cols.data());
    conv_kernel::gemm_or_zero<T>(false, true, rows, m.cout, width, cols.data(), width, wp.data<T>(),
                                 width, out.data<T>(), m.cout, b.defined() ? b.data<T>() : nullptr);
    conv_kernel::zero_padded_rows<T>(m, out.data<T>(), m.cout);
  });
  return out;
}

Conv1dGrads conv1d_backward(const Tensor& x_in, const Tensor& w, bool has_bias, const Tensor& valid,
                            int64_t dilation, bool causal, const Tensor& dout) {
  conv_kernel::Dims m = conv_kernel::check(x_in, w, Tensor(), valid, dilation, causal);
  QKV_CHECK(dout.shape() == (Shape{m.B, m.n, m.cout}) && dout.dtype() == x_in.dtype(), "conv1d",
            "gradient ", dout.shape(), " for an output (", m.B, ", ", m.n, ", ", m.cout, ")");
  const Tensor x = x_in.contiguous(), v = valid.defined() ? valid.contiguous() : Tensor();
  m.valid = v.defined() ? v.data<uint8_t>() : nullptr;
  const Tensor wp = conv_kernel::pack_weight(w);
  const int64_t rows = m.B * m.n, width = m.k * m.cin;
  Tensor g = dout.clone().reshape({rows, m.cout});  // g: (B n, C_out), padded rows zeroed
  Tensor dwp = empty({m.cout, width}, x.dtype());
  Conv1dGrads r;
  r.dx = empty({m.B, m.n, m.cin}, x.dtype());
  visit_float(x.dtype(), "conv1d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    conv_kernel::zero_padded_rows<T>(m, g.data<T>(), m.cout);
    std::vector<T> cols(rows * width), dcols(rows * width);
    conv_kernel::gather_taps<T>(m, x.data<T>(), cols.data());
    conv_kernel::gemm_or_zero<T>(true, false, m.cout, width, rows, g.data<T>(), m.cout, cols.data(),
                                 width, dwp.data<T>(), width, nullptr);
    conv_kernel::gemm_or_zero<T>(false, false, rows, width, m.cout, g.data<T>(), m.cout,
                                 wp.data<T>(), width, dcols.data(), width, nullptr);
    conv_kernel::scatter_taps<T>(m, dcols.data(), r.dx.data<T>());
  });
  r.dw = conv_kernel::unpack_weight(dwp, m.cin, m.k);
  if (has_bias) r.dbias = sum_rows(g);
  return r;
}

}  // namespace qkv
