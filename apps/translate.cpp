// qkv translate DIR [TEXT ...] [--beam N]: one output line per input (arguments or stdin lines),
// decoded by the run's inference interface (run/inference.hpp).
#include <cmath>
#include <iostream>
#include <string>

#include "apps/commands.hpp"
#include "apps/input_lines.hpp"
#include "inspect/heads.hpp"
#include "run/inference.hpp"

namespace qkv::app {

int cmd_translate(const TranslateArgs& a) {
  QKV_CHECK(std::isfinite(a.alpha) && a.alpha >= 0, "translate",
            "--alpha must be a finite number >= 0, got ", a.alpha);
  const auto inf = run::open_inference(a.run_dir, {.checkpoint = a.checkpoint,
                                                   .precision = a.precision,
                                                   .threads = a.threads,
                                                   .op = "translate",
                                                   .max_input = a.max_input});
  // --ablate: the heads removed in every call below (a HookScope on this thread)
  const inspect::Ablation ablation(*inf, a.ablate, "translate");
  inf->require(run::Capability::decode, "translate");
  const run::DecodeOptions o{.beam = a.beam, .alpha = a.alpha, .max_len = a.max_len};
  auto one = [&](const std::string& text) {
    const data::Ids src = inf->encode(text, "translate");
    std::cout << inf->text(inf->decode({src}, o)[0]) << std::endl;
  };
  each_input(a.texts, one);
  return 0;
}

}  // namespace qkv::app
