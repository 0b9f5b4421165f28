// Fused attention in bf16 with its tile products on oneDNN's matmul primitives
// (core/attention_onednn.hpp), the onednn attention backend (core/attention_backend.hpp):
// forward and backward against the float32 kernel and against qkv's own tiles (the tiles
// backend) at sizes crossing oneDNN's blocks (128 queries; 512 keys forward, 256 backward) and
// small blocks (16 queries, 64 and 32 keys: every widening of a mask's columns to 32 keys),
// odd widths, under no, causal, padding and window masks, with fully masked rows (0 out, -inf
// log-sum-exp, 0 gradients, no NaN); the same bits twice and at 1 and 2 threads; the kernel
// itself under whatever oneDNN ISA the host and ONEDNN_MAX_CPU_ISA leave (`make test-cpus`),
// where a bf16 scope may be refused; the backend's names and QKV_ATTENTION_BACKEND's errors.
// PyTorch autocast: tests/nn/test_attention_bf16_reference.cpp runs both backends.
//
// Tolerances, from the rounding: both backends round the same operands (q, k, v, dO) to
// bfloat16 at the same points and keep the same float32 statistics; the tile kernel stands
// within 2e-2 (five units of bfloat16's 2^-8 relative precision) of float32 on these inputs
// (tests/core/test_attention_bf16.cpp), and the oneDNN kernel is held to the same bound. They
// differ where P and dS are rounded: from scores summed in another order and, forward, scaled
// by a running max taken over other blocks, so a rounding may fall the other way. Each being
// within the bound of float32, they stand within twice it of each other.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>

#include "core/attention_backend.hpp"
#include "core/attention_onednn.hpp"
#include "core/kernel_util.hpp"
#include "core/onednn.hpp"
#include "core/onednn_matmul.hpp"
#include "core/parallel.hpp"
#include "core/precision.hpp"
#include "core/random.hpp"
#include "support/attention_runs.hpp"

using namespace qkv;
using namespace qkv::testing;

namespace {

constexpr double kBf16Tol = 2e-2;  // the bf16 kernels against float32 (above)

using Inputs = AttentionInputs;
using Run = AttentionRun;
constexpr auto inputs = attention_inputs;
constexpr auto run = attention_run;

Run fp32(const Inputs& x, const Tensor& mask) {
  return run(x, mask, Precision::fp32, AttentionBackend::tiles);
}

// The masks of a (B, H, n, m) problem whose query i sits at key position i + m - n.
std::vector<std::pair<const char*, Tensor>> masks(int64_t B, int64_t n, int64_t m) {
  const int64_t shift = m - n;
  return {
      {"none", Tensor()},
      {"causal", mask_of({n, m}, [&](const Shape& i) { return i[1] <= i[0] + shift; })},
      {"padding",
       mask_of({B, 1, 1, m}, [&](const Shape& i) { return i[3] < (i[0] ? m / 2 + 3 : m); })},
      {"window",
       mask_of({n, m}, [&](const Shape& i) { return std::abs(i[1] - (i[0] + shift)) <= 40; })},
      {"dead rows",
       mask_of({n, m},
               [&](const Shape& i) { return i[0] != 5 && i[0] != n - 1 && i[1] <= i[0] + shift; })},
  };
}

// Both backends against float32 and each other under every mask.
void check_backends(const Inputs& x) {
  const int64_t B = x.q.size(0), n = x.q.size(2), m = x.k.size(2);
  for (const auto& [name, mask] : masks(B, n, m)) {
    INFO("mask " << name);
    const Run d = run(x, mask, Precision::bf16, AttentionBackend::onednn);
    const Run t = run(x, mask, Precision::bf16, AttentionBackend::tiles);
    const Run f = fp32(x, mask);
    {
      INFO("oneDNN against float32");
      check_close(d, f, kBf16Tol, true);
    }
    {
      INFO("oneDNN against the tiles");
      // not bit-equal throughout: oneDNN's kernel ran, not the tiles
      CHECK(check_close(d, t, 2 * kBf16Tol, false) > 0);
    }
  }
}

// Sets oneDNN's attention blocks for a scope.
struct Blocks {
  kernel::OnednnAttentionBlocks saved = kernel::onednn_attention_blocks();
  explicit Blocks(kernel::OnednnAttentionBlocks b) { kernel::onednn_attention_blocks() = b; }
  ~Blocks() { kernel::onednn_attention_blocks() = saved; }
};

}  // namespace

