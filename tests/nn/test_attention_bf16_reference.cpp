// bf16 attention (core/attention_bf16.hpp) against PyTorch's attention under
// torch.autocast("cpu", bfloat16) on the same inputs (tests/nn/reference_attention_bf16.py, run
// with /usr/bin/python3): output and the gradients of q, k, v, at sizes crossing the tiles, under
// no mask, a causal, a padding and a window mask, and with fully masked rows. Both sides round
// differently (autocast also rounds the scores and the weights' softmax input to bf16), so each
// is held to bfloat16's tolerance of the other and of PyTorch's float32 result.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "core/fused.hpp"
#include "core/precision.hpp"
#include "nn/safetensors.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;

namespace {

template <class F>
Tensor mask_of(const Shape& s, F f) {
  return build(s, [&](const Shape& i) { return f(i) ? 1.0 : 0.0; }).to(DType::b8);
}

}  // namespace

TEST_CASE("reference: bf16 attention matches PyTorch autocast attention", "[reference]") {
  SKIP_WITHOUT_BF16();
  TempDir dir("attention_bf16_ref");
  const int64_t B = 2, H = 2, n = 70, m = 300, d = 32, shift = m - n;
  const double scale = 1.0 / std::sqrt(double(d));
  const std::map<std::string, Tensor> masks = {
      {"none", ones({n, m}, DType::b8)},
      {"causal", mask_of({n, m}, [&](const Shape& i) { return i[1] <= i[0] + shift; })},
      {"padding", mask_of({B, 1, 1, m}, [&](const Shape& i) { return i[3] < (i[0] ? 131 : 300); })},
      {"window",
       mask_of({n, m}, [&](const Shape& i) { return std::abs(i[1] - (i[0] + shift)) <= 40; })},
      {"dead_rows",
       mask_of({n, m},
               [&](const Shape& i) { return i[0] != 5 && i[0] != 69 && i[1] <= i[0] + shift; })},
  };
  std::map<std::string, std::map<std::string, Tensor>> ours;
  Generator g(21);
  for (const auto& [name, mask] : masks) {
    const Tensor q = randn({B, H, n, d}, g), k = randn({B, H, m, d}, g),
                 v = randn({B, H, m, 24}, g);
    const Tensor R = randn({B, H, n, 24}, g);
    PrecisionScope bf16(Precision::bf16);
    const AttentionResult r = attention_forward(q, k, v, mask, scale);
    REQUIRE(r.precision == Precision::bf16);
    const AttentionGrads gr =
        attention_backward(q, k, v, mask, scale, r.out, r.lse, R, r.precision);
    const nlohmann::json config = {{"scale", scale}};
    save_safetensors(dir.file(name + ".in.safetensors"),
                     {{"q", q}, {"k", k}, {"v", v}, {"mask", mask.contiguous()}, {"R", R}},
                     {{"config", config.dump()}});
    ours[name] = {{"out", r.out}, {"grad.q", gr.dq}, {"grad.k", gr.dk}, {"grad.v", gr.dv}};
  }
  const ReferenceRun ref = run_reference(source_path("tests/nn/reference_attention_bf16.py"), dir);
  INFO(ref.report());
  REQUIRE(ref.status == 0);
  for (const auto& [name, tensors] : ours) {
    const SafetensorsFile theirs = load_safetensors(dir.file(name + ".out.safetensors"));
    for (const auto& [part, t] : tensors) {
      const double vs_autocast = rel_err(t, theirs.get(part));
      const double vs_fp32 = rel_err(t, theirs.get("fp32." + part));
      const double autocast_vs_fp32 = rel_err(theirs.get(part), theirs.get("fp32." + part));
      std::printf(
          "bf16 attention %-9s %-6s rel err vs autocast %.3g, vs fp32 %.3g (autocast vs "
          "fp32 %.3g)\n",
          name.c_str(), part.c_str(), vs_autocast, vs_fp32, autocast_vs_fp32);
      INFO(name << " " << part);
      CHECK(vs_autocast < 3e-2);
      CHECK(vs_fp32 < 2e-2);
    }
  }
}
