// The [optim] section of a run's config: the optimizer, schedule and clipping settings, and the
// list of its keys. config/ reads and writes the section through optim_fields with the same
// field visitor as every other section (unknown keys and wrongly typed values are errors
// naming the key, "optim.lr: expected a number, got string"); validate() then checks values.
//
//   [optim]
//   name = "adamw"          # sgd | adam | adamw | muon
//   lr = 1e-3
//   betas = [0.9, 0.98]
//   eps = 1e-9
//   weight_decay = 0.01
//   no_decay_1d = true      # 1-D params (biases, LayerNorm) get no weight decay
//   no_decay = ["embed"]    # nor do params whose name contains one of these
//   schedule = "noam"       # constant | warmup | noam | cosine | inverse_sqrt | wsd
//   warmup = 4000
//   factor = 1.0
//   d_model = 512         # may be omitted: 0, for the caller to fill from the model's width
//   clip_norm = 1.0         # 0: off
#pragma once
#include "optim/optimizers.hpp"
#include "optim/schedule.hpp"

namespace qkv::optim {

struct OptimSection {
  OptimConfig optim;
  ScheduleConfig schedule;  // schedule.lr is optim.lr
  double clip_norm = 0.0;   // clip by global norm when > 0
  double clip_value = 0.0;  // clip by value when > 0

  // Every value in range; noam's d_model and cosine's total_steps may still be 0, for the run
  // to fill (fill_schedule). Errors name the key.
  void validate() const;
};

// The section's keys, each with its field: v(key, field), and v(key, first, second) for the
// pair betas. The order is the one run folders' config.toml files have always had
// (alphabetical). After reading, schedule.lr is set from optim.lr (take_lr).
template <class V, class S>
void optim_fields(V& v, S& s) {
  v("amsgrad", s.optim.amsgrad);
  v("betas", s.optim.beta1, s.optim.beta2);
  v("clip_norm", s.clip_norm);
  v("clip_value", s.clip_value);
  v("d_model", s.schedule.d_model);
  v("dampening", s.optim.dampening);
  v("decay_frac", s.schedule.decay_frac);
  v("eps", s.optim.eps);
  v("factor", s.schedule.factor);
  v("lr", s.optim.lr);
  v("min_lr", s.schedule.min_lr);
  v("momentum", s.optim.momentum);
  v("muon_lr", s.optim.muon_lr);
  v("muon_momentum", s.optim.muon_momentum);
  v("name", s.optim.name);
  v("nesterov", s.optim.nesterov);
  v("no_decay", s.optim.no_decay);
  v("no_decay_1d", s.optim.no_decay_1d);
  v("schedule", s.schedule.name);
  v("total_steps", s.schedule.total_steps);
  v("warmup", s.schedule.warmup);
  v("weight_decay", s.optim.weight_decay);
}

// The schedule's peak learning rate is the optimizer's lr (one key, two structs).
inline void take_lr(OptimSection& s) { s.schedule.lr = s.optim.lr; }

}  // namespace qkv::optim
