// A recorded pass (inspect/recorded_pass.hpp): the model's forward over copies of one pass.
#include "inspect/recorded_pass.hpp"

#include <vector>

#include "nn/model.hpp"

namespace qkv::inspect {

namespace {

// ids repeated as `copies` rows (copies, n) int64; undefined for no ids.
Tensor copies_of(const data::Ids& ids, int64_t copies) {
  if (ids.empty()) return Tensor();
  std::vector<int64_t> v;
  for (int64_t c = 0; c < copies; ++c) v.insert(v.end(), ids.begin(), ids.end());
  return from_vector<int64_t>(v, {copies, static_cast<int64_t>(ids.size())});
}

}  // namespace

PassIds pass_ids(const nn::Model& model, const data::Ids& input, const data::Ids& tgt_in) {
  bool in = false, out = false;
  for (const nn::AttentionSite& s : model.attention_sites())
    (s.queries == nn::Side::input ? in : out) = true;
  if (in && out) return {input, tgt_in};
  if (out) return {{}, input};
  return {input, {}};
}

ag::Var forward_copies(const nn::Model& model, const PassIds& ids, int64_t copies) {
  const Tensor src = copies_of(ids.src, copies), tgt = copies_of(ids.tgt, copies);
  const bool pair = ids.pair();
  return model.forward(src, tgt, pair ? ones(src.shape(), DType::b8) : Tensor(),
                       pair ? ones(tgt.shape(), DType::b8) : Tensor());
}

Tensor logit_seed(const ag::Var& logits, int64_t row, int64_t a, int64_t b) {
  const int64_t K = logits.size(0), T = logits.size(1), V = logits.size(2);
  Tensor seed = zeros(logits.shape(), DType::f32);
  float* g = seed.data<float>();
  for (int64_t k = 0; k < K; ++k) {
    g[(k * T + row) * V + a] += 1;
    if (b >= 0) g[(k * T + row) * V + b] -= 1;
  }
  return seed.to(logits.dtype());
}

}  // namespace qkv::inspect
