// Files read whole, and replaced whole or not at all: checkpoints, configs, metrics, figures and
// reports are written through this, so a crash or a full disk leaves either the old file or the new
// one, never half of one.
#pragma once
#include <string>

namespace qkv {

// Writes bytes to a temporary file beside path (path + ".tmp." + pid), fsyncs it, then renames
// it over path. On failure removes the temporary and throws qkv::Error naming the file and the
// system's reason; path is then untouched.
void atomic_write_file(const std::string& path, const std::string& bytes);

// The whole file's bytes; qkv::Error naming the file when it cannot be opened or read.
std::string read_whole_file(const std::string& path);

}  // namespace qkv
