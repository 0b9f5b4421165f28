// qkv layers: the lesson's table "recurrence vs. convolution vs. self-attention" measured. The
// measurement is figures/layer_study.hpp's; this file reads the options, prints and writes.
#include <cstdio>
#include <filesystem>

#include "apps/commands.hpp"
#include "core/atomic_file.hpp"
#include "figures/layer_study.hpp"
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

}  // namespace

int cmd_layers(const LayersArgs& a) {
  const figures::LayerStudyOptions o = study_options(a);
  run::apply_threads(a.threads, "--threads");
  const std::vector<figures::LayerResult> r = figures::run_layer_study(o);
  const nlohmann::ordered_json j = figures::layer_study_json(r, o);
  std::filesystem::create_directories(a.out);
  atomic_write_file((std::filesystem::path(a.out) / "layers.json").string(), j.dump(1) + "\n");
  figures::write_layer_figures(a.out, r, o);
  if (a.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s\nwrote %s/layers.json, time.svg, path.svg\n",
                figures::layer_table(r, o).c_str(), a.out.c_str());
  }
  return 0;
}

}  // namespace qkv::app
