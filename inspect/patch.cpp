// Activation patching (inspect/patch.hpp) through hooks: capture the clean run, replace in
// the corrupted one.
#include "inspect/patch.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "inspect/heads.hpp"
#include "run/inference.hpp"

namespace qkv::inspect {

namespace {

int64_t argmax_last(const Tensor& logits) {
  return to_vector<int64_t>(argmax(logits.select(0, logits.size(0) - 1), -1))[0];
}

// Head `head` of z (B, h, n, d_head) from the clean run's z: at every query position
// (positions empty), or at the given ones.
nn::HookFn head_patch(const ag::Var& clean, int64_t head, const std::vector<int64_t>& positions) {
  return [clean, head, positions](const ag::Var& z) {
    if (positions.empty()) {
      Tensor pick = zeros({1, z.size(1), 1, 1});
      pick.data<float>()[head] = 1;
      return ag::where(ne(pick, 0.0), clean, z);
    }
    Tensor pick = zeros({1, z.size(1), z.size(2), 1});
    for (const int64_t p : positions) pick.data<float>()[head * z.size(2) + p] = 1;
    return ag::where(ne(pick, 0.0), clean, z);
  };
}

// The output side both runs read: the clean run's greedy output up to the first token where
// the corrupted run's differs, so the answers compared are the two runs' tokens there (an
// encoder-decoder reading the whole output would compare two <eos>). When the outputs agree,
// all of it. A language model reads its input alone and ignores this.
data::Ids shared_output_side(const run::Inspection& clean, const run::Inspection& corrupt) {
  size_t same = 0;
  while (same < clean.tgt_out.size() && same < corrupt.tgt_out.size() &&
         clean.tgt_out[same] == corrupt.tgt_out[same])
    ++same;
  const size_t keep = std::min(same + 1, clean.tgt_in.size());  // <bos> and the shared tokens
  return data::Ids(clean.tgt_in.begin(), clean.tgt_in.begin() + static_cast<ptrdiff_t>(keep));
}

}  // namespace

double logit_difference(const Tensor& logits, int64_t a, int64_t b) {
  const Tensor row = logits.select(0, logits.size(0) - 1).to(DType::f64);
  return row.data<double>()[a] - row.data<double>()[b];
}

void add_residual_patch(nn::Hooks& hooks, const std::string& point, const ag::Var& clean,
                        const std::vector<int64_t>& positions) {
  hooks.add(point, [clean, positions](const ag::Var& x) {  // x: (1, n, d)
    Tensor pick = zeros({1, x.size(1), 1});
    for (const int64_t p : positions) pick.data<float>()[p] = 1;
    return ag::where(ne(pick, 0.0), clean, x);
  });
}

PatchRuns::PatchRuns(const run::Inference& inf, const data::Ids& clean, const data::Ids& corrupt)
    : inf_(inf), clean_(clean), corrupt_(corrupt) {
  QKV_CHECK(clean.size() == corrupt.size(), "patch", "the corrupted input has ", corrupt.size(),
            " tokens and the clean one ", clean.size(),
            ": patching puts each position of one run into the other, so they need the same "
            "length");
  tgt_in_ = shared_output_side(inf.inspect(clean), inf.inspect(corrupt));
  // Every hook below is a layer inside the caller's (an ablation stays in place in all runs).
  cap_.capture = nn::names_matching({"*.z", "*.resid_pre"});
  const Tensor clean_logits = inf.logits(clean, tgt_in_, &cap_);
  const Tensor corrupt_logits = inf.logits(corrupt, tgt_in_);
  a_ = argmax_last(clean_logits), b_ = argmax_last(corrupt_logits);
  clean_answer = inf.output_labels({a_})[0];
  corrupt_answer = inf.output_labels({b_})[0];
  QKV_CHECK(a_ != b_, "patch", "the clean and the corrupted input give the same answer ('",
            clean_answer, "'): the logit difference has nothing to restore");
  clean_diff = logit_difference(clean_logits, a_, b_);
  corrupt_diff = logit_difference(corrupt_logits, a_, b_);
}

double PatchRuns::restored(nn::Hooks& hooks) const {
  return (logit_difference(inf_.logits(corrupt_, tgt_in_, &hooks), a_, b_) - corrupt_diff) /
         (clean_diff - corrupt_diff);
}

double PatchRuns::head(const nn::AttentionSite& att, int64_t l, int64_t h,
                       const std::vector<int64_t>& positions) const {
  nn::Hooks hooks;
  hooks.add(att.z(l), head_patch(clean_at(att.z(l)), h, positions));
  return restored(hooks);
}

double PatchRuns::residual(const std::string& point, int64_t position) const {
  nn::Hooks hooks;
  add_residual_patch(hooks, point, clean_at(point), {position});
  return restored(hooks);
}

Patching patch_activations(const run::Inference& inf, const data::Ids& clean,
                           const data::Ids& corrupt) {
  const PatchRuns runs(inf, clean, corrupt);
  Patching r;
  r.clean_answer = runs.clean_answer, r.corrupt_answer = runs.corrupt_answer;
  r.clean_diff = runs.clean_diff, r.corrupt_diff = runs.corrupt_diff;
  const std::vector<Attention> atts = attentions_of(inf);
  for (const Attention& att : atts)
    for (int64_t l = 0; l < att.layers; ++l)
      for (int64_t h = 0; h < att.heads; ++h)
        r.heads.push_back({att.name, att.head_name(l, h), l, h, runs.head(att, l, h)});
  const Attention& in = atts.front();  // the input side: the encoder, or the LM's blocks
  r.stream = in.prefix + "{L}.resid_pre";
  r.positions = inf.input_labels(clean);
  for (int64_t l = 0; l < in.layers; ++l) {
    const std::string point = in.prefix + std::to_string(l) + ".resid_pre";
    std::vector<double> row;
    for (int64_t p = 0; p < static_cast<int64_t>(clean.size()); ++p)
      row.push_back(runs.residual(point, p));
    r.residual.push_back(std::move(row));
  }
  return r;
}

nlohmann::json patch_json(const Patching& r) {
  nlohmann::json heads = nlohmann::json::array();
  for (const auto& h : r.heads)
    heads.push_back({{"attention", h.attention},
                     {"head", h.name},
                     {"layer", h.layer},
                     {"index", h.head},
                     {"restored", h.restored}});
  return {{"clean_answer", r.clean_answer},
          {"corrupt_answer", r.corrupt_answer},
          {"clean_diff", r.clean_diff},
          {"corrupt_diff", r.corrupt_diff},
          {"heads", heads},
          {"stream", r.stream},
          {"positions", r.positions},
          {"residual", r.residual}};
}

}  // namespace qkv::inspect
