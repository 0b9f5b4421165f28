// InferenceScope: how qkv opens a pass that does not train (decoding, sampling, validation,
// every inference call of run/inference.hpp, the training probe). It belongs with the model:
// eval mode, the tape switch and the hooks are nn/autograd ideas, and the decoders beside the
// models (run/decode.cpp, run/beam_search.cpp, run/lm.cpp) open it without the consumers'
// interface.
#pragma once
#include <optional>

#include "autograd/var.hpp"
#include "core/parallel.hpp"
#include "core/precision.hpp"
#include "nn/hooks.hpp"
#include "nn/module.hpp"

namespace qkv::nn {

// Eval mode (dropout off), the precision p for the products (nullopt: the caller's stays), and
// (record = false) no autograd tape, for a scope; the model's flag, the precision and recording
// come back after. hooks, when non-null, are pushed as this thread's innermost layer for the
// scope (nn/hooks.hpp; the caller's layers stay below it). The one way qkv opens
// a pass that does not train: decoding, sampling, validation and every inference call. Its
// products are thread-invariant (core/parallel.hpp): the same output at any thread count.
class InferenceScope {
 public:
  explicit InferenceScope(const Module& model, std::optional<Precision> p = std::nullopt,
                          Hooks* hooks = nullptr, bool record = false);
  ~InferenceScope();
  InferenceScope(const InferenceScope&) = delete;
  InferenceScope& operator=(const InferenceScope&) = delete;

 private:
  Module& model_;
  bool was_training_;
  std::optional<PrecisionScope> precision_;
  std::optional<ag::NoGrad> no_grad_;
  std::optional<HookScope> hooks_;
  ThreadInvariantProducts invariant_products_;
};

// One input's classes: names (class ids in order) and their probabilities (summing to 1).

}  // namespace qkv::nn
