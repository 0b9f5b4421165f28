// qkv classify DIR [TEXT ...] [--json]: each input's class probabilities (arguments or stdin
// lines), from the run's inference interface (run/inference.hpp). A run whose family cannot
// classify is refused with what it can do instead (Inference::require).
//
//   text:   the predicted class, then every class and its probability, tab-separated
//           balanced	unbalanced 0.0123	balanced 0.9877
//   --json: one object per input, in order:
//           {"input": "( [ ] )", "tokens": [...], "predicted": "balanced",
//            "classes": [{"class": "unbalanced", "p": 0.0123}, ...]}
#include <spdlog/spdlog.h>

#include <iostream>
#include <string>

#include "apps/commands.hpp"
#include "apps/input_lines.hpp"
#include "inspect/heads.hpp"
#include "run/inference.hpp"

namespace qkv::app {

namespace {

std::string text_line(const run::Classification& c) {
  std::string line = c.classes[static_cast<size_t>(c.predicted)];
  for (size_t k = 0; k < c.classes.size(); ++k)
    line += fmt::format("\t{} {:.4f}", c.classes[k], c.probabilities[k]);
  return line;
}

}  // namespace

int cmd_classify(const ClassifyArgs& a) {
  const auto inf = run::open_inference(a.run_dir, {.checkpoint = a.checkpoint,
                                                   .precision = a.precision,
                                                   .threads = a.threads,
                                                   .op = "classify",
                                                   .max_input = a.max_input});
  // --ablate: the heads removed in every call below (a HookScope on this thread)
  const inspect::Ablation ablation(*inf, a.ablate, "classify");
  inf->require(run::Capability::classify, "classify");
  auto one = [&](const std::string& text) {
    const data::Ids ids = inf->encode(text, "classify");
    const run::Classification c = inf->classify({ids})[0];
    if (a.json)
      std::cout << run::classification_json(text, inf->input_labels(ids), c).dump() << std::endl;
    else
      std::cout << text_line(c) << std::endl;
  };
  each_input(a.texts, one);
  return 0;
}

}  // namespace qkv::app
