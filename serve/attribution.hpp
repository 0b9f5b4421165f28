// The page's "why this output" questions: token attribution (`qkv attribute`,
// inspect/token_attribution.hpp) and attribution patching checked by exact patching (`qkv patch
// --approx --check`, inspect/attribution_patching.hpp), each answered from a loaded checkpoint
// (Model::ask: the question's ablation installed around it) within the server's Limits, in
// the JSON the commands print, so that the page's numbers are theirs.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "serve/model.hpp"

namespace qkv::serve {

// POST .../attribute: `qkv attribute RUN TEXT --method M [--target T] [--contrast C] [--tokens
// N] [--steps S] --json`.
struct AttributeRequest {
  std::string text, method = "saliency", target, contrast;
  int64_t tokens = 1;  // a language model without a target: its greedy next tokens scored
  int64_t steps = 64;  // integrated gradients
};

// POST .../patch: `qkv patch RUN --clean C --corrupt X --approx [--check K] --json`, and with
// check K > 0 also the K heads of largest |estimate| patched exactly, each over every position
// as `qkv patch` patches a head ("exact_heads"), so that the layers x heads estimate is set
// beside the restored fractions `qkv patch --json` gives those heads.
struct PatchRequest {
  std::string clean, corrupt;
  int64_t check = 0;
};

// token_attribution_json's object. BadInput for an unknown method, a contrast or target the
// output vocabulary lacks, steps or tokens outside the limits, work past
// lim.max_attribution_work.
nlohmann::json attribute(Model& m, const AttributeRequest& r, const Limits& lim,
                         const std::string& ablate);

// attribution_patching_json's object, with "sites" (inspect::sites_json: the attentions' titles);
// with check > 0 also
// "exact_heads": {"k", "correlation" (Pearson over the k; null when undefined), "heads":
// [{"attention", "head", "layer", "index", "estimate", "exact"}...]}, largest |estimate| first.
// BadInput for inputs of different lengths or with the same answer, check outside
// 0..lim.max_patch_check or above the cells, work past lim.max_patch_work.
nlohmann::json patch(Model& m, const PatchRequest& r, const Limits& lim, const std::string& ablate);

}  // namespace qkv::serve
