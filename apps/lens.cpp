// qkv lens RUN "input": the logit lens per layer (inspect/lens.hpp) -- each layer's top tokens
// and the final prediction's rank and probability there.
#include <cstdio>
#include <optional>

#include "apps/commands.hpp"
#include "core/error.hpp"
#include "inspect/attribution.hpp"
#include "inspect/heads.hpp"
#include "inspect/lens.hpp"
#include "run/inference.hpp"

namespace qkv::app {

namespace {

// The parts of the target's logit at the last position (inspect/attribution.hpp).
void print_attribution(const inspect::Attribution& at) {
  std::printf("\ndirect logit attribution of '%s' (logit %.4f):\n", at.target.c_str(), at.logit);
  double total = 0;
  for (const auto& p : at.parts) {
    std::printf("  %-14s %10.4f\n", p.name.c_str(), p.logit);
    total += p.logit;
  }
  std::printf("  %-14s %10.4f\n", "sum", total);
}

}  // namespace

int cmd_lens(const LensArgs& a) {
  const auto inf = run::open_inference(
      a.run_dir,
      {.checkpoint = a.checkpoint, .precision = a.precision, .threads = a.threads, .op = "lens"});
  // --ablate: the heads removed in every call below (a HookScope on this thread)
  const inspect::Ablation ablation(*inf, a.ablate, "lens");
  const data::Ids input = inf->encode(a.text, "lens");
  QKV_CHECK(a.position == -1 || a.target.empty(), "lens",
            "--target's attribution reads the last position; use --position without it");
  // The lens, then the attribution: a model either does not apply to fails before anything is
  // printed, and one without a residual stream says so rather than why it has no attribution.
  const inspect::Lens lens = inspect::logit_lens(*inf, input, a.top, a.position);
  std::optional<inspect::Attribution> parts;
  if (!a.target.empty())
    parts = inspect::direct_logit_attribution(
        *inf, input, inspect::output_token_id(*inf, a.target, "lens --target"));
  if (a.json) {
    std::printf("%s\n", inspect::lens_json(lens, parts ? &*parts : nullptr).dump(2).c_str());
    return 0;
  }
  std::printf("after '%s' the model predicts '%s'\n\n%-6s %5s %8s  top tokens\n",
              lens.position.c_str(), lens.prediction.c_str(), "layer", "rank", "prob");
  for (const auto& l : lens.layers) {
    std::printf("%-6s %5lld %8.4f ", l.name.c_str(), static_cast<long long>(l.rank), l.probability);
    for (const auto& [t, p] : l.top) std::printf(" '%s' %.3f", t.c_str(), p);
    std::printf("\n");
  }
  if (parts) print_attribution(*parts);
  return 0;
}

}  // namespace qkv::app
