// Fused attention with bf16 tile products (core/attention_bf16.hpp), run by attention_forward
// and attention_backward in a bf16 PrecisionScope: the tile product against its scalar
// reference; forward and backward against the float32 kernel within bfloat16's tolerance (and
// not bit-equal to it: the bf16 path did run) at sizes crossing the tiles (64 queries; 256 keys
// forward, 128 backward; odd widths), under each kind of mask, with a fully masked row (0, not
// NaN) and a decoding step over a strided key cache; the same bits twice and at 1 and 2 threads;
// float32 attention outside the scope unchanged. PyTorch's autocast attention on the same inputs:
// tests/nn/test_attention_bf16_reference.cpp. Every case runs the tiles backend, whatever
// QKV_ATTENTION_BACKEND or this CPU would choose (oneDNN's: tests/core/test_attention_onednn.cpp).
#include <catch2/catch.hpp>

#include <cmath>

#include "core/attention_backend.hpp"
#include "core/bf16_tile.hpp"
#include "core/fused.hpp"
#include "core/parallel.hpp"
#include "core/precision.hpp"
#include "core/random.hpp"
#include "support/attention_runs.hpp"

using namespace qkv;
using namespace qkv::testing;

namespace {

using Inputs = AttentionInputs;
using Run = AttentionRun;
constexpr auto inputs = attention_inputs;

// Forward and backward on the tiles backend, in precision p.
Run run(const Inputs& x, const Tensor& mask, Precision p) {
  return attention_run(x, mask, p, AttentionBackend::tiles);
}

// The bf16 run b against the fp32 run f (and not bit-equal: the bf16 kernel ran).
void check_close(const Run& b, const Run& f, double tol) { testing::check_close(b, f, tol, true); }

}  // namespace

TEST_CASE("bf16 tile product matches its scalar reference across its blocks") {
  if (!bf16_simd()) QKV_SKIP("bf16_tile_product is the reference on this CPU (or under this cap)");
  Generator g(3);
  const int64_t rows = 13, cols = 70, kp = 9, lda = 2 * kp + 4, ldb = 2 * cols + 6, ldc = cols + 3;
  const Tensor fa = randn({rows, lda}, g), fb = randn({kp, ldb}, g), c0 = randn({rows, ldc}, g);
  std::vector<bf16_t> a(rows * lda), b(kp * ldb);
  to_bf16(fa.data<float>(), a.data(), rows * lda);
  to_bf16(fb.data<float>(), b.data(), kp * ldb);
  for (bool acc : {false, true}) {
    Tensor c1 = c0.clone(), c2 = c0.clone();
    kernel::bf16_tile_product(rows, cols, kp, a.data(), lda, b.data(), ldb, c1.data<float>(), ldc,
                              acc);
    kernel::bf16_tile_product_reference(rows, cols, kp, a.data(), lda, b.data(), ldb,
                                        c2.data<float>(), ldc, acc);
    INFO("accumulate " << acc);
    CHECK(rel_err(c1, c2) < 1e-5);
    // the padding columns of c are untouched
    CHECK(same_bits(c1.slice(1, cols, ldc), c0.slice(1, cols, ldc)));
  }
}

TEST_CASE("bf16 attention forward and backward match fp32 under each mask") {
  SKIP_WITHOUT_BF16();
  const int64_t B = 2, H = 2, n = 70, m = 300;  // 2 query tiles, 2 or 3 key tiles
  const Inputs x = inputs(B, H, n, m, 33, 20, 5);
  const int64_t shift = m - n;  // query i sits at key position i + shift
  const std::pair<const char*, Tensor> masks[] = {
      {"none", Tensor()},
      {"causal", mask_of({n, m}, [&](const Shape& i) { return i[1] <= i[0] + shift; })},
      {"padding", mask_of({B, 1, 1, m}, [&](const Shape& i) { return i[3] < (i[0] ? 131 : 300); })},
      {"window",
       mask_of({n, m}, [&](const Shape& i) { return std::abs(i[1] - (i[0] + shift)) <= 40; })},
  };
  for (const auto& [name, mask] : masks) {
    INFO("mask " << name);
    check_close(run(x, mask, Precision::bf16), run(x, mask, Precision::fp32), 2e-2);
  }
}

