// Fused attention with its bf16 tile products on oneDNN matmul primitives
// (core/attention_onednn.hpp).
#include "attention_onednn.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attention_rows.hpp"
#include "bf16_tile.hpp"
#include "onednn_matmul.hpp"
#include "parallel.hpp"

namespace qkv::kernel {

OnednnAttentionBlocks& onednn_attention_blocks() {
  static OnednnAttentionBlocks b;
  return b;
}

namespace {

// A mask's attended columns widened to multiples of 32 keys within the block of kb keys, so
// that a product's width takes few values (each a primitive planned once per thread).
Cols widened(Cols c, int64_t kb) {
  if (c.lo >= c.hi) return c;
  return {c.lo & ~int64_t(31), std::min(kb, (c.hi + 31) & ~int64_t(31))};
}

// One batch entry's operands in bfloat16, row-major (rows padded to even widths): a (rows, d)
// matrix starts at entry + offset, row stride ld.
struct Packs {
  int64_t ldq, ldk, ldv, ldo, q, k, v, o, size;
  Packs(const AttentionProblem& p, bool with_dout)
      : ldq(even_up(p.dk)), ldk(ldq), ldv(even_up(p.dv)), ldo(ldv) {
    q = 0;
    k = q + p.n * ldq;
    v = k + p.m * ldk;
    o = v + p.m * ldv;
    size = o + (with_dout ? p.n * ldo : 0);
  }
};

// Query block [q0, q0 + qb) of batch entry bi over every key block: the online softmax with its
// two products per key block, then the rows' out and log-sum-exp.
struct ForwardBlock {
  const AttentionProblem& p;
  const uint8_t* mbase;
  float sc;
  int64_t tq, tk;

