// Fused attention with bf16 tile products (core/attention_bf16.hpp). The same tiles, work items
// and row pass as the float32 kernel (core/attention.cpp); what changes is where the operands
// come from: each call packs q, k, v (and dO) into bfloat16 once, in the layouts the tile
// products read (core/bf16_tile.hpp), instead of handing float32 tiles to BLAS.
#include "attention_bf16.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attention_rows.hpp"
#include "bf16_tile.hpp"
#include "parallel.hpp"

namespace qkv::kernel {
namespace {

constexpr int64_t kTileQ = 64;    // query rows per tile (even: pair-aligned)
constexpr int64_t kTileK = 256;   // keys per tile, forward (even)
constexpr int64_t kTileKB = 128;  // keys per tile, backward (even)

// s (w floats) rounded into d (even_up(w) bfloat16s: a zero pads an odd row).
inline void round_row(const float* s, int64_t w, bf16_t* d) {
  to_bf16(s, d, w);
  if (w & 1) d[w] = 0;
}

}  // namespace

// lo even, so that the tile's keys start on a pair.
Cols attended_cols(const AttentionProblem& p, const uint8_t* mbase, int64_t bi, int64_t q0,
                   int64_t qb, int64_t k0, int64_t kb, const float* lse) {
  if (!mbase) return {0, kb};
  int64_t lo = kb, hi = 0;
  for (int64_t i = 0; i < qb; ++i) {
    if (lse && lse[q0 + i] == -std::numeric_limits<float>::infinity()) continue;  // a dead row
    const uint8_t* mrow = mbase + p.moff[bi] + (q0 + i) * p.msn + k0 * p.msm;
    int64_t a = 0, b = kb;
    while (a < b && !mrow[a * p.msm]) ++a;
    while (b > a && !mrow[(b - 1) * p.msm]) --b;
    if (a < b) lo = std::min(lo, a), hi = std::max(hi, b);
  }
  return {lo & ~int64_t(1), hi};
}

void softmax_tile(const AttentionProblem& p, const uint8_t* mbase, int64_t bi, int64_t q0,
                  int64_t qb, int64_t kfirst, int64_t w, float sc, float* S, bf16_t* Pb,
                  int64_t ldp, float* acc, double* mrun, double* lrun) {
  for (int64_t i = 0; i < qb; ++i) {
    float* s = S + i * w;
    bf16_t* pb = Pb + i * ldp;
    const uint8_t* mrow = mbase ? mbase + p.moff[bi] + (q0 + i) * p.msn + kfirst * p.msm : nullptr;
    const ScoredRow<float> row = scale_mask_row(s, w, sc, mrow, p.msm);
    const double mnew = std::max<double>(mrun[i], row.max);
    if (mnew == -INFINITY) {  // nothing to attend to so far: weights all 0, unless a NaN score
      if (any_nan(s + row.lo, row.hi - row.lo)) mrun[i] = lrun[i] = NAN;
      std::fill(pb, pb + ldp, bf16_t(0));
      continue;
    }
    const float mt = static_cast<float>(mnew);
    exp_row(s, w, row, mt);
    const double z = sum_lanes(s, w);
    if (mrun[i] != mnew) {
      const float alpha = mrun[i] == -INFINITY ? 0.0f : fast_exp<float>(float(mrun[i]) - mt);
      lrun[i] *= alpha;
      float* a = acc + i * p.dv;
      for (int64_t j = 0; j < p.dv; ++j) a[j] *= alpha;
      mrun[i] = mnew;
    }
    lrun[i] += z;
    round_row(s, w, pb);
  }
}

void finish_tile(const AttentionProblem& p, int64_t qb, const float* acc, const double* mrun,
                 const double* lrun, float* o, int64_t ldo, float* L) {
  for (int64_t i = 0; i < qb; ++i, o += ldo) {
    const float* a = acc + i * p.dv;
    if (lrun[i] == 0) {
      std::fill(o, o + p.dv, 0.0f);
      L[i] = -std::numeric_limits<float>::infinity();
      continue;
    }
    const float inv = static_cast<float>(1.0 / lrun[i]);
    for (int64_t j = 0; j < p.dv; ++j) o[j] = a[j] * inv;
    L[i] = static_cast<float>(mrun[i] + std::log(lrun[i]));
  }
}

void softmax_backward_row(const AttentionProblem& p, const uint8_t* mbase, int64_t bi, int64_t qi,
                          int64_t kfirst, int64_t w, float sc, float l, float di, float* s,
                          float* ds) {
  if (l == -std::numeric_limits<float>::infinity()) {
    std::fill(s, s + w, 0.0f);
  } else {
    const uint8_t* mrow = mbase ? mbase + p.moff[bi] + qi * p.msn + kfirst * p.msm : nullptr;
    exp_row(s, w, scale_mask_row(s, w, sc, mrow, p.msm), l);
  }
  for (int64_t j = 0; j < w; ++j) ds[j] = s[j] * (ds[j] - di) * sc;
}

namespace {

// k (m, d) as B = k^T over d, in key tiles of `tile` columns each stored apart (pair-row stride
// 2 tile): a tile's product then reads its B rows 2 tile elements apart, not 2 m, which at long
// m would map every row to the same few cache sets.
void pack_keys_transposed(const float* k, int64_t m, int64_t d, int64_t ld, int64_t tile,
                          bf16_t* dst) {
  for (int64_t k0 = 0; k0 < m; k0 += tile)
    pack_bf16_pairs_transposed(k + k0 * ld, std::min(tile, m - k0), d, ld,
                               dst + (k0 / tile) * pairs_of(d) * 2 * tile, 2 * tile);
}

// One batch entry's operands packed for the forward: q as A (n rows), k^T and v as B.
struct ForwardPacks {
  int64_t ldq, ldkt, ldv, q_size, kt_size, v_size;
  ForwardPacks(const AttentionProblem& p, int64_t tk)
      : ldq(even_up(p.dk)),
        ldkt(2 * tk),
        ldv(2 * p.dv),
        q_size(p.n * ldq),
        kt_size(pairs_of(p.dk) * ldkt * ((p.m + tk - 1) / tk)),
        v_size(pairs_of(p.m) * ldv) {}
  int64_t entry() const { return q_size + kt_size + v_size; }
};

// One batch entry's operands packed for the backward, in the thread's workspace: q and dO as A
// (S = q k^T, dP = dO v^T), q^T and dO^T as A (dK^T += q^T dS, dV^T += dO^T P), k^T and v^T as
// B (over d), k as B (over keys: dQ += dS k).
struct BackwardPacks {
  int64_t ldq, ldo, ldt, ldkt, ldk;
  bf16_t *qa, *oa, *qt, *ot, *kt, *vt, *kp;
  BackwardPacks(const AttentionProblem& p, int64_t tk, bf16_t* base)
      : ldq(even_up(p.dk)), ldo(even_up(p.dv)), ldt(even_up(p.n)), ldkt(2 * tk), ldk(2 * p.dk) {
    qa = base;
    oa = qa + p.n * ldq;
    qt = oa + p.n * ldo;
    ot = qt + p.dk * ldt;
    kt = ot + p.dv * ldt;
    const int64_t tiles = (p.m + tk - 1) / tk;
    vt = kt + pairs_of(p.dk) * ldkt * tiles;
    kp = vt + pairs_of(p.dv) * ldkt * tiles;
  }
  // k^T's and v^T's B rows for the key tile starting at k0, from column c within it
  const bf16_t* kt_at(const AttentionProblem& p, int64_t k0, int64_t c) const {
    return kt + (k0 / (ldkt / 2)) * pairs_of(p.dk) * ldkt + 2 * c;
  }
  const bf16_t* vt_at(const AttentionProblem& p, int64_t k0, int64_t c) const {
    return vt + (k0 / (ldkt / 2)) * pairs_of(p.dv) * ldkt + 2 * c;
  }
  static int64_t size(const AttentionProblem& p, int64_t tk) {
    const int64_t keys = tk * ((p.m + tk - 1) / tk);
    return p.n * (even_up(p.dk) + even_up(p.dv)) + (p.dk + p.dv) * even_up(p.n) +
           (pairs_of(p.dk) + pairs_of(p.dv)) * 2 * keys + pairs_of(p.m) * 2 * p.dk;
  }
};

// The float32 work of one backward tile: P from the scores (exp(s - lse), 0 where masked or
// dead), then dS = P (dP - D) scale in place of dP; P and dS rounded as the next products'
// operands: pp (P as B over query pairs), sa (dS as A), sp (dS as B over query pairs).
void softmax_backward_tile(const AttentionProblem& p, const uint8_t* mbase, int64_t bi, int64_t q0,
                           int64_t qb, int64_t kf, int64_t w, float sc, const float* lrow,
                           const float* D, float* P, float* dS, bf16_t* pp, bf16_t* sa,
                           bf16_t* sp) {
  for (int64_t i = 0; i < qb; ++i) {
    float* s = P + i * w;
    float* ds = dS + i * w;
    softmax_backward_row(p, mbase, bi, q0 + i, kf, w, sc, lrow[q0 + i], D[q0 + i], s, ds);
    round_row(ds, w, sa + i * even_up(w));
  }
  pack_bf16_pairs(P, qb, w, w, pp, 2 * w);
  pack_bf16_pairs(dS, qb, w, w, sp, 2 * w);
}

// c (m, cols, row stride ldc) = t^T for t stored by key tiles: tile k0 / tk is a (cols, tk)
// block (row stride tk) at t + (k0 / tk) cols tk, like pack_keys_transposed's layout.
void transpose_tiles_into(const float* t, int64_t m, int64_t cols, int64_t tk, float* c,
                          int64_t ldc) {
  for (int64_t r = 0; r < m; ++r) {
    const float* col = t + (r / tk) * cols * tk + r % tk;
    for (int64_t j = 0; j < cols; ++j) c[r * ldc + j] = col[j * tk];
  }
}
}  // namespace

void attention_forward_bf16(const AttentionProblem& p, const Tensor& q, const Tensor& k,
                            const Tensor& v, float sc, Tensor& out, Tensor& lse) {
  const Mat<float> Q = mat<float>(q, p.nb), K = mat<float>(k, p.nb), V = mat<float>(v, p.nb);
  Mat<float> O = mat<float>(out, p.nb);
  float* L = lse.data<float>();
  const uint8_t* mbase =
      p.mask.defined() ? static_cast<const uint8_t*>(p.mask.storage()->data()) : nullptr;
  const int64_t tk = std::min(kTileK, p.m);
  const ForwardPacks f(p, tk);
  auto pack_entry = [&](int64_t bi, bf16_t* e) {  // q, k, v rounded once per call
    pack_bf16_rows(Q.row(bi, 0), p.n, p.dk, Q.ld, e, f.ldq);
    pack_keys_transposed(K.row(bi, 0), p.m, p.dk, K.ld, tk, e + f.q_size);
    pack_bf16_pairs(V.row(bi, 0), p.m, p.dv, V.ld, e + f.q_size + f.kt_size, f.ldv);
  };
  // With one query tile per batch entry the item that owns an entry packs it into its own
  // workspace; with several, every entry is packed first (one more parallel region, which
  // short sequences would feel and long ones do not).
  const int64_t nqt = (p.n + kTileQ - 1) / kTileQ;
  bf16_t* packs = nullptr;
  if (nqt > 1) {
    packs = forward_pack_buffer(static_cast<size_t>(p.nb * f.entry())).data();
    parallel_for(p.nb, p.m * (p.dk + p.dv) + p.n * p.dk, [&](int64_t lo, int64_t hi) {
      for (int64_t bi = lo; bi < hi; ++bi) pack_entry(bi, packs + bi * f.entry());
    });
  }
  const int64_t ldp = even_up(tk), kp = pairs_of(p.dk);
  parallel_for(p.nb * nqt, kTileQ * p.m * (p.dk + p.dv) * 2, [&](int64_t lo, int64_t hi) {
    std::vector<float>& ws = workspace<float>(kTileQ * tk + kTileQ * p.dv);
    float* S = ws.data();
    float* acc = S + kTileQ * tk;
    bf16_t* Pb = workspace<bf16_t>(kTileQ * ldp + (packs ? 0 : f.entry())).data();
    double mrun[kTileQ], lrun[kTileQ];
    for (int64_t it = lo; it < hi; ++it) {
      const int64_t bi = it / nqt, q0 = (it % nqt) * kTileQ, qb = std::min(kTileQ, p.n - q0);
      bf16_t* e = packs ? packs + bi * f.entry() : Pb + kTileQ * ldp;
      if (!packs) pack_entry(bi, e);
      const bf16_t *qa = e + q0 * f.ldq, *kt = e + f.q_size, *vp = kt + f.kt_size;
      std::fill(acc, acc + qb * p.dv, 0.0f);
      for (int64_t i = 0; i < qb; ++i) mrun[i] = -INFINITY, lrun[i] = 0;
      for (int64_t k0 = 0; k0 < p.m; k0 += tk) {
        const int64_t kb = std::min(tk, p.m - k0);
        const Cols c = attended_cols(p, mbase, bi, q0, qb, k0, kb, nullptr);
        if (c.lo >= c.hi) continue;  // every weight of the tile is 0
        const int64_t w = c.hi - c.lo, kf = k0 + c.lo, ldw = even_up(w);
        const bf16_t* ktile = kt + (k0 / tk) * pairs_of(p.dk) * f.ldkt + 2 * c.lo;
        bf16_tile_product(qb, w, kp, qa, f.ldq, ktile, f.ldkt, S, w, false);  // S = q k^T
        softmax_tile(p, mbase, bi, q0, qb, kf, w, sc, S, Pb, ldw, acc, mrun, lrun);
        bf16_tile_product(qb, p.dv, pairs_of(w), Pb, ldw, vp + (kf / 2) * f.ldv, f.ldv, acc, p.dv,
                          true);  // acc += P v
      }
      finish_tile(p, qb, acc, mrun, lrun, O.row(bi, q0), O.ld, L + bi * p.n + q0);
    }
  });
}

void attention_backward_bf16(const AttentionProblem& p, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Tensor& out, const Tensor& lse,
                             const Tensor& dout, float sc, AttentionGrads& g) {
  const Mat<float> Q = mat<float>(q, p.nb), K = mat<float>(k, p.nb), V = mat<float>(v, p.nb);
  const Mat<float> O = mat<float>(out, p.nb), dO = mat<float>(dout, p.nb);
  Mat<float> dQ = mat<float>(g.dq, p.nb), dK = mat<float>(g.dk, p.nb), dV = mat<float>(g.dv, p.nb);
  const float* L = lse.data<float>();
  const uint8_t* mbase =
      p.mask.defined() ? static_cast<const uint8_t*>(p.mask.storage()->data()) : nullptr;
  const int64_t tq = std::min(kTileQ, p.n), tk = std::min(kTileKB, p.m);
  const int64_t tile = tq * tk, btile = even_up(tq) * even_up(tk);
  parallel_for(p.nb, p.n * p.m * (2 * p.dk + 2 * p.dv), [&](int64_t lo, int64_t hi) {
    // float: P, dS, dK^T and dV^T (by key tiles), D (n); bf16: the packs, then pp, sa, sp
    const int64_t keys = tk * ((p.m + tk - 1) / tk);
    float* P = workspace<float>(2 * tile + (p.dk + p.dv) * keys + p.n).data();
    float* dS = P + tile;
    float* dKT = dS + tile;
    float* dVT = dKT + p.dk * keys;
    float* D = dVT + p.dv * keys;
    const int64_t packs = BackwardPacks::size(p, tk);
    bf16_t* base = workspace<bf16_t>(packs + 3 * btile).data();
    bf16_t* pp = base + packs;
    bf16_t* sa = pp + btile;
    bf16_t* sp = sa + btile;
    for (int64_t bi = lo; bi < hi; ++bi) {
      const BackwardPacks b(p, tk, base);
      pack_bf16_rows(Q.row(bi, 0), p.n, p.dk, Q.ld, b.qa, b.ldq);
      pack_bf16_rows(dO.row(bi, 0), p.n, p.dv, dO.ld, b.oa, b.ldo);
      pack_bf16_transposed(Q.row(bi, 0), p.n, p.dk, Q.ld, b.qt, b.ldt);
      pack_bf16_transposed(dO.row(bi, 0), p.n, p.dv, dO.ld, b.ot, b.ldt);
      pack_keys_transposed(K.row(bi, 0), p.m, p.dk, K.ld, tk, b.kt);
      pack_keys_transposed(V.row(bi, 0), p.m, p.dv, V.ld, tk, b.vt);
      pack_bf16_pairs(K.row(bi, 0), p.m, p.dk, K.ld, b.kp, b.ldk);
      float* dq = dQ.row(bi, 0);
      for (int64_t i = 0; i < p.n; ++i) std::fill(dq + i * dQ.ld, dq + i * dQ.ld + p.dk, 0.0f);
      std::fill(dKT, dKT + (p.dk + p.dv) * keys, 0.0f);
      const float* lrow = L + bi * p.n;
      // D_i = sum_j dO_ij O_ij = sum_j P_ij dP_ij: the softmax backward's row term, float32
      for (int64_t i = 0; i < p.n; ++i)
        D[i] = static_cast<float>(dot_lanes(O.row(bi, i), dO.row(bi, i), p.dv));
      for (int64_t k0 = 0; k0 < p.m; k0 += tk) {
        const int64_t kb = std::min(tk, p.m - k0);
        for (int64_t q0 = 0; q0 < p.n; q0 += tq) {
          const int64_t qb = std::min(tq, p.n - q0);
          const Cols c = attended_cols(p, mbase, bi, q0, qb, k0, kb, lrow);
          if (c.lo >= c.hi) continue;  // no weight of the tile is nonzero: nothing flows back
          const int64_t w = c.hi - c.lo, kf = k0 + c.lo;
          // P <- S = q k^T;  dS <- dP = dO v^T
          bf16_tile_product(qb, w, pairs_of(p.dk), b.qa + q0 * b.ldq, b.ldq, b.kt_at(p, k0, c.lo),
                            b.ldkt, P, w, false);
          bf16_tile_product(qb, w, pairs_of(p.dv), b.oa + q0 * b.ldo, b.ldo, b.vt_at(p, k0, c.lo),
                            b.ldkt, dS, w, false);
          softmax_backward_tile(p, mbase, bi, q0, qb, kf, w, sc, lrow, D, P, dS, pp, sa, sp);
          // dV^T += dO^T P;  dK^T += q^T dS;  dQ += dS k
          float* dvt = dVT + (k0 / tk) * p.dv * tk + c.lo;
          float* dkt = dKT + (k0 / tk) * p.dk * tk + c.lo;
          bf16_tile_product(p.dv, w, pairs_of(qb), b.ot + q0, b.ldt, pp, 2 * w, dvt, tk, true);
          bf16_tile_product(p.dk, w, pairs_of(qb), b.qt + q0, b.ldt, sp, 2 * w, dkt, tk, true);
          bf16_tile_product(qb, p.dk, pairs_of(w), sa, even_up(w), b.kp + (kf / 2) * b.ldk, b.ldk,
                            dq + q0 * dQ.ld, dQ.ld, true);
        }
      }
      transpose_tiles_into(dKT, p.m, p.dk, tk, dK.row(bi, 0), dK.ld);
      transpose_tiles_into(dVT, p.m, p.dv, tk, dV.row(bi, 0), dV.ld);
    }
  });
}

}  // namespace qkv::kernel
