// qkv layers: the lesson's table "recurrence vs. convolution vs. self-attention" measured. The
// measurement is figures/layer_study.hpp's; this file reads the options, prints and writes.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "apps/commands.hpp"
#include "core/atomic_file.hpp"
#include "figures/layer_study.hpp"
#include "figures/length_study.hpp"
#include "run/limits.hpp"

namespace qkv::app {

namespace {

figures::LayerStudyOptions study_options(const LayersArgs& a) {
  figures::LayerStudyOptions o;
  o.d = a.d, o.heads = a.heads, o.kernel = a.kernel, o.conv_layers = a.conv_layers;
  o.conv_causal = a.conv_causal, o.batch = a.batch, o.repeats = a.repeats;
  o.profile_length = a.profile_length, o.seed = a.seed, o.lengths = a.lengths;
  if (a.quick) {  // seconds, not minutes: small width, one pass per point
    o.d = 16, o.heads = 2, o.batch = 2, o.repeats = 1, o.profile_length = 16;
    if (o.lengths.empty()) o.lengths = {8, 16, 32};
  }
  if (o.lengths.empty())
    for (int64_t n = 16; n <= 1024; n *= 2) o.lengths.push_back(n);
  return o;
}

// The length study's options: the layer sweep's width, and its own sizes (quick: tiny ones).
figures::LengthStudyOptions length_options(const LayersArgs& a) {
  figures::LengthStudyOptions o;
  o.d = a.d, o.heads = a.heads, o.layers = a.train_layers, o.steps = a.train_steps;
  o.batch = a.train_batch, o.train_max_len = a.train_max_len, o.eval_examples = a.eval_examples;
  o.seed = a.seed;
  if (!a.train_models.empty()) o.models = a.train_models;
  if (!a.train_tasks.empty()) o.tasks = a.train_tasks;
  if (a.quick) {  // seconds: a few steps of a narrow model, scored on a few short examples
    o.d = 16, o.heads = 2, o.layers = 1, o.steps = std::min<int64_t>(o.steps, 20);
    o.batch = 8, o.train_max_len = 6, o.eval_examples = 4, o.profile_length = 8;
    o.eval_lengths = {3, 6, 9};
  }
  if (!a.eval_lengths.empty()) o.eval_lengths = a.eval_lengths;
  return o;
}

}  // namespace

int cmd_layers(const LayersArgs& a) {
  const figures::LayerStudyOptions o = study_options(a);
  const figures::LengthStudyOptions lo = length_options(a);
  figures::check_length_study(lo);  // before minutes of timing
  run::apply_threads(a.threads, "--threads");
  const std::vector<figures::LayerResult> r = figures::run_layer_study(o);
  const std::vector<figures::LengthCurve> lr = figures::run_length_study(lo);
  nlohmann::ordered_json j = figures::layer_study_json(r, o);
  if (!lr.empty()) j["training"] = figures::length_study_json(lr, lo);
  std::filesystem::create_directories(a.out);
  atomic_write_file((std::filesystem::path(a.out) / "layers.json").string(), j.dump(1) + "\n");
  figures::write_layer_figures(a.out, r, o);
  figures::write_length_figures(a.out, lr, lo);
  if (a.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::string figs = "time.svg, path.svg";
    if (!lr.empty()) {
      for (const std::string& t : lo.tasks) figs += ", exact_match_" + t + ".svg";
      figs += ", path_trained.svg";
    }
    std::printf("%s\n%s\nwrote %s/layers.json, %s\n", figures::layer_table(r, o).c_str(),
                lr.empty() ? "" : figures::length_table(lr, lo).c_str(), a.out.c_str(),
                figs.c_str());
  }
  return 0;
}

}  // namespace qkv::app
