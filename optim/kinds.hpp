// The kinds an [optim] section chooses among, each an enum with its names table
// (core/names.hpp): the optimizer (name) and the learning-rate schedule (schedule).
#pragma once
#include <span>

#include "core/names.hpp"

namespace qkv::optim {

// muon: orthogonalized momentum for the hidden layers' matrices, AdamW for the rest
// (optim/optimizers.hpp).
enum class OptimizerKind { sgd, adam, adamw, muon };
inline constexpr EnumName<OptimizerKind> kOptimizerNames[] = {{"sgd", OptimizerKind::sgd},
                                                              {"adam", OptimizerKind::adam},
                                                              {"adamw", OptimizerKind::adamw},
                                                              {"muon", OptimizerKind::muon}};
constexpr std::span<const EnumName<OptimizerKind>> names_of(OptimizerKind) {
  return kOptimizerNames;
}

// optim/schedule.hpp gives each one's formula.
enum class ScheduleKind { constant, warmup, noam, cosine, inverse_sqrt, wsd };
inline constexpr EnumName<ScheduleKind> kScheduleNames[] = {
    {"constant", ScheduleKind::constant},
    {"warmup", ScheduleKind::warmup},
    {"noam", ScheduleKind::noam},
    {"cosine", ScheduleKind::cosine},
    {"inverse_sqrt", ScheduleKind::inverse_sqrt},
    {"wsd", ScheduleKind::wsd}};
constexpr std::span<const EnumName<ScheduleKind>> names_of(ScheduleKind) { return kScheduleNames; }

}  // namespace qkv::optim
