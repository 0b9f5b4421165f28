// GRU and LSTM layers, one direction: the forward sweep and the backward through time beside it
// (equations and layouts: core/recurrent.hpp).
//
// Backward, per step in reverse order, with dh the gradient reaching h' (from the step after
// it plus this position's output) and, LSTM, dc the gradient reaching c':
//   GRU:  dn = dh (1 - z)        dz = dh (h - n)          da_n = dn (1 - n^2)
//         da_r = da_n hn r (1 - r)   da_z = dz z (1 - z)     (hn = W_hn h + b_hn)
//         input side (x, W_ih, b_ih): (da_r, da_z, da_n); hidden side: (da_r, da_z, da_n r)
//         dh_prev = dh z + (hidden side) W_hh
//   LSTM: dc += dh o (1 - tanh(c')^2)    do = dh tanh(c')   di = dc g   dg = dc i   df = dc c
//         da = (di i (1 - i), df f (1 - f), dg (1 - g^2), do o (1 - o)) on both sides
//         dh_prev = da W_hh    dc_prev = dc f
// A padded step passes dh (and dc) through unchanged. The weight gradients sum over steps, so
// each is one GEMM over all steps' pre-activation gradients after the sweep.
#include "recurrent.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "fused.hpp"
#include "kernel_util.hpp"
#include "parallel.hpp"

