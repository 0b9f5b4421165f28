// qkv gradcheck: the layer registry (every layer passes under every mask, an injected wrong
// backward fails) and the command line (exit status, table, JSON, list, errors).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <set>

#include "config/config.hpp"
#include "apps/gradcheck_layers.hpp"
#include "lesson_test_util.hpp"

using namespace qkv;
using namespace qkv::app;
using namespace qkv::lesson_test;

namespace {
bool all_passed(const std::vector<GradcheckRow>& rows) {
  for (const auto& r : rows)
    if (!r.passed) return false;
  return !rows.empty();
}
}  // namespace

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
  for (const char* n :
       {"linear", "embedding", "layernorm", "ffn_relu", "ffn_gelu", "sdpa", "mha_self", "mha_cross",
        "pos_sinusoidal", "pos_learned", "encoder_block_post_ln", "encoder_block_pre_ln",
        "decoder_block_post_ln", "decoder_block_pre_ln", "seq2seq_post_ln", "seq2seq_pre_ln",
        "cross_entropy"})
    CHECK(names.count(n) == 1);
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
  const GradcheckLayer& l = find_gradcheck_layer("wrong_square");
  CHECK(l.test_only);
  const std::vector<GradcheckRow> rows = run_gradcheck(l.name, l.build({}));
  REQUIRE(rows.size() == 1);
  CHECK_FALSE(rows[0].passed);
  CHECK(rows[0].max_rel_err > 0.3);  // 3x instead of 2x: off by half the true value
}

TEST_CASE("registry: the model of a config file") {
  RunConfig cfg = load_config(source_dir() + "/configs/copy.toml");
  cfg.model.d_model = 16;  // the structure of copy.toml at a width that checks in a second
  cfg.model.d_ff = 32;
  const std::vector<GradcheckRow> rows =
      run_gradcheck("config", model_gradcheck_problem(cfg.model, {}));
  CHECK(all_passed(rows));
  CHECK(rows.size() > 40);  // 2 + 2 layers: every parameter
}

TEST_CASE("options: masks and scales parse, bad values are errors") {
  CHECK(parse_mask_kind("causal") == MaskKind::causal);
  CHECK_THROWS_WITH(parse_mask_kind("diagonal"), Catch::Contains("none, causal, padding or both"));
  CHECK_FALSE(parse_scale("default").has_value());
  CHECK(*parse_scale("none") == 1.0);
  CHECK(*parse_scale("0.25") == 0.25);
  CHECK_THROWS_AS(parse_scale("-1"), Error);
  CHECK_THROWS_AS(parse_scale("abc"), Error);
  CHECK_THROWS_WITH(find_gradcheck_layer("nope"), Catch::Contains("linear"));
}

TEST_CASE("CLI: passing layers exit 0 and print the table") {
  const RunResult r = run_qkv("gradcheck --layer linear --layer sdpa --mask causal --scale none");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("max abs err") != std::string::npos);
  CHECK(r.output.find("sdpa") != std::string::npos);
  CHECK(r.output.find("weight") != std::string::npos);  // linear's parameter rows
  CHECK(r.output.find("all passed") != std::string::npos);
  CHECK(r.output.find("FAIL") == std::string::npos);
}

TEST_CASE("CLI: an injected wrong backward exits non-zero") {
  const RunResult r = run_qkv("gradcheck --layer linear --layer wrong_square");
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK(r.output.find("FAIL") != std::string::npos);
  CHECK(r.output.find("1 FAILED") != std::string::npos);
}

TEST_CASE("CLI: --json, --list, --config and errors") {
  RunResult r = run_qkv("gradcheck --layer wrong_square --layer layernorm --json");
  CHECK(r.status != 0);
  const nlohmann::json j = nlohmann::json::parse(r.output);
  CHECK(j.at("passed") == false);
  REQUIRE(j.at("results").size() == 4);  // x; x, weight, bias
  CHECK(j["results"][0]["layer"] == "wrong_square");
  CHECK(j["results"][0]["passed"] == false);
  CHECK(j["results"][1]["passed"] == true);
  for (const auto& row : j["results"])
    for (const char* k :
         {"layer", "tensor", "checked", "directional", "max_abs_err", "max_rel_err", "passed"})
      CHECK(row.contains(k));

  r = run_qkv("gradcheck --list");
  CHECK(r.status == 0);
  for (const GradcheckLayer& l : gradcheck_layers())
    CHECK(r.output.find(l.name) != std::string::npos);

  TempDir dir("gc");
  {
    std::ofstream(dir.file("m.toml"))
        << "[model]\nd_model = 8\nheads = 2\nd_ff = 16\nencoder_layers = 1\n"
           "decoder_layers = 1\nnorm_first = true\nposition = \"learned\"\n";
  }
  r = run_qkv("gradcheck --config '" + dir.file("m.toml") + "' --mask padding");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("config:m") != std::string::npos);
  CHECK(r.output.find("src_pos.weight") != std::string::npos);  // the learned positions

  r = run_qkv("gradcheck --layer nope");
  CHECK(r.status == 1);
  CHECK(r.output.find("no layer 'nope'") != std::string::npos);
  r = run_qkv("gradcheck --mask sideways --layer linear");
  CHECK(r.status == 1);
}
