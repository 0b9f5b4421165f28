// What the tests of qkv's inspection commands on tiny trained runs share
// (tests/apps/test_attribution_patching.cpp, test_path_patching.cpp, test_attribute.cpp): the
// runs of each family, trained once per test process, opened in fp32 on one thread; the hook
// point the output layer reads; the first pair of inputs whose answers differ; and a torch
// reference script's case written from a run's weights.
#pragma once
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "inspect/patch.hpp"
#include "nn/model.hpp"
#include "nn/safetensors.hpp"
#include "run/inference.hpp"
#include "support/process.hpp"
#include "support/tiny_runs.hpp"

namespace qkv::testing {

// The tiny GPT ("lm") and copy translator ("copy") of tiny_runs.hpp and a tiny majority
// classifier ("majority", train_tiny_classifier) in qkv_<tag>_<pid>, trained once per test
// process; then more(dir), when given: the test's own further runs, once.
inline const TempDir& inspect_runs(const char* tag, void (*more)(const TempDir&) = nullptr) {
  const TempDir& dir = tiny_runs(tag, 60);
  static const bool trained = [&] {
    train_tiny_classifier(dir, "majority");
    if (more) more(dir);
    return true;
  }();
  (void)trained;
  return dir;
}

// Run `name` of dir, opened as the tests open it: fp32, one thread.
inline std::unique_ptr<run::Inference> open_tiny(const TempDir& dir, const std::string& name) {
  return run::open_inference(dir.file(name),
                             {.precision = Precision::fp32, .threads = 1, .op = "test"});
}

// s in single quotes, for the shell.
inline std::string quoted(const std::string& s) { return "'" + s + "'"; }

// The hook point the output layer reads: the final norm, or the last block's output.
inline std::string read_point(const nn::Model& m) {
  const nn::Model::Stream s = m.output_stream();
  if (s.final_norm)
    return s.blocks.substr(0, s.blocks.size() - std::string("blocks.").size()) + "final_norm";
  return s.blocks + std::to_string(s.layers - 1) + ".resid_post";
}

// The first of the pairs of texts (clean, corrupt) whose answers differ under the calling
// thread's hooks, as ids; empty ids when none does.
inline std::pair<data::Ids, data::Ids> first_differing(
    const run::Inference& inf, const std::vector<std::pair<std::string, std::string>>& pairs) {
  for (const auto& [c, x] : pairs) {
    const data::Ids clean = inf.encode(c, "test"), corrupt = inf.encode(x, "test");
    try {
      inspect::PatchRuns probe(inf, clean, corrupt);
      return {clean, corrupt};
    } catch (const Error&) {  // the same answer: the next pair
    }
  }
  return {};
}

// A GPT's config as tests/nn/reference_nn.py's GPT reads it.
inline nlohmann::json gpt_reference_config(const run::Inference& inf) {
  const auto& mc = inf.run().config.model;
  return {{"d_model", mc.d_model},
          {"heads", mc.heads},
          {"d_ff", mc.d_ff},
          {"bias", mc.bias},
          {"vocab", inf.run().data.tgt_vocab.size()},
          {"layers", mc.decoder_layers},
          {"max_len", mc.max_len},
          {"attn_only", mc.attn_only}};
}

// A torch reference script's case at path: the tensors t, then every parameter of inf's model
// as "param.<qkv name>", with cfg as the "config" metadata.
inline void save_reference_case(const std::string& path, const run::Inference& inf,
                                nn::NamedTensors t, const nlohmann::json& cfg) {
  for (const auto& [name, v] : inf.model().named_parameters())
    t.push_back({"param." + name, v.data()});
  nn::save_safetensors(path, t, {{"config", cfg.dump()}});
}

}  // namespace qkv::testing
