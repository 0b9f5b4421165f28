// Example and Dataset: what tasks and corpora produce and batches consume.
//
// An example is two token-id sequences: src, exactly what the encoder sees, and tgt = y, the
// target WITHOUT <bos> / <eos>; the batch frames it (see Framing). Datasets are immutable once
// built; the loader shares one through std::shared_ptr<const Dataset> with its prefetch thread.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/vocab.hpp"

namespace qkv::data {

using Ids = std::vector<int64_t>;

struct Example {
  Ids src;
  Ids tgt;
};

struct TextPair {
  std::string src, tgt;
};

struct Dataset {
  std::string name;  // "copy/train", "dates.tsv/test", ... for messages
  std::vector<Example> examples;
  std::vector<TextPair> text;  // the source text of each example when built from text, else empty
  int64_t size() const { return static_cast<int64_t>(examples.size()); }
};

// How a target y becomes the decoder's input and labels: full = <bos> y [<eos>],
// tgt_in = full[:-1], tgt_out = full[1:]. With an eos this is (<bos> y, y <eos>); with eos = -1
// (none) it is the Annotated Transformer's (tgt[:, :-1], tgt[:, 1:]) where y excludes the
// leading start symbol. Padding is always id 0.
struct Framing {
  int64_t bos = 1;
  int64_t eos = 2;  // -1: no end symbol
  // Length of tgt_in / tgt_out for a target of n tokens.
  int64_t target_len(int64_t n) const { return n + (eos >= 0 ? 1 : 0); }
};

// The framing of a vocabulary with the standard specials (its <bos> and <eos>).
inline Framing framing_for(const Vocab& v) {
  QKV_CHECK(v.bos() >= 0, "framing_for", "vocabulary has no ", kBos);
  return Framing{v.bos(), v.eos()};
}

}  // namespace qkv::data
