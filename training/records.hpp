// What a training run adds to its records and draws from them, beside the run folder's hooks
// (run/train_hooks.hpp): the attention-entropy field of train.log_attention_entropy, and
// loss.svg. Internal to training/train.cpp (installed with the folder's headers all the same).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "train/distributed.hpp"
#include "train/seq2seq_step.hpp"

namespace qkv::training {

// RUN/loss.svg from RUN/metrics.jsonl (read as qkv report reads it): the training loss and the
// validation loss against steps.
void plot_losses(const std::string& run_dir);

// train.log_attention_entropy: the mean attention entropy of each layer of the step fwd just
// took, one key per attention site (nn::AttentionSite::metric_key: encoder_self, decoder_self,
// decoder_cross) under j["attention_entropy"]. Data-parallel: over the global batch (every
// rank calls it; a collective).
void add_entropy(nlohmann::json& j, const train::Seq2SeqStep& fwd, train::Distributed& dist);

}  // namespace qkv::training
