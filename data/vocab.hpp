// Vocab: a list of tokens whose position is the token id, plus the reverse lookup.
//
// The standard layout starts with the specials <pad> = 0, <bos> = 1, <eos> = 2, <unk> = 3.
// A vocabulary may lack <bos>, <eos> or <unk> (the Annotated Transformer copy task has only
// <pad>), in which case their ids are -1; <pad>, when present, must be id 0 because batches
// pad with 0. Saved as plain text, one token per line in id order; a backslash, newline, CR or
// tab inside a token is written as the two characters backslash-backslash, backslash-n,
// backslash-r or backslash-t, so every token fits on one line (a space token is a line holding
// one space).
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <unordered_map>
#include <vector>

namespace qkv::data {

inline constexpr const char* kPad = "<pad>";
inline constexpr const char* kBos = "<bos>";
inline constexpr const char* kEos = "<eos>";
inline constexpr const char* kUnk = "<unk>";

class Vocab {
 public:
  Vocab();  // the four specials only
  // Exactly these tokens, in this order; duplicates are an error.
  explicit Vocab(std::vector<std::string> tokens);
  // The four specials followed by symbols.
  static Vocab with_specials(const std::vector<std::string>& symbols);
  // From tokenised sentences: the specials, then every token seen at least min_freq times, most
  // frequent first (ties by byte order, so the result does not depend on corpus order), cut so
  // the whole vocabulary has at most max_size entries (0 = no limit).
  static Vocab build(const std::vector<std::vector<std::string>>& corpus, int64_t min_freq = 1,
                     int64_t max_size = 0);

  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  const std::vector<std::string>& tokens() const { return tokens_; }
  bool contains(const std::string& token) const { return index_.count(token) != 0; }
  // The id of token; <unk> when absent (an error if the vocabulary has no <unk>).
  int64_t id(const std::string& token) const;
  const std::string& token(int64_t id) const;  // error if out of range

  int64_t pad() const { return pad_; }
  int64_t bos() const { return bos_; }
  int64_t eos() const { return eos_; }
  int64_t unk() const { return unk_; }
  bool is_special(int64_t id) const { return id == pad_ || id == bos_ || id == eos_ || id == unk_; }

  std::vector<int64_t> encode(const std::vector<std::string>& tokens) const;
  // Tokens of ids, stopping at the first <eos> and dropping <pad> and <bos> (model output is
  // decoded this way); keep_specials = true maps every id as it is.
  std::vector<std::string> decode(const std::vector<int64_t>& ids,
                                  bool keep_specials = false) const;

  void save(const std::string& path) const;
  static Vocab load(const std::string& path);
  // The text format on streams (save and load use these); name is used in messages.
  void write(std::ostream& out) const;
  static Vocab parse(std::istream& in, const std::string& name);

  bool operator==(const Vocab& o) const { return tokens_ == o.tokens_; }

 private:
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int64_t> index_;
  int64_t pad_ = -1, bos_ = -1, eos_ = -1, unk_ = -1;
};

}  // namespace qkv::data
