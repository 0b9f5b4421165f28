// qkv eval DIR [--split valid|test|train] [--json]
#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/commands.hpp"
#include "apps/run.hpp"
#include "core/parallel.hpp"

namespace qkv::app {

int cmd_eval(const EvalArgs& a) {
  LoadedRun r = load_run(a.run_dir, a.checkpoint);
  set_num_threads(a.threads > 0 ? a.threads : static_cast<int>(r.config.threads));
  const data::Dataset* ds = a.split == "valid" ? &r.data.valid
                            : a.split == "test" ? &r.data.test
                            : a.split == "train" ? &r.data.train
                                                 : nullptr;
  QKV_CHECK(ds, "eval", "--split must be valid, test or train, got '", a.split, "'");
  const Metrics m = evaluate(*r.model, *ds, r.data.framing, r.config.data.batch_size,
                             r.config.train.max_decode_extra);
  if (a.json) {
    const nlohmann::json j = {{"loss", m.loss}, {"token_accuracy", m.token_accuracy},
                              {"exact_match", m.exact_match}, {"examples", m.examples}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s (%s, %s split, %lld examples)\n", a.run_dir.c_str(), r.checkpoint.c_str(),
                a.split.c_str(), static_cast<long long>(m.examples));
    std::printf("  loss            %.4f\n  token accuracy  %.4f\n  exact match     %.4f\n", m.loss,
                m.token_accuracy, m.exact_match);
  }
  return 0;
}

}  // namespace qkv::app
