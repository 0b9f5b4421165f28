// Resource limits checked before work starts, so that no input ends in std::bad_alloc, the
// kernel's OOM killer or a hang: memory estimates refused against what the machine has, and
// thread counts capped at a sane multiple of the cores.
//
// What the machine has: core/machine.hpp. Estimates are deliberately rough (within a factor of
// about 2 of the peak): they exist to refuse the impossible with a clear message, not to pack
// memory tight.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include "core/precision.hpp"

#include "config/config.hpp"
#include "core/machine.hpp"

namespace qkv::run {

// A training run of c: its data before loading it (generated examples, symbol vocabulary), and
// its model, optimizer state and one batch's activations once the vocabularies are known.
void check_data_memory(const config::RunConfig& c);
void check_model_memory(const config::RunConfig& c, int64_t src_vocab, int64_t tgt_vocab);

// check_model_memory's estimate: the bytes of training c's model (parameters, gradients,
// optimizer state and one batch's activations) and of its [probe] (the attention maps of its
// sequences, a language model's icl windows), the key that drives it most, and in words.
struct MemoryEstimate {
  double bytes = 0;
  std::string key, what;
};
MemoryEstimate estimate_model_memory(const config::RunConfig& c, int64_t src_vocab,
                                     int64_t tgt_vocab);
// The probe's estimate (Family::probe_memory) from its parts: maps, the bytes of its
// inspections' attention maps, and pass, a pass of the family's own (its bytes, the key that
// sizes it and ", and ..." in words; none: {}), with the key that drives the whole.
MemoryEstimate probe_estimate(const config::RunConfig& c, double maps, const MemoryEstimate& pass);

// Sets the thread count from `requested` (0: all cores); above 4x the cores it is capped there
// with a warning naming `key` (oversubscribed threads only slow BLAS down and each costs
// memory). Negative counts are refused. Returns the count in use.
int apply_threads(int64_t requested, const std::string& key);

// The precision to run in: `flag` (--precision; unset: none given) over the run's `configured`
// one, resolved (core/precision.hpp): bf16 where it cannot run is qkv::Error naming `key` (or
// --precision) and the missing CPU feature; auto says on stderr what it picked.
Precision choose_precision(std::optional<Precision> flag, Precision configured,
                           const std::string& key);
// The same with the flag's text ("" when not given), parsed by Precision's names table.
Precision choose_precision(const std::string& flag, Precision configured, const std::string& key);

}  // namespace qkv::run
