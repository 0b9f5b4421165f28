#include "data/sentencepiece.hpp"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "core/error.hpp"
#include "core/input_file.hpp"

namespace qkv::data {

namespace {

// Feeds the trainer from memory: no temporary corpus file.
class Sentences : public sentencepiece::SentenceIterator {
 public:
  explicit Sentences(const std::vector<std::string>& s) : s_(s) {}
  bool done() const override { return i_ >= s_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return s_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& s_;
  size_t i_ = 0;
};

// SentencePiece's seed is process-global: one training or sampling seeds it at a time.
std::mutex& seed_mutex() {
  static std::mutex mu;
  return mu;
}

// SetRandomGeneratorSeed's argument, never the library's "unseeded" value (-1).
unsigned spm_seed(uint64_t seed) { return static_cast<unsigned>(seed % 0x7fffffffu); }

}  // namespace

SentencePiece SentencePiece::train(const std::vector<std::string>& sentences,
                                   const SentencePieceOptions& o) {
  QKV_CHECK(!sentences.empty(), "sentencepiece", "no training sentences");
  const std::unordered_map<std::string, std::string> args = {
      {"model_type", std::string(name_of(o.type))},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"character_coverage", std::to_string(o.character_coverage)},
      // qkv's specials, at qkv's ids: piece id == token id
      {"pad_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"unk_id", "3"},
      {"pad_piece", kPad},
      {"bos_piece", kBos},
      {"eos_piece", kEos},
      {"unk_piece", kUnk},
      // determinism: one thread, every sentence in order, no sampling
      {"num_threads", "1"},
      {"input_sentence_size", "0"},
      {"shuffle_input_sentence", "false"},
      {"max_sentence_length", "100000"},
      {"hard_vocab_limit", "true"},
      {"minloglevel", "2"},
  };
  std::lock_guard<std::mutex> lock(seed_mutex());
  sentencepiece::SetRandomGeneratorSeed(spm_seed(o.seed));
  Sentences it(sentences);
  std::string bytes;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &it, &bytes);
  QKV_CHECK(status.ok(), "sentencepiece", "training failed (data.spm_vocab_size = ", o.vocab_size,
            ", data.spm_type = ", name_of(o.type), "): ", status.ToString());
  return from_serialized(std::move(bytes), "trained model");
}

SentencePiece SentencePiece::from_serialized(std::string bytes, const std::string& name) {
  auto sp = std::make_shared<sentencepiece::SentencePieceProcessor>();
  const auto status = sp->LoadFromSerializedProto(bytes);
  QKV_CHECK(status.ok(), "sentencepiece", name, ": not a SentencePiece model: ", status.ToString());
  SentencePiece out;
  out.sp_ = std::move(sp);
  out.bytes_ = std::move(bytes);
  // Refuse a model whose specials are not qkv's: its ids would mean other tokens.
  const Vocab v = out.vocab();
  QKV_CHECK(v.pad() == 0 && v.bos() == 1 && v.eos() == 2 && v.unk() == 3, "sentencepiece", name,
            ": its first pieces must be <pad> <bos> <eos> <unk> (qkv trains models that way)");
  return out;
}

SentencePiece SentencePiece::load(const std::string& path) {
  // As a vocabulary: no FIFO or device, and a bound (a run folder must not hang a reader).
  InputRules rules;
  rules.what = "SentencePiece model";
  rules.max_bytes = uint64_t{1} << 30;
  return from_serialized(read_input(path, rules), path);
}

std::vector<std::string> SentencePiece::encode(std::string_view text) const {
  std::vector<std::string> pieces;
  const auto status = sp_->Encode(absl::string_view(text.data(), text.size()), &pieces);
  QKV_CHECK(status.ok(), "sentencepiece", "encode failed: ", status.ToString());
  return pieces;
}

std::vector<std::vector<std::string>> SentencePiece::sample(
    const std::vector<std::string_view>& texts, double alpha, uint64_t seed) const {
  QKV_CHECK(alpha > 0 && alpha <= 1, "sentencepiece", "sampling alpha must be in (0, 1], got ",
            alpha);
  std::vector<std::vector<std::string>> out(texts.size());
  std::string error;
  // A fresh thread: its generator is created, from the seed set here, at its first draw.
  std::lock_guard<std::mutex> lock(seed_mutex());
  sentencepiece::SetRandomGeneratorSeed(spm_seed(seed));
  std::thread worker([&] {
    for (size_t i = 0; i < texts.size() && error.empty(); ++i) {
      const auto status = sp_->SampleEncode(absl::string_view(texts[i].data(), texts[i].size()), -1,
                                            static_cast<float>(alpha), &out[i]);
      if (!status.ok()) error = status.ToString();
    }
  });
  worker.join();
  QKV_CHECK(error.empty(), "sentencepiece", "sampling failed: ", error);
  return out;
}

std::string SentencePiece::decode(const std::vector<std::string>& pieces) const {
  std::string text;
  const auto status = sp_->Decode(pieces, &text);
  QKV_CHECK(status.ok(), "sentencepiece", "decode failed: ", status.ToString());
  return text;
}

Vocab SentencePiece::vocab() const {
  std::vector<std::string> tokens;
  const int n = sp_->GetPieceSize();
  tokens.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) tokens.push_back(sp_->IdToPiece(i));
  return Vocab(tokens);
}

}  // namespace qkv::data
