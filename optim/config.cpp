#include "optim/config.hpp"

#include <cmath>

namespace qkv::optim {

void OptimSection::validate() const {
  optim.validate();
  // noam's d_model and cosine's total_steps may be left out for the caller to fill from the
  // model's width and the run's length; ScheduleConfig::validate and schedule_lr still insist.
  validate_unfilled(schedule);
  QKV_CHECK(std::isfinite(clip_norm) && clip_norm >= 0, "optim.clip_norm",
            "must be >= 0 (0: off), got ", clip_norm);
  QKV_CHECK(std::isfinite(clip_value) && clip_value >= 0, "optim.clip_value",
            "must be >= 0 (0: off), got ", clip_value);
}

}  // namespace qkv::optim
