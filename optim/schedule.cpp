#include "schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.hpp"
#include "optimizers.hpp"

namespace qkv::optim {

void ScheduleConfig::validate() const {
  QKV_CHECK(name == "constant" || name == "warmup" || name == "noam" || name == "cosine" ||
                name == "inverse_sqrt",
            "optim.schedule", "unknown schedule '", name,
            "' (expected constant, warmup, noam, cosine or inverse_sqrt)");
  QKV_CHECK(std::isfinite(lr) && lr >= 0, "optim.lr", "must be finite and >= 0, got ", lr);
  QKV_CHECK(warmup >= 0, "optim.warmup", "must be >= 0, got ", warmup);
  if (name == "noam") {
    QKV_CHECK(warmup > 0, "optim.warmup", "noam needs warmup > 0, got ", warmup);
    QKV_CHECK(d_model > 0, "optim.d_model", "must be > 0, got ", d_model);
    QKV_CHECK(std::isfinite(factor) && factor > 0, "optim.factor", "must be > 0, got ", factor);
  }
  if (name == "cosine") {
    QKV_CHECK(total_steps > warmup, "optim.total_steps", "cosine needs total_steps > warmup, got ",
              total_steps, " <= ", warmup);
    QKV_CHECK(std::isfinite(min_lr) && min_lr >= 0 && min_lr <= lr, "optim.min_lr",
              "must be in [0, lr = ", lr, "], got ", min_lr);
  }
}

double schedule_lr(const ScheduleConfig& c, int64_t step) {
  QKV_CHECK(step >= 0, "schedule_lr", "step must be >= 0, got ", step);
  const double s = static_cast<double>(step), w = static_cast<double>(c.warmup);
  const bool warming = step < c.warmup;
  if (c.name == "constant") return c.lr;
  if (c.name == "warmup") return warming ? c.lr * s / w : c.lr;
  if (c.name == "noam") {
    QKV_CHECK(c.d_model > 0 && c.warmup > 0, "schedule_lr",
              "noam needs d_model > 0 and warmup > 0, got ", c.d_model, " and ", c.warmup);
    const double n = std::max(s, 1.0);
    return c.factor * std::pow(static_cast<double>(c.d_model), -0.5) *
           std::min(std::pow(n, -0.5), n * std::pow(w, -1.5));
  }
  if (c.name == "cosine") {
    if (warming) return c.lr * s / w;
    const double p = std::min(1.0, (s - w) / static_cast<double>(c.total_steps - c.warmup));
    return c.min_lr + (c.lr - c.min_lr) * 0.5 * (1 + std::cos(std::numbers::pi * p));
  }
  if (c.name == "inverse_sqrt") {
    if (warming) return c.lr * s / w;
    return c.warmup > 0 ? c.lr * std::sqrt(w / s) : c.lr / std::sqrt(std::max(s, 1.0));
  }
  c.validate();  // throws, naming the unknown schedule
  return c.lr;
}

double apply_schedule(Optimizer& opt, const ScheduleConfig& c) {
  const double lr = schedule_lr(c, opt.steps());
  opt.set_lr(lr);
  return lr;
}

}  // namespace qkv::optim