  void run(int64_t bi, int64_t q0, int64_t qb, const bf16_t* e, const Packs& f, float* o,
           int64_t ldo, float* L) const {
    float* S = workspace<float>(tq * tk + tq * p.dv).data();
    float* acc = S + tq * tk;
    bf16_t* Pb = workspace<bf16_t>(tq * even_up(tk)).data();
    double* mrun = workspace<double>(2 * tq).data();
    double* lrun = mrun + tq;
    std::fill(acc, acc + qb * p.dv, 0.0f);
    for (int64_t i = 0; i < qb; ++i) mrun[i] = -INFINITY, lrun[i] = 0;
    const Bf16Operand qa{e + f.q + q0 * f.ldq, f.ldq};
    for (int64_t k0 = 0; k0 < p.m; k0 += tk) {
      const int64_t kb = std::min(tk, p.m - k0);
      const Cols c = widened(attended_cols(p, mbase, bi, q0, qb, k0, kb, nullptr), kb);
      if (c.lo >= c.hi) continue;  // every weight of the block is 0
      const int64_t w = c.hi - c.lo, kf = k0 + c.lo, ldp = even_up(w);
      // S = q k^T;  acc += P v
      matmul_bf16_one_thread(qb, w, p.dk, qa, {e + f.k + kf * f.ldk, f.ldk, true}, S, w, false);
      softmax_tile(p, mbase, bi, q0, qb, kf, w, sc, S, Pb, ldp, acc, mrun, lrun);
      matmul_bf16_one_thread(qb, p.dv, w, {Pb, ldp}, {e + f.v + kf * f.ldv, f.ldv}, acc, p.dv,
                             true);
    }
    finish_tile(p, qb, acc, mrun, lrun, o, ldo, L);
  }
};

void pack_entry(const AttentionProblem& p, const Mat<float>& Q, const Mat<float>& K,
                const Mat<float>& V, const Mat<float>* dO, int64_t bi, const Packs& f, bf16_t* e) {
  pack_bf16_rows(Q.row(bi, 0), p.n, p.dk, Q.ld, e + f.q, f.ldq);
  pack_bf16_rows(K.row(bi, 0), p.m, p.dk, K.ld, e + f.k, f.ldk);
  pack_bf16_rows(V.row(bi, 0), p.m, p.dv, V.ld, e + f.v, f.ldv);
  if (dO) pack_bf16_rows(dO->row(bi, 0), p.n, p.dv, dO->ld, e + f.o, f.ldo);
}

}  // namespace

void attention_forward_onednn(const AttentionProblem& p, const Tensor& q, const Tensor& k,
                              const Tensor& v, float sc, Tensor& out, Tensor& lse) {
  const Mat<float> Q = mat<float>(q, p.nb), K = mat<float>(k, p.nb), V = mat<float>(v, p.nb);
  Mat<float> O = mat<float>(out, p.nb);
  float* L = lse.data<float>();
  const uint8_t* mbase =
      p.mask.defined() ? static_cast<const uint8_t*>(p.mask.storage()->data()) : nullptr;
  const OnednnAttentionBlocks& blk = onednn_attention_blocks();
  const int64_t tq = std::min(blk.fq, p.n), tk = std::min(blk.fk, p.m);
  const Packs f(p, false);
  const ForwardBlock fb{p, mbase, sc, tq, tk};
  // As the tile kernel: with one query block per entry the item packs its entry itself, with
  // several every entry is packed first.
  const int64_t nqt = (p.n + tq - 1) / tq;
  bf16_t* packs = nullptr;
  if (nqt > 1) {
    packs = forward_pack_buffer(static_cast<size_t>(p.nb * f.size)).data();
    parallel_for(p.nb, p.m * (p.dk + p.dv) + p.n * p.dk, [&](int64_t lo, int64_t hi) {
      for (int64_t bi = lo; bi < hi; ++bi)
        pack_entry(p, Q, K, V, nullptr, bi, f, packs + bi * f.size);
    });
  }
  parallel_for(p.nb * nqt, tq * p.m * (p.dk + p.dv) * 2, [&](int64_t lo, int64_t hi) {
    for (int64_t it = lo; it < hi; ++it) {
      const int64_t bi = it / nqt, q0 = (it % nqt) * tq, qb = std::min(tq, p.n - q0);
      const bf16_t* e = packs ? packs + bi * f.size : nullptr;
      if (!packs) {
        // the entry's own pack, apart from the block's workspaces
        std::vector<bf16_t>& own = forward_pack_buffer(static_cast<size_t>(f.size));
        pack_entry(p, Q, K, V, nullptr, bi, f, own.data());
        e = own.data();
      }
      fb.run(bi, q0, qb, e, f, O.row(bi, q0), O.ld, L + bi * p.n + q0);
    }
  });
}

namespace {

// The float32 row pass of one backward block: P from the raw scores (exp(s scale - lse), 0
// where masked or in a dead row), then dS = P (dP - D) scale in place of dP; both rounded into
// Pb and dSb (qb x w, row stride w), the next products' operands.
void backward_rows(const AttentionProblem& p, const uint8_t* mbase, int64_t bi, int64_t q0,
                   int64_t qb, int64_t kf, int64_t w, float sc, const float* lrow, const float* D,
                   float* P, float* dS, bf16_t* Pb, bf16_t* dSb) {
  for (int64_t i = 0; i < qb; ++i) {
    float* s = P + i * w;
    float* ds = dS + i * w;
    softmax_backward_row(p, mbase, bi, q0 + i, kf, w, sc, lrow[q0 + i], D[q0 + i], s, ds);
    to_bf16(s, Pb + i * w, w);
    to_bf16(ds, dSb + i * w, w);
  }
}

void zero_rows(float* t, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) std::fill(t + r * ld, t + r * ld + cols, 0.0f);
}

}  // namespace

