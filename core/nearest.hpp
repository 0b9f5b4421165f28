// "Did you mean": the known name nearest to a mistyped one, for errors about unknown keys,
// sections and named values (`model.d_modle` -> model.d_model, "sinusoid" -> "sinusoidal").
//
// Nearest by optimal-string-alignment distance (insertions, deletions, substitutions and swaps
// of two neighbours each cost 1), ignoring case; a name is offered only when it is near enough
// to be a typo (at most a third of the longer name's letters, at least 1, differ) and no other
// name is as near.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace qkv {

size_t edit_distance(std::string_view a, std::string_view b);

std::optional<std::string_view> nearest_name(std::string_view given,
                                             std::span<const std::string_view> names);

// "; did you mean BEFORE+NAME+AFTER?" ("; did you mean model.d_model?", "... [model]?",
// "... \"sinusoidal\"?"), or "" when no name is near.
std::string did_you_mean(std::string_view given, std::span<const std::string_view> names,
                         std::string_view before = "", std::string_view after = "");

}  // namespace qkv
