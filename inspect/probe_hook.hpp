// The heads watched while the model trains: a train hook (train/trainer.hpp) that writes one
// metrics.jsonl record per probe, [probe] every = N steps of config/config.hpp (and at step 0
// of a new run, and at its last step):
//
//   {"step": N, "probe": {"seconds": t,
//                         "attentions": {"self": {"layers": L, "heads": H,
//                                                 "entropy": [[H values] x L],
//                                                 "previous_token": [...],
//                                                 "duplicate_token": [...],
//                                                 "induction": [...]}},
//                         "sites": [{"name": "self", "title": "causal self-attention", ...}],
//                         "icl": x}}
//
// The scores are `qkv heads`'s (inspect/head_table.hpp: pattern_probe and pattern_scores, the
// same code) on probe inputs drawn once, from [probe] seed, sequences and length. An
// encoder-decoder's record has "encoder" and "decoder" (self-attention scores, the decoder's on
// its own greedy output) and "cross" (entropy, alignment on the valid split's first sources)
// entries and no "icl"; a language model's "icl" is the in-context-learning score
// (inspect/icl.hpp) on icl_windows validation windows. "sites": the model's attention sites
// (inspect/site_json.hpp) in forward order, so a reader orders and titles the entries as the
// model does. "seconds": the probe's wall time.
//
// A probe changes nothing the training computes: eval mode, no tape and the run's precision
// (nn::InferenceScope), its own generator, no dropout drawn; a run with it and one without
// log the same losses and write the same weights. At the end the hook says what the probes
// cost: their count, mean seconds and share of the training's time.
#pragma once
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/precision.hpp"
#include "data/loader.hpp"
#include "inspect/head_table.hpp"
#include "run/train_hooks.hpp"

namespace qkv::inspect {

// The probe's inputs, drawn once from the config's [probe] (seed, sequences, length) and the
// data (a language model's icl windows of its validation text). qkv::Error naming the probe's
// key when they do not fit the model. Drawn before the run folder is made
// (training/train.cpp), so a probe that cannot run refuses the run before it leaves a folder.
struct ProbeInputs {
  PatternProbe patterns;
  std::optional<data::Batch> icl;  // a language model's windows
};
ProbeInputs probe_inputs(const config::RunConfig& c, const data::DataSplits& d,
                         const nn::Model& model);

class ProbeHook : public train::Hook {
 public:
  // Probes c's model on inputs (probe_inputs of c's config, data and model). p: the run's
  // precision (resolved).
  ProbeHook(run::RunContext& c, Precision p, ProbeInputs inputs);
  void on_train_begin(train::Trainer& t) override;                          // step 0 of a new run
  void on_step_end(train::Trainer& t, const train::StepStats& s) override;  // every N, the last
  void on_train_end(train::Trainer& t, train::StopReason r) override;  // an early stop; the cost

  // The probe of the model as it is now: {"seconds", "attentions", "sites", "icl"}.
  nlohmann::json probe();
  int64_t probes() const { return probes_; }
  double seconds() const { return seconds_; }  // all probes so far

 private:
  void record(int64_t step);

  run::RunContext& c_;
  Precision precision_;
  ProbeInputs inputs_;
  int64_t probes_ = 0, last_step_ = -1;
  double seconds_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace qkv::inspect
