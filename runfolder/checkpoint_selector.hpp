// --checkpoint: which checkpoint of a run folder eval, translate, generate, attention and serve
// load, parsed once into a CheckpointSelector (run::resolve_checkpoint finds its folder).
//
//   best      the best validation's (checkpoints/best), else the newest
//   latest    the newest (checkpoints/latest), else the newest complete step-N
//   average   checkpoints/average (qkv average, [checkpoint] average_last)
//   step-N    one checkpoint by its folder's name, e.g. step-00000100
//   path      a checkpoint folder anywhere: any value with a '/' (qkv average --out DIR)
#pragma once
#include <span>
#include <string>
#include <string_view>

#include "core/names.hpp"

namespace qkv::run {

enum class CheckpointKind { best, latest, average, step, path };
// step-N and path are patterns: their entries name them in errors, and never parse as such.
inline constexpr EnumName<CheckpointKind> kCheckpointNames[] = {
    {"best", CheckpointKind::best},
    {"latest", CheckpointKind::latest},
    {"average", CheckpointKind::average},
    {"step-N", CheckpointKind::step},
    {"path", CheckpointKind::path}};
constexpr std::span<const EnumName<CheckpointKind>> names_of(CheckpointKind) {
  return kCheckpointNames;
}

struct CheckpointSelector {
  CheckpointKind kind = CheckpointKind::best;
  std::string value;  // step: the folder's name ("step-00000100"); path: the path; else empty
  // As a user writes it: "best", "step-00000100", "runs/x/checkpoints/average".
  std::string text() const { return value.empty() ? std::string(name_of(kind)) : value; }
  bool operator==(const CheckpointSelector&) const = default;
};

// Parses best | latest | average | step-N (digits) | a path (with a '/'); anything else is
// qkv::Error "KEY: must be best, latest, average, step-N or path, got 'x'", with the nearest
// name ("did you mean 'best'?").
CheckpointSelector parse_checkpoint_selector(std::string_view text,
                                             const std::string& key = "--checkpoint");

}  // namespace qkv::run
