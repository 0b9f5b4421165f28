// bf16 attention (core/attention_bf16.hpp) against PyTorch's attention under
// torch.autocast("cpu", bfloat16) on the same inputs (tests/nn/reference_attention_bf16.py, run
// with /usr/bin/python3): output and the gradients of q, k, v, at sizes crossing the tiles, under
// no mask, a causal, a padding and a window mask, and with fully masked rows. Both sides round
// differently (autocast also rounds the scores and the weights' softmax input to bf16), so each
// is held to bfloat16's tolerance of the other and of PyTorch's float32 result. Both attention
// backends (core/attention_backend.hpp: qkv's tiles and oneDNN's matmuls) on the same inputs.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "core/attention_backend.hpp"
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
  // crossing the tiles' 64 queries and 256 (forward) and 128 keys, and oneDNN's 128 queries and
  // 512 and 256 keys
  const int64_t B = 2, H = 2, n = 130, m = 530, d = 32, shift = m - n;
  const double scale = 1.0 / std::sqrt(double(d));
  const std::map<std::string, Tensor> masks = {
      {"none", ones({n, m}, DType::b8)},
      {"causal", mask_of({n, m}, [&](const Shape& i) { return i[1] <= i[0] + shift; })},
      {"padding", mask_of({B, 1, 1, m}, [&](const Shape& i) { return i[3] < (i[0] ? 131 : m); })},
      {"window",
       mask_of({n, m}, [&](const Shape& i) { return std::abs(i[1] - (i[0] + shift)) <= 40; })},
      {"dead_rows",
       mask_of({n, m},
               [&](const Shape& i) { return i[0] != 5 && i[0] != n - 1 && i[1] <= i[0] + shift; })},
  };
  const AttentionBackend backends[] = {AttentionBackend::tiles, AttentionBackend::onednn};
  // ours[backend][mask][part]
  std::map<AttentionBackend, std::map<std::string, std::map<std::string, Tensor>>> ours;
  Generator g(21);
  for (const auto& [name, mask] : masks) {
    const Tensor q = randn({B, H, n, d}, g), k = randn({B, H, m, d}, g),
                 v = randn({B, H, m, 24}, g);
    const Tensor R = randn({B, H, n, 24}, g);
    for (AttentionBackend b : backends) {
      AttentionBackendScope backend(b);
      PrecisionScope bf16(Precision::bf16);
      const AttentionResult r = attention_forward(q, k, v, mask, scale);
      REQUIRE(r.precision == Precision::bf16);
      const AttentionGrads gr =
          attention_backward(q, k, v, mask, scale, r.out, r.lse, R, r.precision);
      ours[b][name] = {{"out", r.out}, {"grad.q", gr.dq}, {"grad.k", gr.dk}, {"grad.v", gr.dv}};
    }
    const nlohmann::json config = {{"scale", scale}};
    save_safetensors(dir.file(name + ".in.safetensors"),
                     {{"q", q}, {"k", k}, {"v", v}, {"mask", mask.contiguous()}, {"R", R}},
                     {{"config", config.dump()}});
  }
  const ReferenceRun ref = run_reference(source_path("tests/nn/reference_attention_bf16.py"), dir);
  INFO(ref.report());
  REQUIRE(ref.status == 0);
  for (const auto& [backend, by_mask] : ours)
    for (const auto& [name, tensors] : by_mask) {
      const SafetensorsFile theirs = load_safetensors(dir.file(name + ".out.safetensors"));
      for (const auto& [part, t] : tensors) {
        const double vs_autocast = rel_err(t, theirs.get(part));
        const double vs_fp32 = rel_err(t, theirs.get("fp32." + part));
        const double autocast_vs_fp32 = rel_err(theirs.get(part), theirs.get("fp32." + part));
        std::printf(
            "bf16 attention %-6s %-9s %-6s rel err vs autocast %.3g, vs fp32 %.3g (autocast vs "
            "fp32 %.3g)\n",
            name_of(backend).data(), name.c_str(), part.c_str(), vs_autocast, vs_fp32,
            autocast_vs_fp32);
        INFO(name_of(backend) << " " << name << " " << part);
        CHECK(vs_autocast < 3e-2);
        CHECK(vs_fp32 < 2e-2);
      }
    }
}
