// libFuzzer target: the command-line overrides of `qkv train`. The input is an argument list,
// one argument per line ("--optim.lr\nnan\n--model.d_model=64"), split out by take_overrides
// and applied to a fixed base config by config_from_toml, which validates every key. A
// qkv::Error is the expected answer to bad input; anything else is a finding. A config that
// is accepted must hold no NaN or Inf and must read back from its effective TOML.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/document.hpp"
#include "core/error.hpp"

namespace qkv::fuzz {
namespace {

const char* const kBase = R"(seed = 1
threads = 1
[model]
d_model = 32
heads = 4
[data]
task = "copy"
train_size = 100
[train]
max_steps = 5
[optim]
name = "adam"
lr = 1e-3
schedule = "warmup"
warmup = 2
clip_norm = 1.0
)";

void require(bool ok) {
  if (!ok) std::abort();  // a finding: libFuzzer reports it, test_fuzz_replay fails
}

}  // namespace

// One input; also replayed by the unit test test_fuzz_replay (tests/fuzz/test_replay.cpp).
int overrides(const uint8_t* data, size_t size) {
  std::vector<std::string> args;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  for (std::string line; std::getline(in, line);) args.push_back(line);
  try {
    const auto ov = qkv::config::take_overrides(args);
    const qkv::config::RunConfig c =
        qkv::config::config_from_toml(qkv::config::parse_config(kBase, "base.toml"), ov);
    // No silent substitution: whatever was accepted is finite.
    const auto& o = c.optim;
    for (double v : {o.optim.lr, o.optim.eps, o.optim.weight_decay, o.optim.momentum, o.optim.beta1,
                     o.optim.beta2, o.schedule.factor, o.schedule.min_lr, o.clip_norm, o.clip_value,
                     c.model.dropout, c.model.layer_norm_eps,
                     c.model.attention_scale.config_value(), c.train.label_smoothing})
      require(std::isfinite(v));
    (void)qkv::config::config_from_toml(
        qkv::config::parse_config(qkv::config::effective_toml(c), "effective.toml"));
  } catch (const qkv::Error&) {
  }
  return 0;
}
}  // namespace qkv::fuzz

#ifndef QKV_FUZZ_NO_MAIN
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return qkv::fuzz::overrides(data, size);
}
#endif
