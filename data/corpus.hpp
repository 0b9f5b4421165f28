// Parallel corpora in the tab-separated format of the Anki / Tatoeba sentence pairs:
//
//   source<TAB>target[<TAB>anything else]\n
//
// UTF-8, one pair per line; columns after the second (Tatoeba's attribution) are ignored; a
// trailing \r (CRLF files) and a UTF-8 byte-order mark on the first line are dropped; blank
// lines are ignored. A malformed line (no tab, an empty or all-space side, invalid UTF-8) is a
// qkv::Error naming the file and the 1-based line number, or, with skip_malformed, is skipped
// and counted.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "data/dataset.hpp"

namespace qkv::data {

struct TsvOptions {
  bool lowercase = false;       // lowercase both sides (see to_lower_utf8)
  bool skip_malformed = false;  // skip and count malformed lines instead of throwing
};

struct TsvCorpus {
  std::vector<TextPair> pairs;
  int64_t skipped = 0;                // malformed lines skipped
  std::vector<std::string> problems;  // "file:line: reason" of the first few skipped lines
};

TsvCorpus read_tsv(const std::string& path, const TsvOptions& o = {});
// As read_tsv; name is used in messages.
TsvCorpus parse_tsv(std::istream& in, const std::string& name, const TsvOptions& o = {});
// Writes pairs as source<TAB>target lines; a side holding a tab or newline is an error.
void write_tsv(const std::string& path, const std::vector<TextPair>& pairs);

// A seeded split of n items: a random permutation, the first test_size to test, the next
// valid_size to valid, then train_size (0 = all the rest) to train. Each list is sorted, so a
// split keeps the file's order within itself.
struct SplitIndices {
  std::vector<int64_t> train, valid, test;
};
SplitIndices split_indices(int64_t n, int64_t train_size, int64_t valid_size, int64_t test_size,
                           uint64_t seed);

}  // namespace qkv::data
