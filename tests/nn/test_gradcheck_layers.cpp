// The gradcheck registry (nn/gradcheck_layers.hpp): every layer passes under every mask, its
// parameters are checked under their names, an injected wrong backward (tests/support) fails.
#include <catch2/catch.hpp>

#include <set>

#include "nn/gradcheck_layers.hpp"
#include "support/gradcheck_faults.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;

TEST_CASE("registry: every layer passes, with every mask and with scale 1") {
  std::set<std::string> names;
  for (const GradcheckLayer& l : gradcheck_layers()) {
    CHECK(names.insert(l.name).second);  // unique names
    if (l.test_only) continue;
    for (const char* mask : {"none", "causal", "padding", "both"}) {
      LayerCheckOptions o;
      o.mask = parse_mask_kind(mask);
      o.scale = parse_scale(std::string(mask) == "both" ? "none" : "default");
      const GradcheckProblem p = l.build(o);
      const std::vector<GradcheckRow> rows = run_gradcheck(l.name, p);
      INFO(l.name << " mask " << mask);
      CHECK(rows.size() == p.inputs.size());  // one row per input and parameter
      CHECK(all_passed(rows));
      for (const auto& r : rows) {
        CHECK(r.checked > 0);
        CHECK(r.max_abs_err < 1e-5);
      }
    }
  }
  for (const char* n : {"linear",
                        "embedding",
                        "layernorm",
                        "ffn_relu",
                        "ffn_gelu",
                        "sdpa",
                        "mha_self",
                        "mha_cross",
                        "pos_sinusoidal",
                        "pos_learned",
                        "encoder_block_post_ln",
                        "encoder_block_pre_ln",
                        "decoder_block_post_ln",
                        "decoder_block_pre_ln",
                        "seq2seq_post_ln",
                        "seq2seq_pre_ln",
                        "cross_entropy",
                        "gru",
                        "lstm",
                        "conv_stack",
                        "conv_stack_causal"})
    CHECK(names.count(n) == 1);
  // every attention variant and every position kind, as a function and inside attention
  for (const char* n :
       {"additive_attention", "linear_attention", "window_attention", "rope", "relative_bias",
        "mha_additive", "mha_linear", "mha_window", "mha_relative", "mha_rope"})
    CHECK(names.count(n) == 1);
  for (const char* kind : {"sinusoidal", "learned", "relative", "rope"}) {
    const std::string k = kind;
    INFO("position kind " << k);
    CHECK(names.count("pos_" + k) + names.count("mha_" + k) == 1);
    CHECK(parse_position(k) != PositionKind::none);
  }
}

TEST_CASE("registry: parameters are checked under their names") {
  const GradcheckProblem p = find_gradcheck_layer("mha_self").build({});
  std::set<std::string> tensors;
  for (const GradcheckRow& r : run_gradcheck("mha_self", p)) tensors.insert(r.tensor);
  for (const char* n :
       {"x", "w_q.weight", "w_q.bias", "w_k.weight", "w_v.weight", "w_o.weight", "w_o.bias"})
    CHECK(tensors.count(n) == 1);
}

TEST_CASE("registry: a wrong backward fails") {
  qkv::testing::register_gradcheck_faults();
  const GradcheckLayer& l = find_gradcheck_layer("wrong_square");
  CHECK(l.test_only);
  const std::vector<GradcheckRow> rows = run_gradcheck(l.name, l.build({}));
  REQUIRE(rows.size() == 1);
  CHECK_FALSE(rows[0].passed);
  CHECK(rows[0].max_rel_err > 0.3);  // 3x instead of 2x: off by half the true value
}

TEST_CASE("options: masks and scales parse, bad values are errors") {
  CHECK(parse_mask_kind("causal") == MaskKind::causal);
  CHECK_THROWS_WITH(parse_mask_kind("diagonal"), Catch::Contains("none, causal, padding or both"));
  CHECK(parse_scale("default").is_default());
  CHECK(parse_scale("none") == AttentionScale(1.0));
  CHECK(parse_scale("0.25") == AttentionScale(0.25));
  CHECK_THROWS_AS(parse_scale("-1"), Error);
  CHECK_THROWS_AS(parse_scale("abc"), Error);
  CHECK_THROWS_WITH(find_gradcheck_layer("nope"), Catch::Contains("linear"));
}