TEST_CASE("oneDNN attention matches fp32 and the tiles across its blocks under each mask") {
  SKIP_WITHOUT_BF16();
  // 2 query blocks and 2 rows; 2 key blocks forward, 3 backward; odd d_k
  check_backends(inputs(2, 2, 130, 530, 33, 20, 5));
}

TEST_CASE("oneDNN attention matches fp32 and the tiles with small blocks under each mask") {
  SKIP_WITHOUT_BF16();
  const Blocks small({16, 64, 16, 32});
  check_backends(inputs(2, 1, 70, 150, 16, 24, 7));
}

TEST_CASE("oneDNN attention gives a fully masked row 0 out and 0 gradients") {
  SKIP_WITHOUT_BF16();
  const int64_t n = 67, m = 140;
  const Inputs x = inputs(1, 2, n, m, 16, 16, 9);
  const Tensor mask =
      mask_of({n, m}, [&](const Shape& i) { return i[0] != 5 && i[0] != 66 && i[1] <= i[0] + 73; });
  const Run d = run(x, mask, Precision::bf16, AttentionBackend::onednn);
  check_dead_rows(d, {5, 66});
  check_close(d, fp32(x, mask), kBf16Tol, true);
}

TEST_CASE("oneDNN attention gives the same bits twice and at 1 and 2 threads") {
  SKIP_WITHOUT_BF16();
  const Inputs x = inputs(2, 3, 300, 600, 32, 32, 13);
  const Tensor causal = mask_of({300, 600}, [](const Shape& i) { return i[1] <= i[0] + 300; });
  check_same_bits_across_threads(x, causal, AttentionBackend::onednn);
}

// The kernel called directly, as a bf16 scope would call it, whether or not qkv allows bf16
// here: under ONEDNN_MAX_CPU_ISA=AVX512_CORE qkv refuses bf16 (its own kernels need
// AVX512_BF16) but oneDNN still has a bf16 matmul (its AVX-512 kernels convert), and this runs
// it; on an AMX CPU oneDNN's AMX kernels. Below AVX512_CORE oneDNN has none: the kernel says so.
TEST_CASE("oneDNN attention kernel under this oneDNN ISA matches fp32 or says it cannot run") {
  const int64_t B = 2, n = 130, m = 530;
  const Inputs x = inputs(B, 2, n, m, 33, 20, 11);
  const double scale = 1.0 / std::sqrt(33.0);
  const std::string impl = kernel::matmul_bf16_kernel_name(64, 256, 64);
  INFO("oneDNN ISA " << onednn_isa() << ", kernel " << impl);
  for (const auto& [name, mask] : masks(B, n, m)) {
    INFO("mask " << name);
    kernel::AttentionProblem p;
    static_cast<kernel::QKVDims&>(p) = kernel::check_qkv(x.q, x.k, x.v, "attention");
    static_cast<kernel::ScoreMask&>(p) = kernel::expand_mask(mask, p, "attention");
    Run d;
    d.r = kernel::attention_result_for(p, DType::f32);
    d.g = kernel::attention_grads_like(x.q, x.k, x.v, false);
    if (impl.find("no kernel here") != std::string::npos) {
      CHECK_THROWS_WITH(
          kernel::attention_forward_onednn(p, x.q, x.k, x.v, float(scale), d.r.out, d.r.lse),
          Catch::Contains("oneDNN bf16 matmul") && Catch::Contains("no kernel here"));
      QKV_SKIP("oneDNN has no bf16 matmul under " + onednn_isa());
    }
    kernel::attention_forward_onednn(p, x.q, x.k, x.v, float(scale), d.r.out, d.r.lse);
    kernel::attention_backward_onednn(p, x.q, x.k, x.v, d.r.out, d.r.lse, x.dout, float(scale),
                                      d.g);
    check_close(d, fp32(x, mask), kBf16Tol, true);
  }
}

