// qkv gradcheck: a config's model, and the command line (exit status, table, JSON, list,
// errors; an injected wrong backward through the tests' build qkv_with_faults). The registry
// itself: tests/nn/test_gradcheck_layers.cpp.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <set>

#include "config/config.hpp"
#include "nn/gradcheck_layers.hpp"
#include "support/nn.hpp"
#include "support/process.hpp"

using namespace qkv;
using namespace qkv::config;
using namespace qkv::nn;
using namespace qkv::testing;

TEST_CASE("registry: the model of a config file") {
  RunConfig cfg = load_config(source_dir() + "/configs/copy.toml");
  cfg.model.d_model = 16;  // the structure of copy.toml at a width that checks in a second
  cfg.model.d_ff = 32;
  const std::vector<GradcheckRow> rows =
      run_gradcheck("config", model_gradcheck_problem(cfg.model, {}));
  CHECK(all_passed(rows));
  CHECK(rows.size() > 40);  // 2 + 2 layers: every parameter
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
  const RunResult r =
      run_qkv("gradcheck --layer linear --layer wrong_square", qkv_with_faults_binary());
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK(r.output.find("FAIL") != std::string::npos);
  CHECK(r.output.find("1 FAILED") != std::string::npos);
}

TEST_CASE("CLI: --json, --list, --config and errors") {
  RunResult r =
      run_qkv("gradcheck --layer wrong_square --layer layernorm --json", qkv_with_faults_binary());
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
  CHECK(r.output.find("wrong_square") == std::string::npos);  // the tests' fault, not qkv's
  r = run_qkv("gradcheck --list", qkv_with_faults_binary());
  CHECK(r.output.find("wrong_square") != std::string::npos);

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
