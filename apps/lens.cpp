// qkv lens RUN "input": the logit lens per layer (inspect/lens.hpp) -- each layer's top tokens
// and the final prediction's rank and probability there.
#include <nlohmann/json.hpp>

#include <cstdio>

#include "apps/commands.hpp"
#include "inspect/heads.hpp"
#include "inspect/lens.hpp"
#include "run/inference.hpp"

namespace qkv::app {

int cmd_lens(const LensArgs& a) {
  const auto inf = run::open_inference(
      a.run_dir,
      {.checkpoint = a.checkpoint, .precision = a.precision, .threads = a.threads, .op = "lens"});
  nn::Hooks ablation;
  inspect::ablate(*inf, a.ablate, ablation, "lens");
  const inspect::Lens lens = inspect::logit_lens(*inf, inf->encode(a.text, "lens"), a.top);
  if (a.json) {
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& l : lens.layers) {
      nlohmann::json top = nlohmann::json::array();
      for (const auto& [t, p] : l.top) top.push_back({{"token", t}, {"probability", p}});
      layers.push_back({{"layer", l.name},
                        {"hook", l.hook},
                        {"rank", l.rank},
                        {"probability", l.probability},
                        {"top", top}});
    }
    std::printf("%s\n", nlohmann::json{{"position", lens.position},
                                       {"prediction", lens.prediction},
                                       {"layers", layers}}
                            .dump(2)
                            .c_str());
    return 0;
  }
  std::printf("after '%s' the model predicts '%s'\n\n%-6s %5s %8s  top tokens\n",
              lens.position.c_str(), lens.prediction.c_str(), "layer", "rank", "prob");
  for (const auto& l : lens.layers) {
    std::printf("%-6s %5lld %8.4f ", l.name.c_str(), static_cast<long long>(l.rank), l.probability);
    for (const auto& [t, p] : l.top) std::printf(" '%s' %.3f", t.c_str(), p);
    std::printf("\n");
  }
  return 0;
}

}  // namespace qkv::app
