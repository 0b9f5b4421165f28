// The page's attribution and patching questions (see attribution.hpp).
#include "serve/attribution.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cancel.hpp"
#include "core/error.hpp"
#include "inspect/attribution.hpp"
#include "inspect/attribution_patching.hpp"
#include "inspect/heads.hpp"
#include "inspect/patch.hpp"
#include "inspect/site_json.hpp"
#include "inspect/token_attribution.hpp"
#include "inspect/work.hpp"
#include "run/inference.hpp"

using nlohmann::json;

namespace qkv::serve {

// The server's bounds are the commands' defaults, or within them.
static_assert(Limits{}.max_attribution_work == inspect::kMaxAttributionWork);
static_assert(Limits{}.max_attribution_steps <= inspect::kMaxAttributionSteps);
static_assert(Limits{}.max_attribution_tokens <= inspect::kMaxAttributionTokens);
static_assert(Limits{}.max_patch_check <= inspect::kMaxPatchCheck);

namespace {

void check_range(const char* what, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) throw BadInput(cat(what, " must be in ", lo, "..", hi, ", got ", v));
}

// A text of the request (a target, a contrast) within the server's bytes.
void check_bytes(const char* what, const std::string& text, const Limits& lim) {
  if (static_cast<int64_t>(text.size()) > lim.max_text_bytes)
    throw BadInput(
        cat(what, " has ", text.size(), " bytes, more than the limit of ", lim.max_text_bytes));
}

// encode_input's ids, its message naming which input it was.
data::Ids input_named(const run::Inference& inf, const std::string& text, const Limits& lim,
                      const char* what) {
  try {
    return encode_input(inf, text, lim);
  } catch (const BadInput& e) {
    throw BadInput(cat(what, ": ", e.what()));
  }
}

struct ExactHead {
  inspect::PatchedHead head;  // its estimate in .restored
  double exact = 0;
};

double pearson(const std::vector<ExactHead>& cells) {
  const auto n = static_cast<double>(cells.size());
  double mx = 0, my = 0;
  for (const ExactHead& c : cells) mx += c.head.restored / n, my += c.exact / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (const ExactHead& c : cells) {
    sxy += (c.head.restored - mx) * (c.exact - my);
    sxx += (c.head.restored - mx) * (c.head.restored - mx);
    syy += (c.exact - my) * (c.exact - my);
  }
  if (cells.size() < 2 || sxx <= 0 || syy <= 0) return std::numeric_limits<double>::quiet_NaN();
  return sxy / std::sqrt(sxx * syy);
}

// The k heads of largest |estimate| (the table's order among equals), each patched exactly over
// every position: the restored fraction patch_activations gives it (the same PatchRuns::head).
json exact_heads(const run::Inference& inf, const inspect::Patching& estimate,
                 const data::Ids& clean, const data::Ids& corrupt, int64_t k) {
  std::vector<ExactHead> cells;
  for (const inspect::PatchedHead& h : estimate.heads) cells.push_back({h, 0});
  std::stable_sort(cells.begin(), cells.end(), [](const ExactHead& a, const ExactHead& b) {
    return std::abs(a.head.restored) > std::abs(b.head.restored);
  });
  cells.resize(std::min(cells.size(), static_cast<size_t>(k)));
  const inspect::PatchRuns runs(inf, clean, corrupt);
  const std::vector<inspect::Attention> atts = inspect::attentions_of(inf);
  json heads = json::array();
  for (ExactHead& c : cells) {
    cancellation_point();
    for (const inspect::Attention& att : atts)
      if (att.name == c.head.attention) c.exact = runs.head(att, c.head.layer, c.head.head);
    heads.push_back({{"attention", c.head.attention},
                     {"head", c.head.name},
                     {"layer", c.head.layer},
                     {"index", c.head.head},
                     {"estimate", c.head.restored},
                     {"exact", c.exact}});
  }
  const double r = pearson(cells);
  return {{"k", cells.size()},
          {"correlation", std::isnan(r) ? json() : json(r)},
          {"heads", std::move(heads)}};
}

}  // namespace

json attribute(Model& m, const AttributeRequest& r, const Limits& lim, const std::string& ablate) {
  check_range("steps", r.steps, 1, lim.max_attribution_steps);
  check_range("tokens", r.tokens, 1, lim.max_attribution_tokens);
  check_bytes("the target", r.target, lim);
  check_bytes("the contrast", r.contrast, lim);
  return m.ask(ablate, "attribute", [&](const run::Inference& inf) {
    inspect::AttributionQuery q;
    q.method = inspect::attribution_method(r.method, "attribute");
    q.input = encode_input(inf, r.text, lim);
    q.outputs = r.target.empty() ? inspect::default_outputs(inf, q.input, r.tokens)
                                 : inspect::output_ids(inf, r.target, "attribute target");
    if (static_cast<int64_t>(q.outputs.size()) > lim.max_input_tokens)
      throw BadInput(cat("the target has ", q.outputs.size(),
                         " tokens, more than the server's limit of ", lim.max_input_tokens));
    if (!r.contrast.empty())
      q.contrast = inspect::output_token_id(inf, r.contrast, "attribute contrast");
    q.steps = r.steps;
    q.max_work = lim.max_attribution_work;
    // before any pass, in the server's words
    inspect::check_work(inspect::attribution_work(inf, q), q.max_work, "attribute",
                        "the server's limit; use a shorter input or target, fewer steps, or qkv "
                        "attribute");
    return inspect::token_attribution_json(inspect::attribute_tokens(inf, q));
  });
}

json patch(Model& m, const PatchRequest& r, const Limits& lim, const std::string& ablate) {
  check_range("check", r.check, 0, std::min(lim.max_patch_check, inspect::kMaxPatchCheck));
  return m.ask(ablate, "patch", [&](const run::Inference& inf) {
    const data::Ids clean = input_named(inf, r.clean, lim, "clean");
    const data::Ids corrupt = input_named(inf, r.corrupt, lim, "corrupted");
    // the estimate with its checked cells, then PatchRuns' four passes again and a pass per
    // exact head: attribution_patching_work's 7 + check passes, plus 4 + check
    const auto n = static_cast<int64_t>(clean.size());
    const int64_t extra = r.check > 0 ? 4 + r.check : 0;
    inspect::check_work(inspect::attribution_patching_work(inf, n, r.check + extra),
                        lim.max_patch_work, "patch",
                        "the server's limit; use shorter inputs, a smaller check, or qkv patch");
    const inspect::AttributionPatching a =
        inspect::attribution_patching(inf, clean, corrupt, r.check);
    json out = inspect::attribution_patching_json(a);
    out["sites"] = inspect::sites_json(inspect::attentions_of(inf));  // the page's titles
    if (r.check > 0) out["exact_heads"] = exact_heads(inf, a.estimate, clean, corrupt, r.check);
    return out;
  });
}

}  // namespace qkv::serve
