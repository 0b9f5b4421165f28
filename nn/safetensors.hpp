// safetensors files: the checkpoint format, readable by any safetensors loader.
//
// Layout: 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {"key": "value", ...},
//    "<name>": {"dtype": "F32" | "F64" | "I64" | "BOOL", "shape": [...],
//               "data_offsets": [begin, end]}, ...}
// then the data buffer; offsets are byte offsets into that buffer, row-major, little-endian.
// Loading validates everything before trusting it: a truncated file, a header that lies about
// sizes or offsets, an unknown dtype or malformed JSON is a qkv::Error naming the file and
// the problem, never an out-of-bounds read.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.hpp"

namespace qkv::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using Metadata = std::map<std::string, std::string>;

struct SafetensorsFile {
  NamedTensors tensors;  // in file order of their offsets
  Metadata metadata;
  const Tensor& get(const std::string& name) const;  // error naming the file if missing
  std::string path;
};

// Written atomically: to a temporary file beside path, fsync'ed, then renamed over path, so a
// crash leaves either the old file or the new one, never half of one.
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata = {});
SafetensorsFile load_safetensors(const std::string& path);
// Parses an in-memory file (the fuzz target and the loader share it). name is for messages.
SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& name);

}  // namespace qkv::nn