namespace qkv {
namespace rnn_kernel {  // named, not anonymous: core/ builds as one unity file

struct Dims {
  int64_t B = 0, n = 0, d = 0, H = 0, G = 0, k = 0;  // k: extra positions of packed (1 or 2)
};

const char* op_name(RecurrentCell c) { return c == RecurrentCell::gru ? "gru" : "lstm"; }

void check_state(const Tensor& s, const Dims& m, DType dt, const char* op, const char* what) {
  if (!s.defined()) return;
  QKV_CHECK(s.shape() == (Shape{m.B, m.H}) && s.dtype() == dt, op, what, " ", s.shape(), " ",
            dtype_name(s.dtype()), " must be (B, H) = (", m.B, ", ", m.H, ") ", dtype_name(dt));
}

Dims check(RecurrentCell cell, const Tensor& x, const Tensor& valid, const Tensor& h0,
           const Tensor& c0, const RecurrentWeights& w) {
  const char* op = op_name(cell);
  QKV_CHECK(x.defined() && x.dim() == 3 && is_floating(x.dtype()), op,
            "x must be a float (B, n, d) tensor, got ", x.defined() ? x.shape() : Shape{});
  Dims m{x.size(0), x.size(1), x.size(2), 0, gate_count(cell), cell == RecurrentCell::gru ? 1 : 2};
  QKV_CHECK(w.w_hh.defined() && w.w_hh.dim() == 2 && w.w_hh.size(0) == m.G * w.w_hh.size(1), op,
            "w_hh must be (", m.G, " H, H), got ", w.w_hh.defined() ? w.w_hh.shape() : Shape{});
  m.H = w.w_hh.size(1);
  const Shape gh{m.G * m.H};
  QKV_CHECK(w.w_ih.defined() && w.w_ih.shape() == (Shape{m.G * m.H, m.d}), op, "w_ih ",
            w.w_ih.defined() ? w.w_ih.shape() : Shape{}, " does not fit x ", x.shape(),
            " and w_hh ", w.w_hh.shape(), " (w_ih: (", m.G, " H, d))");
  QKV_CHECK(w.b_ih.defined() && w.b_hh.defined() && w.b_ih.shape() == gh && w.b_hh.shape() == gh,
            op, "b_ih and b_hh must be (", m.G * m.H, ")");
  for (const Tensor* t : {&w.w_ih, &w.w_hh, &w.b_ih, &w.b_hh})
    QKV_CHECK(t->dtype() == x.dtype(), op, "weights and x must share one dtype, got ",
              dtype_name(t->dtype()), " and ", dtype_name(x.dtype()));
  QKV_CHECK(!valid.defined() || (valid.dtype() == DType::b8 && valid.shape() == (Shape{m.B, m.n})),
            op, "valid must be bool (B, n) = (", m.B, ", ", m.n, "), got ", valid.shape());
  check_state(h0, m, x.dtype(), op, "h0");
  QKV_CHECK(cell == RecurrentCell::lstm || !c0.defined(), op, "a GRU has no cell state c0");
  check_state(c0, m, x.dtype(), op, "c0");
  return m;
}

// C (rows, cols) = op(A) op(B) over inner [+ C when accumulate], on gemm_bands; an empty
// product leaves C zeroed (or as it was) instead of asking BLAS about zero sizes.
template <class T>
void product(bool ta, bool tb, int64_t rows, int64_t cols, int64_t inner, const T* a, int64_t lda,
             const T* b, int64_t ldb, T* c, int64_t ldc, bool accumulate,
             const T* row_init = nullptr) {
  if (rows == 0 || cols == 0) return;
  if (inner == 0) {
    if (!accumulate)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < cols; ++j) c[r * ldc + j] = row_init ? row_init[j] : T(0);
    return;
  }
  kernel::gemm_bands<T>(ta, tb, rows, cols, inner, T(1), a, lda, b, ldb,
                        accumulate || row_init ? T(1) : T(0), c, ldc, row_init);
}

template <class T>
T sigmoid(T v) {
  return T(1) / (T(1) + std::exp(-v));
}

// Pointers of one step: x's projection (B n, G H) and the step's recurrent one (B, G H), the
// states (n + 1, B, H), cells, gates (n, B, 4H), the validity mask (B n) or null.
template <class T>
struct Sweep {
  Dims m;
  const T* xp;
  T* hp;
  T* states;
  T* cells;
  T* gates;
  const uint8_t* valid;
  bool reverse;
  int64_t position(int64_t s) const { return reverse ? m.n - 1 - s : s; }
  bool real(int64_t b, int64_t t) const { return !valid || valid[b * m.n + t]; }
};

// Row b of step s (position t): the cell's update, or the state carried through a padded step.
template <class T>
void forward_row(RecurrentCell cell, const Sweep<T>& w, int64_t s, int64_t b, T* out_row) {
  const int64_t H = w.m.H, B = w.m.B, t = w.position(s);
  const T* xr = w.xp + (b * w.m.n + t) * w.m.G * H;
  const T* hr = w.hp + b * w.m.G * H;
  const T* h = w.states + (s * B + b) * H;
  T* h_next = w.states + ((s + 1) * B + b) * H;
  T* g = w.gates + (s * B + b) * 4 * H;
  const bool lstm = cell == RecurrentCell::lstm;
  const T* c = lstm ? w.cells + (s * B + b) * H : nullptr;
  T* c_next = lstm ? w.cells + ((s + 1) * B + b) * H : nullptr;
  if (!w.real(b, t)) {  // skipped: the state passes through, the output is 0
    std::copy(h, h + H, h_next);
    if (lstm) std::copy(c, c + H, c_next);
    std::fill(g, g + 4 * H, T(0));
    std::fill(out_row, out_row + H, T(0));
    return;
  }
  for (int64_t j = 0; j < H; ++j) {
    if (!lstm) {  // g: r, z, n, hn
      const T r = sigmoid(xr[j] + hr[j]), z = sigmoid(xr[H + j] + hr[H + j]), hn = hr[2 * H + j];
      const T nn = std::tanh(xr[2 * H + j] + r * hn);
      h_next[j] = nn + z * (h[j] - nn);  // (1 - z) n + z h, as ATen's gru_cell computes it
      g[j] = r, g[H + j] = z, g[2 * H + j] = nn, g[3 * H + j] = hn;
    } else {  // g: i, f, g, o
      const T i = sigmoid(xr[j] + hr[j]), f = sigmoid(xr[H + j] + hr[H + j]);
      const T gg = std::tanh(xr[2 * H + j] + hr[2 * H + j]);
      const T o = sigmoid(xr[3 * H + j] + hr[3 * H + j]);
      c_next[j] = f * c[j] + i * gg;
      h_next[j] = o * std::tanh(c_next[j]);
      g[j] = i, g[H + j] = f, g[2 * H + j] = gg, g[3 * H + j] = o;
    }
    out_row[j] = h_next[j];
  }
}

template <class T>
void forward(RecurrentCell cell, const Dims& m, const Tensor& x2, const Tensor& valid,
             const RecurrentWeights& w, bool reverse, RecurrentResult& r) {
  const int64_t GH = m.G * m.H, rows = m.B * m.n;
  // xp: (B n, G H) = x W_ih^T + b_ih, every step's input projection in one product
  Tensor xp = empty({rows, GH}, x2.dtype());
  product<T>(false, true, rows, GH, m.d, x2.data<T>(), m.d, w.w_ih.data<T>(), m.d, xp.data<T>(), GH,
             false, w.b_ih.data<T>());
  std::vector<T> hp(m.B * GH);  // hp: (B, G H) = h W_hh^T + b_hh of the current step
  const Sweep<T> sw{m,
                    xp.data<T>(),
                    hp.data(),
                    r.states.data<T>(),
                    r.cells.defined() ? r.cells.data<T>() : nullptr,
                    r.gates.data<T>(),
                    valid.defined() ? valid.data<uint8_t>() : nullptr,
                    reverse};
  T* packed = r.packed.data<T>();
  const int64_t np = m.n + m.k;
  for (int64_t s = 0; s < m.n; ++s) {
    product<T>(false, true, m.B, GH, m.H, sw.states + s * m.B * m.H, m.H, w.w_hh.data<T>(), m.H,
               sw.hp, GH, false, w.b_hh.data<T>());
    const int64_t t = sw.position(s);
    parallel_for(m.B, GH * 8, [&](int64_t lo, int64_t hi) {
      for (int64_t b = lo; b < hi; ++b) forward_row(cell, sw, s, b, packed + (b * np + t) * m.H);
    });
  }
  for (int64_t b = 0; b < m.B; ++b) {  // the final states after the outputs
    const T* h = sw.states + (m.n * m.B + b) * m.H;
    std::copy(h, h + m.H, packed + (b * np + m.n) * m.H);
    if (cell == RecurrentCell::lstm) {
      const T* c = sw.cells + (m.n * m.B + b) * m.H;
      std::copy(c, c + m.H, packed + (b * np + m.n + 1) * m.H);
    }
  }
}

// Row b of step s in the backward sweep. dh: (H) the gradient reaching h' (this position's
// output already added), dc: (H) reaching c' (LSTM; updated to dc_prev), carry: (H) receives
// dh_prev's part that does not go through W_hh. dxp, dgh: the step's rows of the input-side and
// hidden-side pre-activation gradients.
template <class T>
void backward_row(RecurrentCell cell, const Sweep<T>& w, int64_t s, int64_t b, const T* dh, T* dc,
                  T* carry, T* dxp, T* dgh) {
  const int64_t H = w.m.H, B = w.m.B, GH = w.m.G * H, t = w.position(s);
  if (!w.real(b, t)) {  // skipped: the gradients pass through (dc stays as it is)
    std::copy(dh, dh + H, carry);
    std::fill(dgh, dgh + GH, T(0));
    return;
  }
  const T* g = w.gates + (s * B + b) * 4 * H;
  if (cell == RecurrentCell::gru) {
    const T* h = w.states + (s * B + b) * H;
    for (int64_t j = 0; j < H; ++j) {
      const T r = g[j], z = g[H + j], nn = g[2 * H + j], hn = g[3 * H + j];
      const T dn = dh[j] * (T(1) - z), dz = dh[j] * (h[j] - nn);
      const T da_n = dn * (T(1) - nn * nn);
      const T da_r = da_n * hn * r * (T(1) - r), da_z = dz * z * (T(1) - z);
      dxp[j] = dgh[j] = da_r;
      dxp[H + j] = dgh[H + j] = da_z;
      dxp[2 * H + j] = da_n;
      dgh[2 * H + j] = da_n * r;
      carry[j] = dh[j] * z;
    }
    return;
  }
  const T* c = w.cells + (s * B + b) * H;
  const T* c_next = w.cells + ((s + 1) * B + b) * H;
  for (int64_t j = 0; j < H; ++j) {
    const T i = g[j], f = g[H + j], gg = g[2 * H + j], o = g[3 * H + j];
    const T tc = std::tanh(c_next[j]);
    const T dcj = dc[j] + dh[j] * o * (T(1) - tc * tc);
    dxp[j] = dgh[j] = dcj * gg * i * (T(1) - i);
    dxp[H + j] = dgh[H + j] = dcj * c[j] * f * (T(1) - f);
    dxp[2 * H + j] = dgh[2 * H + j] = dcj * i * (T(1) - gg * gg);
    dxp[3 * H + j] = dgh[3 * H + j] = dh[j] * tc * o * (T(1) - o);
    dc[j] = dcj * f;
    carry[j] = T(0);
  }
}

template <class T>
void backward(RecurrentCell cell, const Dims& m, const Tensor& x2, const Tensor& valid,
              const RecurrentWeights& w, bool reverse, const RecurrentResult& f,
              const Tensor& dpacked, RecurrentGrads& out) {
  const int64_t H = m.H, GH = m.G * H, rows = m.B * m.n, np = m.n + m.k;
  Tensor dxp = zeros({rows, GH}, x2.dtype());       // input side, (B n, G H)
  Tensor dgh = empty({m.n * m.B, GH}, x2.dtype());  // hidden side, (n B, G H) in step order
  const Sweep<T> sw{m,
                    nullptr,
                    nullptr,
                    f.states.data<T>(),
                    f.cells.defined() ? f.cells.data<T>() : nullptr,
                    f.gates.data<T>(),
                    valid.defined() ? valid.data<uint8_t>() : nullptr,
                    reverse};
  const T* dp = dpacked.data<T>();
  std::vector<T> dh(m.B * H), carry(m.B * H), dc(cell == RecurrentCell::lstm ? m.B * H : 0);
  for (int64_t b = 0; b < m.B; ++b) {  // the final states' gradients start the sweep
    std::copy(dp + (b * np + m.n) * H, dp + (b * np + m.n + 1) * H, dh.data() + b * H);
    if (cell == RecurrentCell::lstm)
      std::copy(dp + (b * np + m.n + 1) * H, dp + (b * np + m.n + 2) * H, dc.data() + b * H);
  }
  for (int64_t s = m.n - 1; s >= 0; --s) {
    const int64_t t = sw.position(s);
    T* dgh_s = dgh.data<T>() + s * m.B * GH;
    parallel_for(m.B, GH * 8, [&](int64_t lo, int64_t hi) {
      for (int64_t b = lo; b < hi; ++b) {
        T* dhb = dh.data() + b * H;
        if (sw.real(b, t))
          for (int64_t j = 0; j < H; ++j) dhb[j] += dp[(b * np + t) * H + j];
        backward_row(cell, sw, s, b, dhb, dc.empty() ? nullptr : dc.data() + b * H,
                     carry.data() + b * H, dxp.data<T>() + (b * m.n + t) * GH, dgh_s + b * GH);
      }
    });
    // dh_prev (B, H) = carry + dgh_s (B, G H) W_hh (G H, H)
    product<T>(false, false, m.B, H, GH, dgh_s, GH, w.w_hh.data<T>(), H, carry.data(), H, true);
    std::swap(dh, carry);
  }
  out.dh0 = from_vector(dh, {m.B, H});
  if (cell == RecurrentCell::lstm) out.dc0 = from_vector(dc, {m.B, H});
  out.dx = empty({m.B, m.n, m.d}, x2.dtype());  // dx = dxp W_ih
  product<T>(false, false, rows, m.d, GH, dxp.data<T>(), GH, w.w_ih.data<T>(), m.d,
             out.dx.data<T>(), m.d, false);
  out.dw_ih = empty({GH, m.d}, x2.dtype());  // dW_ih = dxp^T x
  product<T>(true, false, GH, m.d, rows, dxp.data<T>(), GH, x2.data<T>(), m.d, out.dw_ih.data<T>(),
             m.d, false);
  out.dw_hh = empty({GH, H}, x2.dtype());  // dW_hh = sum over steps of dgh_s^T h_s
  product<T>(true, false, GH, H, m.n * m.B, dgh.data<T>(), GH, f.states.data<T>(), H,
             out.dw_hh.data<T>(), H, false);
  out.db_ih = sum_rows(dxp);
  out.db_hh = sum_rows(dgh);
}

// The weights as the kernels read them: contiguous.
RecurrentWeights packed_weights(const RecurrentWeights& w) {
  return {w.w_ih.contiguous(), w.w_hh.contiguous(), w.b_ih.contiguous(), w.b_hh.contiguous()};
}

}  // namespace rnn_kernel

