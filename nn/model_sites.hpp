// Each model's attention sites from its config alone: what the model's attention_sites() returns
// once built, known without weights -- what a run folder's page reads without loading the run
// (run::Family::attention_sites). Each is defined beside its model and is the one list that
// model has; the table of sites is nn/attention_site.hpp's.
#pragma once
#include <vector>

#include "nn/attention_site.hpp"

namespace qkv::nn {

struct ModelConfig;  // nn/seq2seq.hpp

// nn::Seq2Seq (nn/seq2seq.cpp): encoder (Transformer encoders only), decoder, cross.
std::vector<AttentionSite> seq2seq_sites(const ModelConfig& c);
// nn::RecurrentSeq2Seq (nn/rnn_seq2seq.cpp): cross with model.cross_attention, else none.
std::vector<AttentionSite> recurrent_seq2seq_sites(const ModelConfig& c);
// What make_encoder_decoder(c) builds (nn/encoder_decoder.cpp): one of the two above.
std::vector<AttentionSite> encoder_decoder_sites(const ModelConfig& c);
// nn::DecoderLM (nn/decoder_lm.cpp): self, causal.
std::vector<AttentionSite> decoder_lm_sites(const ModelConfig& c);
// nn::EncoderClassifier (nn/encoder_classifier.cpp): self.
std::vector<AttentionSite> encoder_classifier_sites(const ModelConfig& c);

}  // namespace qkv::nn
