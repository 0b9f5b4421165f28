// Parallel corpora as two line-aligned files, the format of Marian, fairseq, OpenNMT and
// joeynmt: line i of the source file is translated by line i of the target file.
//
//   read_lines("val.de.gz")            every line of a plain or gzip-compressed UTF-8 file
//   read_parallel(src, tgt)            the pairs of two such files
//
// Plain and gzip files are told apart by their first two bytes (1f 8b), not by the name. A
// trailing \r (CRLF files) and a UTF-8 byte-order mark on the first line are dropped; a final
// newline does not start an empty line. Each problem is one qkv::Error naming the file (and
// the 1-based line): a missing file, a truncated or corrupt .gz, invalid UTF-8, a line-count
// mismatch between the two sides, an empty line (unless skip_empty: the pair is dropped and
// counted).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.hpp"

namespace qkv::data {

std::vector<std::string> read_lines(const std::string& path);

struct ParallelOptions {
  bool lowercase = false;   // lowercase both sides (see to_lower_utf8)
  bool skip_empty = false;  // drop pairs with an empty (or all-space) side instead of throwing
  int64_t limit = 0;        // > 0: only the first `limit` pairs
};

struct ParallelCorpus {
  std::vector<TextPair> pairs;
  int64_t skipped = 0;  // pairs dropped by skip_empty
};

ParallelCorpus read_parallel(const std::string& src_path, const std::string& tgt_path,
                             const ParallelOptions& o = {});

// The file of one side of a split in a corpus folder: dir/split.lang.gz when it exists, else
// dir/split.lang (which read_lines then reports missing when it is not there either).
std::string split_file(const std::string& dir, const std::string& split, const std::string& lang);

}  // namespace qkv::data
