// The head scores of one small model's attention, as `qkv heads` computes them (patterns
// captured at the hook points over repeated random tokens), against TransformerLens's
// definitions in torch (tests/interp/reference_head_scores.py) on the same attention weights.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>

#include "interp/head_scores.hpp"
#include "interp/repeated_tokens.hpp"
#include "nn/decoder_lm.hpp"
#include "nn/hooks.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::interp;
using namespace qkv::testing;
using nlohmann::json;

namespace {

json flat(const Tensor& t) {
  return {{"shape", t.shape()}, {"data", to_vector<double>(t.to(DType::f64).contiguous())}};
}

}  // namespace

TEST_CASE("reference: a small model's head scores match TransformerLens's in torch",
          "[reference]") {
  SKIP_WITHOUT_TORCH();
  nn::ModelConfig c = tiny_lm();
  c.decoder_layers = 2, c.heads = 2, c.src_vocab = c.tgt_vocab = 12;
  Generator g(45);
  nn::DecoderLM lm(c, g);
  lm.eval();
  Generator draw(3);
  const Tensor ids = repeated_tokens({.batch = 3, .length = 6, .vocab = 12, .bos = 0}, draw);
  nn::Hooks h;
  h.capture = nn::names_matching({"*.attn.pattern"});
  {
    nn::HookScope scope(h);
    lm.forward(ids);
  }
  json in = json::array();
  const std::vector<HeadScore> scores{HeadScore::previous_token, HeadScore::duplicate_token,
                                      HeadScore::induction, HeadScore::entropy};
  for (int64_t l = 0; l < 2; ++l) {
    json runs = json::array();
    for (HeadScore s : scores)
      runs.push_back({{"key", name_of(s)},
                      {"score", name_of(s)},
                      {"exclude_bos", false},
                      {"exclude_current_token", false},
                      {"window", 0}});
    in.push_back(
        {{"name", "layer" + std::to_string(l)},
         {"pattern", flat(h.cache.at("blocks." + std::to_string(l) + ".attn.pattern").data())},
         {"ids", flat(ids)},
         {"pad_id", -1},
         {"runs", runs}});
  }
  TempDir dir("model_scores_ref");
  const std::string in_path = dir.file("in.json"), out_path = dir.file("out.json");
  std::ofstream(in_path) << in.dump();
  const std::string cmd = "/usr/bin/python3 '" + source_dir() +
                          "/tests/interp/reference_head_scores.py' '" + in_path + "' '" + out_path +
                          "' > '" + dir.file("log") + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  INFO(cmd << "\n" << read_file(dir.file("log")));
  REQUIRE(rc == 0);
  const json out = json::parse(std::ifstream(out_path));
  for (int64_t l = 0; l < 2; ++l) {
    const AttentionProbe probe{
        .pattern = h.cache.at("blocks." + std::to_string(l) + ".attn.pattern").data(), .ids = ids};
    for (HeadScore s : scores) {
      const std::vector<double> ours = head_score(s, probe);
      const auto theirs =
          out["layer" + std::to_string(l)][std::string(name_of(s))].get<std::vector<double>>();
      REQUIRE(ours.size() == theirs.size());
      for (size_t k = 0; k < ours.size(); ++k) {
        INFO("layer " << l << " " << name_of(s) << " head " << k);
        CHECK(std::abs(ours[k] - theirs[k]) < 1e-6);
      }
    }
  }
}
