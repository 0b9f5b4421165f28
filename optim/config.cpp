#include "optim/config.hpp"

#include <cmath>

namespace qkv::optim {

void OptimSection::validate() const {
  optim.validate();
  // noam's d_model and cosine's total_steps may be left out for the caller to fill from the
  // model's width and the run's length; ScheduleConfig::validate and schedule_lr still insist.
  validate_unfilled(schedule);
  // noam computes its rate from d_model and warmup alone, so there is no lr_t / lr to scale
  // muon_lr by.
  QKV_CHECK(optim.name != OptimizerKind::muon || schedule.name != ScheduleKind::noam,
            "optim.schedule",
            "noam does not use lr, so muon cannot scale muon_lr with it; use "
            "constant, warmup, cosine, inverse_sqrt or wsd");
  QKV_CHECK(std::isfinite(clip_norm) && clip_norm >= 0, "optim.clip_norm",
            "must be >= 0 (0: off), got ", clip_norm);
  QKV_CHECK(std::isfinite(clip_value) && clip_value >= 0, "optim.clip_value",
            "must be >= 0 (0: off), got ", clip_value);
}

}  // namespace qkv::optim