TEST_CASE("bf16 attention gives a fully masked row 0 out and 0 gradients, not NaN") {
  SKIP_WITHOUT_BF16();
  const int64_t n = 67, m = 140;
  const Inputs x = inputs(1, 2, n, m, 16, 16, 7);
  const Tensor mask =
      mask_of({n, m}, [&](const Shape& i) { return i[0] != 5 && i[0] != 66 && i[1] <= i[0] + 73; });
  const Run b = run(x, mask, Precision::bf16), f = run(x, mask, Precision::fp32);
  for (const Tensor& t : {b.r.out, b.g.dq, b.g.dk, b.g.dv}) CHECK_FALSE(any_nan_in(t));
  check_dead_rows(b, {5, 66});
  check_close(b, f, 2e-2);
}

TEST_CASE("bf16 attention decodes one query over a strided key cache") {
  SKIP_WITHOUT_BF16();
  // One query over keys and values that are strided views: the first 45 rows of each head's
  // 64-row buffer, so consecutive heads are 64 rows apart, not 45. (qkv's own key/value cache is
  // grown by ag::concat into a contiguous tensor, nn/transformer.cpp; this covers a caller whose
  // keys are a view of a larger buffer.)
  Generator g(9);
  const Tensor kbuf = randn({2, 3, 64, 24}, g), vbuf = randn({2, 3, 64, 24}, g);
  Inputs x{randn({2, 3, 1, 24}, g), kbuf.slice(2, 0, 45), vbuf.slice(2, 0, 45),
           randn({2, 3, 1, 24}, g)};
  check_close(run(x, Tensor(), Precision::bf16), run(x, Tensor(), Precision::fp32), 2e-2);
}

// Cached decoding asks for one query's row over the keys so far; the full causal forward
// computes that row among 64-query tiles. qkv's own tile products sum each element over the
// inner dimension in one fixed order whatever the number of rows, the row statistics are per
// row, and a masked key adds exact zeros (its weight, and its pair in the product): the same
// operations in the same order, so the same bits, on every CPU. (An fp32 one-query attention,
// or one that rounded its operands elsewhere, would differ from the full row in bf16's bits.)
TEST_CASE("bf16 attention of one query gives the full causal forward's row, bit for bit") {
  SKIP_WITHOUT_BF16();
  const int64_t n = 300;  // past the 64-query and 256-key tiles
  const Inputs x = inputs(2, 3, n, n, 32, 24, 21);
  const Tensor causal = mask_of({n, n}, [](const Shape& i) { return i[1] <= i[0]; });
  const double scale = 1.0 / std::sqrt(32.0);
  AttentionBackendScope tiles(AttentionBackend::tiles);
  PrecisionScope scope(Precision::bf16);
  const AttentionResult full = attention_forward(x.q, x.k, x.v, causal, scale);
  for (int64_t t : {0, 1, 63, 64, 65, 200, 255, 256, 257, 299}) {
    INFO("query " << t);
    const AttentionResult one = attention_forward(x.q.narrow(2, t, 1), x.k.narrow(2, 0, t + 1),
                                                  x.v.narrow(2, 0, t + 1), Tensor(), scale);
    CHECK(same_bits(one.out.contiguous(), full.out.narrow(2, t, 1).contiguous()));
    CHECK(same_bits(one.lse.contiguous(), full.lse.narrow(2, t, 1).contiguous()));
  }
}

TEST_CASE("bf16 attention gives the same bits twice and at 1 and 2 threads") {
  SKIP_WITHOUT_BF16();
  const Inputs x = inputs(2, 3, 130, 270, 32, 32, 13);
  const Tensor causal = mask_of({130, 270}, [](const Shape& i) { return i[1] <= i[0] + 140; });
  check_same_bits_across_threads(x, causal, AttentionBackend::tiles);
}

TEST_CASE("fp32 attention outside a bf16 scope is not touched by it") {
  SKIP_WITHOUT_BF16();
  const Inputs x = inputs(1, 2, 70, 90, 16, 16, 17);
  const Run before = run(x, Tensor(), Precision::fp32);
  (void)run(x, Tensor(), Precision::bf16);
  const Run after = run(x, Tensor(), Precision::fp32);
  CHECK(before.r.precision == Precision::fp32);
  CHECK(same_bits(after.r.out, before.r.out));
  CHECK(same_bits(after.g.dk, before.g.dk));
  // float64 in a bf16 scope stays float64 throughout
  const Inputs x64{x.q.to(DType::f64), x.k.to(DType::f64), x.v.to(DType::f64),
                   x.dout.to(DType::f64)};
  CHECK(run(x64, Tensor(), Precision::bf16).r.precision == Precision::fp32);
}
