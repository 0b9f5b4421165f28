// qkv gradcheck [--all | --layer NAME ...] [--config FILE] [--mask M] [--scale S] [--json]:
// every layer's input and parameter gradients against central differences, in float64.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/commands.hpp"
#include "config/config.hpp"
#include "nn/gradcheck_layers.hpp"

namespace qkv::app {

using namespace nn;

int cmd_gradcheck(const GradcheckArgs& a) {
  if (a.list) {
    for (const GradcheckLayer& l : gradcheck_layers())
      std::printf("%-22s %s\n", l.name.c_str(), l.description.c_str());
    std::printf("%-22s %s\n", "(--config FILE)", "the Seq2Seq of a config's [model] section");
    return 0;
  }
  LayerCheckOptions opt;
  opt.mask = parse_mask_kind(a.mask);
  opt.scale = parse_scale(a.scale);
  opt.seed = a.seed;

  // What to check: the named layers; every non-test layer with --all or when nothing is named.
  std::vector<const GradcheckLayer*> layers;
  for (const std::string& n : a.layers) layers.push_back(&find_gradcheck_layer(n));
  if (a.all || (a.layers.empty() && a.config.empty()))
    for (const GradcheckLayer& l : gradcheck_layers())
      if (!l.test_only) layers.push_back(&l);

  std::vector<GradcheckRow> rows;
  for (const GradcheckLayer* l : layers) {
    const std::vector<GradcheckRow> r = run_gradcheck(l->name, l->build(opt));
    rows.insert(rows.end(), r.begin(), r.end());
  }
  if (!a.config.empty()) {
    const config::RunConfig cfg = config::load_config(a.config);
    const std::vector<GradcheckRow> r =
        run_gradcheck("config:" + cfg.name, model_gradcheck_problem(cfg.model, opt));
    rows.insert(rows.end(), r.begin(), r.end());
  }

  bool passed = true;
  int64_t failures = 0;
  for (const GradcheckRow& r : rows)
    if (!r.passed) passed = false, ++failures;
  if (a.json) {
    nlohmann::ordered_json j = {{"passed", passed},
                                {"mask", a.mask},
                                {"scale", a.scale},
                                {"seed", a.seed},
                                {"results", nlohmann::ordered_json::array()}};
    for (const GradcheckRow& r : rows)
      j["results"].push_back({{"layer", r.layer},
                              {"tensor", r.tensor},
                              {"checked", r.checked},
                              {"directional", r.directional},
                              {"max_abs_err", r.max_abs_err},
                              {"max_rel_err", r.max_rel_err},
                              {"passed", r.passed}});
    std::cout << j.dump(2) << std::endl;
  } else {
    size_t lw = 5, tw = 6;
    for (const GradcheckRow& r : rows)
      lw = std::max(lw, r.layer.size()), tw = std::max(tw, r.tensor.size());
    const int L = static_cast<int>(lw), T = static_cast<int>(tw);
    std::printf("%-*s  %-*s  %10s  %12s  %12s  %s\n", L, "layer", T, "tensor", "checked",
                "max abs err", "max rel err", "result");
    for (const GradcheckRow& r : rows) {
      const std::string checked = std::to_string(r.checked) + (r.directional ? " dir" : "");
      std::printf("%-*s  %-*s  %10s  %12.3g  %12.3g  %s\n", L, r.layer.c_str(), T, r.tensor.c_str(),
                  checked.c_str(), r.max_abs_err, r.max_rel_err, r.passed ? "pass" : "FAIL");
    }
    std::printf("%zu tensors in %zu layers (mask %s, scale %s): %s\n", rows.size(),
                layers.size() + (a.config.empty() ? 0 : 1), a.mask.c_str(), a.scale.c_str(),
                passed ? "all passed" : (std::to_string(failures) + " FAILED").c_str());
  }
  return passed ? 0 : 1;
}

}  // namespace qkv::app