void attention_backward_onednn(const AttentionProblem& p, const Tensor& q, const Tensor& k,
                               const Tensor& v, const Tensor& out, const Tensor& lse,
                               const Tensor& dout, float sc, AttentionGrads& g) {
  const Mat<float> Q = mat<float>(q, p.nb), K = mat<float>(k, p.nb), V = mat<float>(v, p.nb);
  const Mat<float> O = mat<float>(out, p.nb), dO = mat<float>(dout, p.nb);
  Mat<float> dQ = mat<float>(g.dq, p.nb), dK = mat<float>(g.dk, p.nb), dV = mat<float>(g.dv, p.nb);
  const float* L = lse.data<float>();
  const uint8_t* mbase =
      p.mask.defined() ? static_cast<const uint8_t*>(p.mask.storage()->data()) : nullptr;
  const OnednnAttentionBlocks& blk = onednn_attention_blocks();
  const int64_t tq = std::min(blk.bq, p.n), tk = std::min(blk.bk, p.m);
  const Packs f(p, true);
  parallel_for(p.nb, p.n * p.m * (2 * p.dk + 2 * p.dv), [&](int64_t lo, int64_t hi) {
    float* P = workspace<float>(2 * tq * tk + p.n).data();  // P, dS, D (n)
    float* dS = P + tq * tk;
    float* D = dS + tq * tk;
    bf16_t* e = workspace<bf16_t>(f.size + 2 * tq * tk).data();  // the packs, Pb, dSb
    bf16_t* Pb = e + f.size;
    bf16_t* dSb = Pb + tq * tk;
    for (int64_t bi = lo; bi < hi; ++bi) {
      pack_entry(p, Q, K, V, &dO, bi, f, e);
      float *dq = dQ.row(bi, 0), *dk = dK.row(bi, 0), *dv = dV.row(bi, 0);
      zero_rows(dq, p.n, p.dk, dQ.ld);
      zero_rows(dk, p.m, p.dk, dK.ld);
      zero_rows(dv, p.m, p.dv, dV.ld);
      const float* lrow = L + bi * p.n;
      // D_i = sum_j dO_ij O_ij = sum_j P_ij dP_ij: the softmax backward's row term, float32
      for (int64_t i = 0; i < p.n; ++i)
        D[i] = static_cast<float>(dot_lanes(O.row(bi, i), dO.row(bi, i), p.dv));
      for (int64_t k0 = 0; k0 < p.m; k0 += tk) {
        const int64_t kb = std::min(tk, p.m - k0);
        for (int64_t q0 = 0; q0 < p.n; q0 += tq) {
          const int64_t qb = std::min(tq, p.n - q0);
          const Cols c = widened(attended_cols(p, mbase, bi, q0, qb, k0, kb, lrow), kb);
          if (c.lo >= c.hi) continue;  // no weight of the block is nonzero: nothing flows back
          const int64_t w = c.hi - c.lo, kf = k0 + c.lo;
          const Bf16Operand qa{e + f.q + q0 * f.ldq, f.ldq}, oa{e + f.o + q0 * f.ldo, f.ldo};
          const Bf16Operand kr{e + f.k + kf * f.ldk, f.ldk}, vr{e + f.v + kf * f.ldv, f.ldv};
          // P <- S = q k^T;  dS <- dP = dO v^T
          matmul_bf16_one_thread(qb, w, p.dk, qa, {kr.p, kr.ld, true}, P, w, false);
          matmul_bf16_one_thread(qb, w, p.dv, oa, {vr.p, vr.ld, true}, dS, w, false);
          backward_rows(p, mbase, bi, q0, qb, kf, w, sc, lrow, D, P, dS, Pb, dSb);
          // dV += P^T dO;  dK += dS^T q;  dQ += dS k
          matmul_bf16_one_thread(w, p.dv, qb, {Pb, w, true}, oa, dv + kf * dV.ld, dV.ld, true);
          matmul_bf16_one_thread(w, p.dk, qb, {dSb, w, true}, qa, dk + kf * dK.ld, dK.ld, true);
          matmul_bf16_one_thread(qb, p.dk, w, {dSb, w}, kr, dq + q0 * dQ.ld, dQ.ld, true);
        }
      }
    }
  });
}

}  // namespace qkv::kernel