TEST_CASE("attention backend: names, the scope, auto's choice and QKV_ATTENTION_BACKEND's errors") {
  CHECK(name_of(AttentionBackend::onednn) == "onednn");
  CHECK(parse_name<AttentionBackend>("tiles", "k") == AttentionBackend::tiles);
  const AttentionBackend outside = attention_backend();
  {
    const AttentionBackendScope s(AttentionBackend::onednn);
    CHECK(attention_backend() == AttentionBackend::onednn);
    CHECK(attention_backend_for(1, 10) == AttentionBackend::onednn);
    {
      const AttentionBackendScope a(AttentionBackend::tiles);
      CHECK(attention_backend_for(4096, 4096) == AttentionBackend::tiles);
    }
    CHECK(attention_backend() == AttentionBackend::onednn);
  }
  CHECK(attention_backend() == outside);
  CHECK(attention_backend_description(AttentionBackend::onednn).rfind("onednn (", 0) == 0);
  CHECK(attention_backend_description(AttentionBackend::tiles).rfind("tiles (", 0) == 0);
  // auto: oneDNN where its kernels use AMX, else from kOnednnMinTokens queries and keys
  const AttentionBackendScope a(AttentionBackend::auto_);
  const bool amx = onednn_isa().find("amx") != std::string::npos;
  const int64_t t = kOnednnMinTokens;
  CHECK(attention_backend_for(t, t) == AttentionBackend::onednn);
  CHECK(attention_backend_for(t, 4096) == AttentionBackend::onednn);
  for (const auto& [n, m] : {std::pair<int64_t, int64_t>{t - 1, t}, {1, 4096}, {4096, 17}}) {
    INFO(n << " queries, " << m << " keys");
    CHECK((attention_backend_for(n, m) == AttentionBackend::onednn) == amx);
  }
  ::setenv("QKV_ATTENTION_BACKEND", "onedn", 1);
  CHECK_THROWS_WITH(attention_backend_from_env(),
                    "QKV_ATTENTION_BACKEND: must be auto, tiles or onednn, got 'onedn'; did you "
                    "mean 'onednn'?");
  ::setenv("QKV_ATTENTION_BACKEND", "onednn", 1);
  CHECK(attention_backend_from_env() == AttentionBackend::onednn);
  ::unsetenv("QKV_ATTENTION_BACKEND");
  CHECK(attention_backend_from_env() == AttentionBackend::auto_);
}

TEST_CASE(
    "oneDNN bf16 matmul keeps a bounded number of plans and the same bits after dropping one") {
  if (kernel::matmul_bf16_kernel_name(16, 16, 16).find("no kernel here") != std::string::npos)
    QKV_SKIP("oneDNN has no bf16 matmul under " + onednn_isa());
  const int64_t k = 16, m = 16, most = 300;
  Generator g(23);
  const Tensor fa = randn({most, k}, g), fb = randn({k, m}, g);
  std::vector<bf16_t> a(most * k), b(k * m);
  to_bf16(fa.data<float>(), a.data(), most * k);
  to_bf16(fb.data<float>(), b.data(), k * m);
  const auto product = [&](int64_t n) {  // (n, m) = a[:n] b
    std::vector<float> c(n * m);
    kernel::matmul_bf16_one_thread(n, m, k, {a.data(), k}, {b.data(), m}, c.data(), m, false);
    return c;
  };
  const std::vector<float> first = product(7);
  for (int64_t n = 1; n <= most; ++n) (void)product(n);  // more shapes than plans are kept
  CHECK(kernel::matmul_bf16_plans_on_this_thread() <= kernel::kMaxBf16Plans);
  CHECK(product(7) == first);  // planned again after its plan was dropped
  // a steady call plans nothing new
  const size_t before = kernel::matmul_bf16_plans_on_this_thread();
  (void)product(7);
  CHECK(kernel::matmul_bf16_plans_on_this_thread() == before);
}
