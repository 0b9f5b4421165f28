// Relative position bias and RoPE against a direct PyTorch computation of their definitions
// (tests/nn/reference_positions.py, run with /usr/bin/python3): outputs and gradients of
// q, k, v and the bias table, float64, with a causal mask and queries at an offset (a decoding
// step's situation). Error per tensor: max|ours - torch| / max|torch|.
#include <catch2/catch.hpp>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "nn/relative_bias.hpp"
#include "nn/rotary.hpp"
#include "nn/safetensors.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;

TEST_CASE("reference: relative bias and rope attention match PyTorch (float64)", "[reference]") {
  TempDir dir("positions_ref");
  const int64_t q_offset = 2, clip = 2;
  std::map<std::string, std::map<std::string, Tensor>> ours;
  for (const std::string kind : {"relative", "rope"}) {
    Generator g(kind == "rope" ? 11 : 12);
    const DType f = DType::f64;
    const Var q(randn({2, 2, 3, 6}, g, f), true), k(randn({2, 2, 5, 6}, g, f), true),
        v(randn({2, 2, 5, 4}, g, f), true), table(randn({2, 2 * clip + 1}, g, f), true);
    // queries at positions 2..4 over keys 0..4, causal, plus padding of the second sequence
    const Tensor mask = combine_masks(causal_mask(3, 5), key_padding_mask(valid_mask({5, 4}, 5)))
                            .expand({2, 2, 3, 5})
                            .contiguous();
    Var out;
    std::vector<Var> wrt = {q, k, v};
    if (kind == "rope") {
      out = scaled_dot_product_attention(rotary(q, q_offset), rotary(k, 0), v, mask);
    } else {
      out = scaled_dot_product_attention(q, k, v, mask, std::nullopt, nullptr, 0.0, nullptr,
                                         relative_position_bias(table, 3, 5, q_offset));
      wrt.push_back(table);
    }
    const Tensor R = randn(out.shape(), g, f);
    const std::vector<Tensor> grads = ag::grad({out}, {R}, wrt);
    NamedTensors files = {
        {"q", q.data()}, {"k", k.data()}, {"v", v.data()}, {"mask", mask}, {"R", R}};
    if (kind == "relative") files.push_back({"table", table.data()});
    const nlohmann::json config = {{"kind", kind}, {"q_offset", q_offset}, {"clip", clip}};
    save_safetensors(dir.file(kind + ".in.safetensors"), files, {{"config", config.dump()}});
    ours[kind] = {
        {"out", out.data()}, {"grad.q", grads[0]}, {"grad.k", grads[1]}, {"grad.v", grads[2]}};
    if (kind == "relative") ours[kind]["grad.table"] = grads[3];
  }
  const ReferenceRun ref = run_reference(source_path("tests/nn/reference_positions.py"), dir);
  INFO(ref.report());
  REQUIRE(ref.status == 0);
  for (const auto& [kind, tensors] : ours) {
    const SafetensorsFile theirs = load_safetensors(dir.file(kind + ".out.safetensors"));
    for (const auto& [name, t] : tensors) {
      const double err = rel_err(t, theirs.get(name));
      std::printf("positions reference %-8s %-10s rel err %.3g\n", kind.c_str(), name.c_str(), err);
      INFO(kind << " " << name);
      CHECK(err < 1e-12);
    }
  }
}
