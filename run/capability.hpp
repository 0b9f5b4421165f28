// What a family's model can be asked, beyond scoring and looking inside: a consumer checks a
// capability (Inference::can) and offers what the run has, instead of asking which family it
// holds. Each family lists its own (Family::capabilities); the one error for an operation a
// run cannot do is Inference::require's, naming what it can do instead.
//
//   decode     an output sequence for an input (greedy or beam): `qkv translate`
//   generate   tokens sampled after a prompt: `qkv generate`
//   classify   class probabilities for an input: `qkv classify`
#pragma once
#include <span>

#include "core/names.hpp"

namespace qkv::run {

enum class Capability { decode, generate, classify };
inline constexpr EnumName<Capability> kCapabilityNames[] = {{"decode", Capability::decode},
                                                            {"generate", Capability::generate},
                                                            {"classify", Capability::classify}};
constexpr std::span<const EnumName<Capability>> names_of(Capability) { return kCapabilityNames; }

// The subcommand that does it: "translate", "generate", "classify".
constexpr const char* command_of(Capability c) {
  switch (c) {
    case Capability::decode:
      return "translate";
    case Capability::generate:
      return "generate";
    case Capability::classify:
      return "classify";
  }
  return "";
}

}  // namespace qkv::run
