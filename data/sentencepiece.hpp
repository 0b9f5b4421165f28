// Subword tokenization with SentencePiece (the tokenizer of Marian, fairseq and T5), trained
// through the library's C++ trainer on the training split of a run.
//
// A model's piece ids ARE qkv's token ids: the trainer puts <pad> = 0, <bos> = 1, <eos> = 2,
// <unk> = 3 first, so vocab() is a standard qkv Vocab (see vocab.hpp) and nothing is remapped.
// encode() gives pieces ("▁Ein", "▁Mann", ...), decode() joins pieces back into plain text
// (detokenized: "▁" becomes a space, the leading one is dropped). Text is NFKC-normalized on
// the way in (SentencePiece's nmt_nfkc rule), so decode(encode(s)) == s for normalized s.
//
// Training is deterministic: one thread, a fixed seed, and the sentences in corpus order, so
// the same sentences and options give a byte-identical model.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/names.hpp"
#include "data/vocab.hpp"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace qkv::data {

// data.spm_type: SentencePiece's segmentation model.
enum class SpmType { unigram, bpe };
inline constexpr EnumName<SpmType> kSpmTypeNames[] = {{"unigram", SpmType::unigram},
                                                      {"bpe", SpmType::bpe}};
constexpr std::span<const EnumName<SpmType>> names_of(SpmType) { return kSpmTypeNames; }

struct SentencePieceOptions {
  int64_t vocab_size = 8000;  // pieces, the 4 specials included
  SpmType type = SpmType::unigram;
  double character_coverage = 1.0;
  uint64_t seed = 1;
};

class SentencePiece {
 public:
  // Trains a model on sentences (qkv::Error, naming the option, when SentencePiece refuses,
  // e.g. a vocabulary larger than the corpus supports).
  static SentencePiece train(const std::vector<std::string>& sentences,
                             const SentencePieceOptions& o);
  static SentencePiece load(const std::string& path);  // a .model file
  static SentencePiece from_serialized(std::string bytes, const std::string& name);

  std::vector<std::string> encode(std::string_view text) const;  // the best segmentation
  // Subword regularization: one segmentation of each text drawn at random (unigram: sampled
  // from the whole lattice with probabilities sharpened by alpha, Kudo 2018; bpe: BPE-dropout,
  // each merge skipped with probability alpha, Provilkov et al. 2020). alpha in (0, 1]. The same
  // texts, alpha and seed give the same pieces from any thread: SentencePiece keeps one random
  // generator per thread, seeded when the thread first samples, so the draws run on a thread of
  // their own whose generator starts at seed.
  std::vector<std::vector<std::string>> sample(const std::vector<std::string_view>& texts,
                                               double alpha, uint64_t seed) const;
  std::string decode(const std::vector<std::string>& pieces) const;
  Vocab vocab() const;  // every piece in id order
  // The model file's bytes (a serialized ModelProto), what save() writes.
  const std::string& serialized() const { return bytes_; }

 private:
  std::shared_ptr<const sentencepiece::SentencePieceProcessor> sp_;
  std::string bytes_;
};

}  // namespace qkv::data
