#include "schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.hpp"
#include "optimizers.hpp"

namespace qkv::optim {

int64_t ScheduleConfig::decay_steps() const {
  return std::max<int64_t>(1, std::llround(decay_frac * static_cast<double>(total_steps)));
}

namespace {

// wsd: the decay fraction in (0, 1], and warmup + decay within the run.
void check_wsd(const ScheduleConfig& c) {
  QKV_CHECK(std::isfinite(c.decay_frac) && c.decay_frac > 0 && c.decay_frac <= 1,
            "optim.decay_frac", "must be in (0, 1], got ", c.decay_frac);
  QKV_CHECK(c.total_steps > 0 && c.warmup <= c.total_steps - c.decay_steps(), "optim.warmup",
            "wsd: ", c.warmup, " warmup steps and ", c.decay_steps(), " decay steps (decay_frac ",
            c.decay_frac, ") do not fit in a run of ", c.total_steps, " steps");
}

}  // namespace

void ScheduleConfig::validate() const {
  QKV_CHECK(std::isfinite(lr) && lr >= 0, "optim.lr", "must be finite and >= 0, got ", lr);
  QKV_CHECK(warmup >= 0, "optim.warmup", "must be >= 0, got ", warmup);
  switch (name) {
    case ScheduleKind::noam:
      QKV_CHECK(warmup > 0, "optim.warmup", "noam needs warmup > 0, got ", warmup);
      QKV_CHECK(d_model > 0, "optim.d_model", "must be > 0, got ", d_model);
      QKV_CHECK(std::isfinite(factor) && factor > 0, "optim.factor", "must be > 0, got ", factor);
      break;
    case ScheduleKind::cosine:
      QKV_CHECK(total_steps > warmup, "optim.total_steps",
                "cosine needs total_steps > warmup, got ", total_steps, " <= ", warmup);
      QKV_CHECK(std::isfinite(min_lr) && min_lr >= 0 && min_lr <= lr, "optim.min_lr",
                "must be in [0, lr = ", lr, "], got ", min_lr);
      break;
    case ScheduleKind::wsd:
      check_wsd(*this);
      QKV_CHECK(std::isfinite(min_lr) && min_lr >= 0 && min_lr <= lr, "optim.min_lr",
                "must be in [0, lr = ", lr, "], got ", min_lr);
      break;
    case ScheduleKind::constant:
    case ScheduleKind::warmup:
    case ScheduleKind::inverse_sqrt:
      break;
  }
}

ScheduleConfig fill_schedule(ScheduleConfig c, int64_t d_model, int64_t run_steps) {
  if (c.name == ScheduleKind::noam && c.d_model == 0 && d_model > 0) c.d_model = d_model;
  if (c.name == ScheduleKind::cosine && c.total_steps == 0 && run_steps > 0) {
    QKV_CHECK(run_steps > c.warmup, "optim.warmup", c.warmup,
              " warmup steps do not fit in a run of ", run_steps, " steps");
    c.total_steps = run_steps;
  }
  if (c.name == ScheduleKind::wsd && c.total_steps == 0 && run_steps > 0) {
    c.total_steps = run_steps;
    check_wsd(c);
  }
  return c;
}

void validate_unfilled(const ScheduleConfig& c) {
  ScheduleConfig check = fill_schedule(c, 1, 0);
  if (check.name == ScheduleKind::cosine && check.total_steps == 0)
    check.total_steps = check.warmup + 1;
  // wsd without its length: a run long enough for any warmup (fill_schedule checks the real one)
  if (check.name == ScheduleKind::wsd && check.total_steps == 0) {
    check.total_steps = (check.warmup + 1) * 1000;
    if (check.decay_frac == 1) check.warmup = 0;  // the fit is fill_schedule's to judge
  }
  check.validate();
}

double schedule_lr(const ScheduleConfig& c, int64_t step) {
  QKV_CHECK(step >= 0, "schedule_lr", "step must be >= 0, got ", step);
  const double s = static_cast<double>(step), w = static_cast<double>(c.warmup);
  const bool warming = step < c.warmup;
  switch (c.name) {
    case ScheduleKind::constant:
      return c.lr;
    case ScheduleKind::warmup:
      return warming ? c.lr * s / w : c.lr;
    case ScheduleKind::noam: {
      QKV_CHECK(c.d_model > 0 && c.warmup > 0, "schedule_lr",
                "noam needs d_model > 0 and warmup > 0, got ", c.d_model, " and ", c.warmup);
      const double n = std::max(s, 1.0);
      return c.factor * std::pow(static_cast<double>(c.d_model), -0.5) *
             std::min(std::pow(n, -0.5), n * std::pow(w, -1.5));
    }
    case ScheduleKind::cosine: {
      if (warming) return c.lr * s / w;
      const double p = std::min(1.0, (s - w) / static_cast<double>(c.total_steps - c.warmup));
      return c.min_lr + (c.lr - c.min_lr) * 0.5 * (1 + std::cos(std::numbers::pi * p));
    }
    case ScheduleKind::inverse_sqrt:
      if (warming) return c.lr * s / w;
      return c.warmup > 0 ? c.lr * std::sqrt(w / s) : c.lr / std::sqrt(std::max(s, 1.0));
    case ScheduleKind::wsd: {
      if (warming) return c.lr * s / w;
      const int64_t d = c.decay_steps(), left = std::max<int64_t>(0, c.total_steps - step);
      if (left >= d) return c.lr;
      return c.min_lr + (c.lr - c.min_lr) * static_cast<double>(left) / static_cast<double>(d);
    }
  }
  return c.lr;
}

double apply_schedule(Optimizer& opt, const ScheduleConfig& c) {
  const double lr = schedule_lr(c, opt.steps());
  opt.set_lr(lr);
  return lr;
}

}  // namespace qkv::optim
