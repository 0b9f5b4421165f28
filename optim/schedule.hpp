// Learning-rate schedules: the learning rate as a closed-form function of the step count.
//
// `step` is the number of optimizer steps already taken (0 for the first update), the
// convention of torch's LambdaLR: the trainer calls opt.set_lr(schedule_lr(cfg, opt.steps()))
// before opt.step(), or apply_schedule(opt, cfg). Because steps() is part of the optimizer's
// saved state, a resumed run continues the schedule where it stopped.
//
//   constant      lr
//   warmup        lr * min(1, step / warmup)                         (linear warmup, then constant)
//   noam          factor * d_model^-0.5 * min(s^-0.5, s * warmup^-1.5), s = max(step, 1)
//                 (the Annotated Transformer's "rate"; lr is not used)
//   cosine        lr * step / warmup while step < warmup, then
//                 min_lr + (lr - min_lr) * (1 + cos(pi * p)) / 2,
//                 p = min(1, (step - warmup) / (total_steps - warmup))
//   inverse_sqrt  lr * step / warmup while step < warmup, then lr * sqrt(warmup / step)
//   wsd           warmup-stable-decay: lr * step / warmup while step < warmup, lr until the
//                 decay starts at total_steps - D, then linear to min_lr at total_steps:
//                 min_lr + (lr - min_lr) * (total_steps - step) / D,
//                 D = max(1, round(decay_frac * total_steps))
//
// A warmup of 0 means no warmup (warmup, cosine, inverse_sqrt; inverse_sqrt then decays as
// lr / sqrt(max(step, 1))).
#pragma once
#include <cstdint>
#include <string>

#include "optim/kinds.hpp"

namespace qkv::optim {

class Optimizer;

struct ScheduleConfig {
  ScheduleKind name = ScheduleKind::constant;  // constant | warmup | noam | cosine | inverse_sqrt
                                               // | wsd
  double lr = 1e-3;                            // peak learning rate (the [optim] lr)
  int64_t warmup = 0;                          // warmup steps
  double factor = 1.0;                         // noam
  int64_t d_model = 0;                         // noam: the model width (required)
  int64_t total_steps = 0;                     // cosine, wsd: the step at which lr reaches min_lr
  double min_lr = 0.0;                         // cosine, wsd
  double decay_frac = 0.2;  // wsd: the last fraction of total_steps, decaying linearly

  // wsd: the steps of the decay, D above.
  int64_t decay_steps() const;

  // Throws Error naming the bad key ("optim.warmup: noam needs warmup > 0").
  void validate() const;
};

// What a config may leave 0 for the run to fill in: noam's d_model (the model's width) and
// cosine's and wsd's total_steps (the run's length). A 0 argument leaves its value as it is. Throws
// Error("optim.warmup: ...") when a cosine warmup does not fit in the run it is filled from.
ScheduleConfig fill_schedule(ScheduleConfig c, int64_t d_model, int64_t run_steps);
// Validates c as a config holds it, before the run fills in noam's d_model or cosine's length.
void validate_unfilled(const ScheduleConfig& c);

// The learning rate for the update that follows `step` completed steps (step >= 0).
double schedule_lr(const ScheduleConfig& c, int64_t step);

// opt.set_lr(schedule_lr(c, opt.steps())); returns that learning rate (for the logs).
double apply_schedule(Optimizer& opt, const ScheduleConfig& c);

}  // namespace qkv::optim
