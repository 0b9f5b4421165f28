#include "config.hpp"

#include <cmath>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/nearest.hpp"

namespace qkv::optim {
namespace {

using nlohmann::json;

std::string key_of(const std::string& k) { return "optim." + k; }

constexpr std::string_view kKeys[] = {
    "name",     "lr",          "betas",       "eps",       "weight_decay", "momentum", "dampening",
    "nesterov", "amsgrad",     "no_decay_1d", "no_decay",  "schedule",     "warmup",   "factor",
    "d_model",  "total_steps", "min_lr",      "clip_norm", "clip_value"};

double number(const json& v, const std::string& k) {
  QKV_CHECK(v.is_number(), key_of(k), "expected a number, got ", v.type_name());
  return v.get<double>();
}

int64_t integer(const json& v, const std::string& k) {
  if (v.is_number_integer()) return v.get<int64_t>();
  // 4000.0 from a JSON writer is still 4000; 4000.5 is not a step count.
  QKV_CHECK(v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() &&
                std::abs(v.get<double>()) < 9.0e15,
            key_of(k), "expected an integer, got ", v.is_number() ? v.dump() : v.type_name());
  return static_cast<int64_t>(v.get<double>());
}

bool boolean(const json& v, const std::string& k) {
  QKV_CHECK(v.is_boolean(), key_of(k), "expected true or false, got ", v.type_name());
  return v.get<bool>();
}

std::string string(const json& v, const std::string& k) {
  QKV_CHECK(v.is_string(), key_of(k), "expected a string, got ", v.type_name());
  return v.get<std::string>();
}

}  // namespace

OptimSection parse_optim_section(const json& j) {
  OptimSection s;
  if (j.is_null()) {
    s.schedule.lr = s.optim.lr;
    return s;
  }
  QKV_CHECK(j.is_object(), "optim", "expected a table, got ", j.type_name());
  OptimConfig& o = s.optim;
  ScheduleConfig& c = s.schedule;
  for (const auto& [k, v] : j.items()) {
    if (v.is_null()) continue;
    if (k == "name")
      o.name = parse_name<OptimizerKind>(string(v, k), key_of(k));
    else if (k == "lr")
      o.lr = number(v, k);
    else if (k == "betas") {
      QKV_CHECK(v.is_array() && v.size() == 2, key_of(k), "expected [beta1, beta2], got ",
                v.dump());
      o.beta1 = number(v[0], k);
      o.beta2 = number(v[1], k);
    } else if (k == "eps")
      o.eps = number(v, k);
    else if (k == "weight_decay")
      o.weight_decay = number(v, k);
    else if (k == "momentum")
      o.momentum = number(v, k);
    else if (k == "dampening")
      o.dampening = number(v, k);
    else if (k == "nesterov")
      o.nesterov = boolean(v, k);
    else if (k == "amsgrad")
      o.amsgrad = boolean(v, k);
    else if (k == "no_decay_1d")
      o.no_decay_1d = boolean(v, k);
    else if (k == "no_decay") {
      QKV_CHECK(v.is_array(), key_of(k), "expected a list of strings, got ", v.type_name());
      o.no_decay.clear();
      for (const json& e : v) o.no_decay.push_back(string(e, k));
    } else if (k == "schedule")
      c.name = parse_name<ScheduleKind>(string(v, k), key_of(k));
    else if (k == "warmup")
      c.warmup = integer(v, k);
    else if (k == "factor")
      c.factor = number(v, k);
    else if (k == "d_model")
      c.d_model = integer(v, k);
    else if (k == "total_steps")
      c.total_steps = integer(v, k);
    else if (k == "min_lr")
      c.min_lr = number(v, k);
    else if (k == "clip_norm")
      s.clip_norm = number(v, k);
    else if (k == "clip_value")
      s.clip_value = number(v, k);
    else
      throw Error(cat(key_of(k),
                      ": unknown key (expected one of name, lr, betas, eps, weight_decay, "
                      "momentum, dampening, nesterov, amsgrad, no_decay_1d, no_decay, schedule, "
                      "warmup, factor, d_model, total_steps, min_lr, clip_norm, clip_value)",
                      did_you_mean(k, kKeys, "optim.")));
  }
  c.lr = o.lr;
  o.validate();
  // noam's d_model and cosine's total_steps may be left out for the caller to fill from the
  // model's width and the run's length; ScheduleConfig::validate and schedule_lr still insist.
  validate_unfilled(c);
  QKV_CHECK(std::isfinite(s.clip_norm) && s.clip_norm >= 0, "optim.clip_norm",
            "must be >= 0 (0: off), got ", s.clip_norm);
  QKV_CHECK(std::isfinite(s.clip_value) && s.clip_value >= 0, "optim.clip_value",
            "must be >= 0 (0: off), got ", s.clip_value);
  return s;
}

json to_json(const OptimSection& s) {
  const OptimConfig& o = s.optim;
  const ScheduleConfig& c = s.schedule;
  return json{{"name", name_of(o.name)},
              {"lr", o.lr},
              {"betas", {o.beta1, o.beta2}},
              {"eps", o.eps},
              {"weight_decay", o.weight_decay},
              {"momentum", o.momentum},
              {"dampening", o.dampening},
              {"nesterov", o.nesterov},
              {"amsgrad", o.amsgrad},
              {"no_decay_1d", o.no_decay_1d},
              {"no_decay", o.no_decay},
              {"schedule", name_of(c.name)},
              {"warmup", c.warmup},
              {"factor", c.factor},
              {"d_model", c.d_model},
              {"total_steps", c.total_steps},
              {"min_lr", c.min_lr},
              {"clip_norm", s.clip_norm},
              {"clip_value", s.clip_value}};
}

}  // namespace qkv::optim
