// Checkpoint integrity: every checkpoint folder holds manifest.json, the size and xxHash (XXH3,
// 64 bits) of each of its files, written last (before the folder gets its name). Loading reads
// each file once into memory, checks it against the manifest, and parses those same bytes, so
// a flipped bit, a truncated or swapped file is one clear error naming the file, and a reader
// never mixes files of two checkpoints. Parameters must be finite as well.
//
// A checkpoint also keeps a copy of metrics.jsonl as it was when it was written, so --resume
// can repair a log that a crash or a person shortened or removed.
#pragma once
#include <map>
#include <string>

#include "nn/safetensors.hpp"

namespace qkv::run {

// The checkpoint's files, read once; verified is false for a checkpoint without manifest.json
// (written by an older qkv).
struct CheckpointFiles {
  std::string dir;
  std::map<std::string, std::string> bytes;  // "model.safetensors" -> its contents
  bool verified = false;
  const std::string& get(const std::string& name) const;  // error naming the file if absent
  std::string path(const std::string& name) const { return dir + "/" + name; }
};

// XXH3-64 of bytes, as 16 hex digits.
std::string xxh3_hex(const std::string& bytes);
// Writes dir/manifest.json for every regular file in dir (except itself), atomically.
void write_manifest(const std::string& dir);
// Reads and verifies a checkpoint's files; throws qkv::Error naming the damaged file.
CheckpointFiles read_checkpoint_files(const std::string& dir);
// The first tensor holding NaN or Inf ("" when all are finite), with how many values.
std::string first_nonfinite(const nn::NamedTensors& tensors);
// The newest checkpoint of run_dir that verifies (manifest and finite weights); "" if none.
std::string last_good_checkpoint(const std::string& run_dir);
// Flushes a file's data to disk (best effort for files that do not exist).
void fsync_file(const std::string& path);
// --resume: makes RUN/metrics.jsonl the log as checkpoint ckpt recorded it (metrics_bytes long):
// cut back when longer, restored from the checkpoint's copy when shorter, missing or different;
// throws a qkv::Error saying why when it cannot. Returns a message for the user ("" if none).
std::string repair_metrics(const std::string& run_dir, const std::string& ckpt,
                           uint64_t metrics_bytes);

}  // namespace qkv::run

namespace qkv::run {
// nlohmann's exception text without its "[json.exception.parse_error.101] " prefix.
std::string json_message(const std::string& what);
}  // namespace qkv::run
