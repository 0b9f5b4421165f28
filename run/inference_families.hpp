// The two task families' inference (run/inference.hpp), each implemented in its own file; made
// by their Family (run/families.hpp), never named by a consumer.
#pragma once
#include <mutex>

#include "nn/decoder_lm.hpp"
#include "nn/seq2seq.hpp"
#include "run/decode.hpp"
#include "run/families.hpp"
#include "run/inference.hpp"

namespace qkv::run {

// Pairs (source, target): run/inference_seq2seq.cpp.
class Seq2SeqInference : public Inference {
 public:
  Seq2SeqInference(LoadedRun r, Precision p, const Seq2SeqFamily& family)
      : Inference(std::move(r), p), family_(family) {}
  data::Ids encode(const std::string& text, const char* op) const override;
  std::string text(const data::Ids& ids) const override;
  std::vector<std::string> input_labels(const data::Ids& ids) const override;
  std::vector<std::string> output_labels(const data::Ids& ids) const override;
  std::vector<data::Ids> decode(const std::vector<data::Ids>& inputs,
                                const DecodeOptions& o) const override;
  Scores score(const ScoreOptions& o) const override;
  Inspection inspect(const data::Ids& input) const override;
  void for_each_batch(const PassOptions& o,
                      const std::function<void(const BatchPass&)>& fn) const override;
  int64_t pass_tokens(const PassOptions& o) const override;
  Tensor logits(const data::Ids& input, const data::Ids& tgt_in,
                nn::Hooks* hooks = nullptr) const override;
  Tensor batch_logits(const Tensor& input, const Tensor& tgt_in, nn::Hooks* hooks = nullptr,
                      const Tensor& input_valid = Tensor(),
                      const Tensor& tgt_valid = Tensor()) const override;
  std::string output_name() const override { return "output"; }

 private:
  // The run's model as the family built it; qkv::Error naming op otherwise.
  const nn::EncoderDecoder& seq2seq(const char* op) const {
    return nn::model_as<nn::EncoderDecoder>(model(), op);
  }
  const Seq2SeqFamily& family_;  // the run's family (a static of family_for)
};

// One token stream (data.task = "lm"): run/inference_lm.cpp.
class LanguageModelInference : public Inference {
 public:
  LanguageModelInference(LoadedRun r, Precision p) : Inference(std::move(r), p) {}
  data::Ids encode(const std::string& text, const char* op) const override;
  std::string text(const data::Ids& ids) const override;
  std::vector<std::string> input_labels(const data::Ids& ids) const override;
  std::vector<std::string> output_labels(const data::Ids& ids) const override;
  void generate(const data::Ids& prompt, int64_t n, const SampleOptions& o, Generator& gen,
                bool cached, const std::function<void(int64_t)>& on_token) const override;
  Scores score(const ScoreOptions& o) const override;
  Inspection inspect(const data::Ids& input) const override;
  void for_each_batch(const PassOptions& o,
                      const std::function<void(const BatchPass&)>& fn) const override;
  int64_t pass_tokens(const PassOptions& o) const override;
  Tensor logits(const data::Ids& input, const data::Ids& tgt_in,
                nn::Hooks* hooks = nullptr) const override;
  Tensor batch_logits(const Tensor& input, const Tensor& tgt_in, nn::Hooks* hooks = nullptr,
                      const Tensor& input_valid = Tensor(),
                      const Tensor& tgt_valid = Tensor()) const override;
  std::string output_name() const override;  // next-character (or next-piece) guesses

 private:
  // The run's model as the family built it; qkv::Error naming op otherwise.
  const nn::DecoderLM& lm(const char* op) const { return nn::model_as<nn::DecoderLM>(model(), op); }
  // The text's splits, read once (for_each_batch passes over them many times), by the first
  // call that needs them; the others wait for that read.
  const data::DataSplits& stream(const char* op) const;
  mutable std::mutex stream_mu_;  // stream_
  mutable std::shared_ptr<const data::DataSplits> stream_;
};

}  // namespace qkv::run