RecurrentResult recurrent_forward(RecurrentCell cell, const Tensor& x, const Tensor& valid,
                                  const Tensor& h0, const Tensor& c0, const RecurrentWeights& w_in,
                                  bool reverse) {
  const rnn_kernel::Dims m = rnn_kernel::check(cell, x, valid, h0, c0, w_in);
  const RecurrentWeights w = rnn_kernel::packed_weights(w_in);
  const DType dt = x.dtype();
  RecurrentResult r;
  r.steps = m.n;
  r.packed = empty({m.B, m.n + m.k, m.H}, dt);
  r.states = empty({m.n + 1, m.B, m.H}, dt);
  r.gates = empty({m.n, m.B, 4 * m.H}, dt);
  r.states.select(0, 0).copy_(h0.defined() ? h0 : zeros({m.B, m.H}, dt));
  if (cell == RecurrentCell::lstm) {
    r.cells = empty({m.n + 1, m.B, m.H}, dt);
    r.cells.select(0, 0).copy_(c0.defined() ? c0 : zeros({m.B, m.H}, dt));
  }
  const Tensor x2 = x.contiguous().reshape({m.B * m.n, m.d});
  const Tensor v = valid.defined() ? valid.contiguous() : Tensor();
  visit_float(dt, rnn_kernel::op_name(cell), [&](auto tag) {
    rnn_kernel::forward<typename decltype(tag)::type>(cell, m, x2, v, w, reverse, r);
  });
  return r;
}

RecurrentGrads recurrent_backward(RecurrentCell cell, const Tensor& x, const Tensor& valid,
                                  const RecurrentWeights& w_in, bool reverse,
                                  const RecurrentResult& f, const Tensor& dpacked) {
  const rnn_kernel::Dims m = rnn_kernel::check(cell, x, valid, Tensor(), Tensor(), w_in);
  QKV_CHECK(dpacked.shape() == f.packed.shape() && dpacked.dtype() == x.dtype(),
            rnn_kernel::op_name(cell), "gradient ", dpacked.shape(), " for an output ",
            f.packed.shape());
  const RecurrentWeights w = rnn_kernel::packed_weights(w_in);
  const Tensor x2 = x.contiguous().reshape({m.B * m.n, m.d});
  const Tensor v = valid.defined() ? valid.contiguous() : Tensor();
  RecurrentGrads g;
  visit_float(x.dtype(), rnn_kernel::op_name(cell), [&](auto tag) {
    rnn_kernel::backward<typename decltype(tag)::type>(cell, m, x2, v, w, reverse, f,
                                                       dpacked.contiguous(), g);
  });
  return g;
}

}  // namespace qkv
