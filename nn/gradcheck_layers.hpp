// The layers `qkv gradcheck` checks: each builds a module at small sizes in float64 with random
// inputs and parameters and gives the function and inputs for autograd's gradcheck (inputs
// first, then every parameter under its dotted name). Every layer, attention variant (dot,
// additive, linear, sliding window) and position kind (sinusoidal, learned, relative, rope) has
// an entry; tests/nn/test_gradcheck_layers.cpp runs them all under every mask, and the tests
// add their injected faults (a wrong backward that must fail) with register_gradcheck_layer.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/gradcheck.hpp"
#include "nn/seq2seq.hpp"

namespace qkv::nn {

// Which attention mask the attention layers get: none, causal, key padding, or both (AND).
enum class MaskKind { none, causal, padding, both };
MaskKind parse_mask_kind(const std::string& s);  // "none" | "causal" | "padding" | "both"
// "default" -> 1/sqrt(d_k), "none" -> 1, else a positive number.
AttentionScale parse_scale(const std::string& s);

struct LayerCheckOptions {
  MaskKind mask = MaskKind::both;
  AttentionScale scale;
  uint64_t seed = 1;
};

// One gradcheck problem: f over inputs. keep holds the modules f uses.
struct GradcheckProblem {
  ag::GradcheckFn f;
  std::vector<ag::Var> inputs;
  std::vector<std::shared_ptr<Module>> keep;
};

struct GradcheckLayer {
  std::string name, description;
  bool test_only = false;  // an injected fault (tests only): listed, never part of --all
  std::function<GradcheckProblem(const LayerCheckOptions&)> build;
};

// Every layer, in the order --list and --all use: the library's, then any registered.
const std::vector<GradcheckLayer>& gradcheck_layers();
// Adds a layer at the end (a test's injected fault, a user's own module). Not thread-safe:
// register before checking. Throws qkv::Error when the name is taken.
void register_gradcheck_layer(GradcheckLayer layer);
// The layer called name; throws qkv::Error listing the names when there is none.
const GradcheckLayer& find_gradcheck_layer(const std::string& name);
// An encoder-decoder (nn::make_encoder_decoder) described by a config's [model] section
// (vocabularies of 11 tokens, batch 2, dropout off), through cross-entropy. The options' mask adds
// source/target padding when it includes padding; the scale, when given, overrides the config's.
GradcheckProblem model_gradcheck_problem(ModelConfig m, const LayerCheckOptions& o);

// What the layers (and the tests' own gradchecks) are built from:
// (B, n) bool, true on the first lens[b] positions of row b (real tokens), false after.
Tensor valid_mask(const std::vector<int64_t>& lens, int64_t n);
// inputs (unnamed ones named "input <i>"), then every parameter of m (null: none) under
// prefix + its dotted name, so a failure names the parameter.
std::vector<ag::Var> with_parameters(std::vector<ag::Var> inputs, const Module* m,
                                     const std::string& prefix = "");

// The result rows of one layer: one per input or parameter.
struct GradcheckRow {
  std::string layer, tensor;
  int64_t checked = 0;
  bool directional = false;
  double max_abs_err = 0, max_rel_err = 0;
  bool passed = true;
};
// Runs gradcheck on the problem (single-threaded: the models are tiny).
std::vector<GradcheckRow> run_gradcheck(const std::string& layer, const GradcheckProblem& p);

}  // namespace qkv::nn
