// The [optim] section of a run's TOML config, read from its JSON form (a TOML table maps
// one-to-one onto a JSON object), into the optimizer, schedule and clipping settings.
// Unknown keys and wrongly typed values throw Error naming the key ("optim.lr: expected a
// number, got string"); the values are then validated (OptimConfig/ScheduleConfig::validate).
//
//   [optim]
//   name = "adamw"          # sgd | adam | adamw
//   lr = 1e-3
//   betas = [0.9, 0.98]
//   eps = 1e-9
//   weight_decay = 0.01
//   no_decay_1d = true      # 1-D params (biases, LayerNorm) get no weight decay
//   no_decay = ["embed"]    # nor do params whose name contains one of these
//   schedule = "noam"       # constant | warmup | noam | cosine | inverse_sqrt
//   warmup = 4000
//   factor = 1.0
//   d_model = 512         # may be omitted: 0, for the caller to fill from the model's width
//   clip_norm = 1.0         # 0: off
#pragma once
#include <nlohmann/json_fwd.hpp>

#include "optim/optimizers.hpp"
#include "optim/schedule.hpp"

namespace qkv::optim {

struct OptimSection {
  OptimConfig optim;
  ScheduleConfig schedule;  // schedule.lr is optim.lr
  double clip_norm = 0.0;   // clip by global norm when > 0
  double clip_value = 0.0;  // clip by value when > 0
};

// j: the [optim] table (an object; null or absent keys take the defaults).
OptimSection parse_optim_section(const nlohmann::json& j);
// The effective settings, every key present (for the run's log and config echo).
nlohmann::json to_json(const OptimSection& s);

}  // namespace qkv::optim
