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

// Head `head` of z (B, h, n, d_head) from the clean run's z.
nn::HookFn head_patch(const ag::Var& clean, int64_t head) {
  return [clean, head](const ag::Var& z) {
    Tensor pick = zeros({1, z.size(1), 1, 1});
    pick.data<float>()[head] = 1;
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

Patching patch_activations(const run::Inference& inf, const data::Ids& clean,
                           const data::Ids& corrupt) {
  QKV_CHECK(clean.size() == corrupt.size(), "patch", "the corrupted input has ", corrupt.size(),
            " tokens and the clean one ", clean.size(),
            ": patching puts each position of one run into the other, so they need the same "
            "length");
  const std::vector<Attention> atts = attentions_of(inf);
  const data::Ids tgt_in = shared_output_side(inf.inspect(clean), inf.inspect(corrupt));
  // Every hook below is a layer inside the caller's (an ablation stays in place in all runs).
  nn::Hooks cap;
  cap.capture = nn::names_matching({"*.z", "*.resid_pre"});
  const Tensor clean_logits = inf.logits(clean, tgt_in, &cap);
  const Tensor corrupt_logits = inf.logits(corrupt, tgt_in);
  const int64_t a = argmax_last(clean_logits), b = argmax_last(corrupt_logits);
  Patching r;
  r.clean_answer = inf.output_labels({a})[0];
  r.corrupt_answer = inf.output_labels({b})[0];
  QKV_CHECK(a != b, "patch", "the clean and the corrupted input give the same answer ('",
            r.clean_answer, "'): the logit difference has nothing to restore");
  r.clean_diff = logit_difference(clean_logits, a, b);
  r.corrupt_diff = logit_difference(corrupt_logits, a, b);
  const auto restored = [&](nn::Hooks& h) {
    return (logit_difference(inf.logits(corrupt, tgt_in, &h), a, b) - r.corrupt_diff) /
           (r.clean_diff - r.corrupt_diff);
  };
  for (const Attention& att : atts)
    for (int64_t l = 0; l < att.layers; ++l)
      for (int64_t h = 0; h < att.heads; ++h) {
        nn::Hooks hooks;
        hooks.add(att.z(l), head_patch(cap.cache.at(att.z(l)), h));
        r.heads.push_back({att.name, att.head_name(l, h), l, h, restored(hooks)});
      }
  const Attention& in = atts.front();  // the input side: the encoder, or the LM's blocks
  r.stream = in.prefix + "{L}.resid_pre";
  r.positions = inf.input_labels(clean);
  for (int64_t l = 0; l < in.layers; ++l) {
    const std::string point = in.prefix + std::to_string(l) + ".resid_pre";
    std::vector<double> row;
    for (int64_t p = 0; p < static_cast<int64_t>(clean.size()); ++p) {
      nn::Hooks hooks;
      add_residual_patch(hooks, point, cap.cache.at(point), {p});
      row.push_back(restored(hooks));
    }
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
