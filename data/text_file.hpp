// Reading a whole text corpus into memory, plain or gzip-compressed.
//
// A file that starts with the gzip magic bytes (1f 8b) is inflated with zlib whatever its
// name; anything else is read as it is. Regular files and pipes are read (`<(zcat x.gz)`);
// devices and directories are refused, and a FIFO nobody writes reads as empty rather than
// waiting (core/input_file.hpp). The text read (after inflating) is bounded: at most
// rules.max_bytes, and no line longer than rules.max_line when that is set. Errors name the
// file: missing, unreadable, too large, a line too long, or a corrupt or truncated gzip stream.
#pragma once
#include <cstdint>
#include <string>

#include "core/input_file.hpp"

namespace qkv::data {

// A line-based corpus (TSV, parallel files, references): no line longer than 1 MiB.
inline constexpr uint64_t kMaxCorpusLine = uint64_t{1} << 20;

// The rules of a corpus: pipes allowed, at most 2 GiB, lines bounded when max_line > 0.
InputRules corpus_rules(uint64_t max_line = 0);

std::string read_text_file(const std::string& path, const InputRules& rules = corpus_rules());

}  // namespace qkv::data
