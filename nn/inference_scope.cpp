#include "nn/inference_scope.hpp"

namespace qkv::nn {

InferenceScope::InferenceScope(const Module& model, std::optional<Precision> p, Hooks* hooks,
                               bool record)
    : model_(const_cast<Module&>(model)), was_training_(model.is_training()) {
  if (p) precision_.emplace(*p);
  // A model already in eval mode (a loaded Inference's, for good) is only read: passes on many
  // threads share it. Only a model that trains (the probe's, on the training's own thread) is
  // switched, and switched back.
  if (was_training_) model_.eval();
  if (!record) no_grad_.emplace();
  if (hooks) hooks_.emplace(*hooks);
}

InferenceScope::~InferenceScope() {
  if (was_training_) model_.train(true);
}

}  // namespace qkv::nn
