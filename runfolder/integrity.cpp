#include "runfolder/integrity.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <vector>

#include "core/atomic_file.hpp"
#include "core/bounded_json.hpp"
#include "core/error.hpp"
#include "core/machine.hpp"
#include "runfolder/run_file.hpp"

namespace qkv::run {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kManifest = "manifest.json";
// Every checkpoint holds these; the manifest may list more (metrics.jsonl).
const char* const kRequired[] = {"model.safetensors", "optim.safetensors", "state.json"};

template <class T>
int64_t count_nonfinite(const Tensor& t) {
  const Tensor c = t.contiguous();
  const T* p = c.data<T>();
  int64_t n = 0;
  for (int64_t i = 0; i < c.numel(); ++i) n += !std::isfinite(p[i]);
  return n;
}

// A checkpoint without a manifest (an older qkv's) has no recorded sizes: its files may be as
// large as the memory available, no larger.
uint64_t unverified_bound() {
  return static_cast<uint64_t>(std::max(available_memory().available, 1.0));
}

}  // namespace

std::string json_message(const std::string& what) { return detail::json_reason(what); }

const std::string& CheckpointFiles::get(const std::string& name) const {
  auto it = bytes.find(name);
  if (it == bytes.end()) throw Error(path(name) + ": missing from the checkpoint");
  return it->second;
}

std::string xxh3_hex(const std::string& bytes) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(bytes.data(), bytes.size())));
  return buf;
}

void write_manifest(const std::string& dir) {
  json files = json::object();
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() != kManifest)
      names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    const std::string b = read_whole_file(dir + "/" + n);
    files[n] = {{"bytes", b.size()}, {"xxh3", xxh3_hex(b)}};
  }
  const json m = {{"algorithm", "xxh3-64"}, {"files", files}};
  atomic_write_file(dir + "/" + kManifest, m.dump(2) + "\n");
}

CheckpointFiles read_checkpoint_files(const std::string& dir) {
  CheckpointFiles f;
  f.dir = dir;
  const std::string mpath = dir + "/" + kManifest;
  if (!fs::exists(mpath)) {  // an older qkv's checkpoint: read as is, within memory
    const uint64_t most = unverified_bound();
    for (const char* n : kRequired) f.bytes[n] = read_run_file(f.path(n), "checkpoint file", most);
    if (fs::exists(f.path("metrics.jsonl")))
      f.bytes["metrics.jsonl"] = read_run_file(f.path("metrics.jsonl"), "checkpoint file", most);
    return f;
  }
  json m;
  try {
    m = parse_json(read_run_file(mpath, "checkpoint manifest", kMaxSmallJsonBytes),
                   mpath + ": corrupt checkpoint manifest");
    if (m.at("algorithm") != "xxh3-64")
      throw Error(mpath + ": unknown checksum algorithm " + m.at("algorithm").dump());
    for (const auto& [name, rec] : m.at("files").items()) {
      if (name.find('/') != std::string::npos || name == kManifest || name.empty())
        throw Error(mpath + ": corrupt checkpoint manifest: bad file name '" + name + "'");
      const uint64_t size = rec.at("bytes").get<uint64_t>();
      const std::string want = rec.at("xxh3").get<std::string>();
      const std::string path = f.path(name);
      if (!fs::exists(path))
        throw Error(path + ": missing (the checkpoint's manifest.json lists it)");
      // Its recorded size is its bound: a larger file is refused before any of it is read.
      const RunFile file(path, "checkpoint file");
      if (file.size() != size)
        throw Error(path + ": damaged: " + std::to_string(file.size()) + " bytes, the checkpoint " +
                    "recorded " + std::to_string(size) + " (manifest.json)");
      std::string b = file.read(0, size);
      if (b.size() != size)
        throw Error(path + ": damaged: it got shorter while read (" + std::to_string(b.size()) +
                    " of the " + std::to_string(size) + " bytes recorded in manifest.json)");
      const std::string got = xxh3_hex(b);
      if (got != want)
        throw Error(path + ": damaged: its checksum is xxh3 " + got + ", the checkpoint recorded " +
                    want + " (manifest.json); the file changed after it was written");
      f.bytes[name] = std::move(b);
    }
  } catch (const json::exception& e) {
    throw Error(mpath + ": corrupt checkpoint manifest: " + json_message(e.what()));
  }
  for (const char* n : kRequired)
    if (!f.bytes.count(n)) throw Error(mpath + ": corrupt checkpoint manifest: " + n + " missing");
  f.verified = true;
  return f;
}

std::string first_nonfinite(const nn::NamedTensors& tensors) {
  for (const auto& [name, t] : tensors) {
    int64_t bad = 0;
    if (t.dtype() == DType::f32)
      bad = count_nonfinite<float>(t);
    else if (t.dtype() == DType::f64)
      bad = count_nonfinite<double>(t);
    if (bad > 0)
      return "tensor '" + name + "' holds " + std::to_string(bad) + " NaN or Inf value" +
             (bad > 1 ? "s" : "") + " (of " + std::to_string(t.numel()) + ")";
  }
  return "";
}

std::string last_good_checkpoint(const std::string& run_dir) {
  const fs::path dir = fs::path(run_dir) / "checkpoints";
  if (!fs::is_directory(dir)) return "";
  std::vector<std::string> steps;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory() && n.rfind("step-", 0) == 0) steps.push_back(n);
  }
  std::sort(steps.rbegin(), steps.rend());
  for (const std::string& n : steps) {
    const std::string ckpt = (dir / n).string();
    try {
      const CheckpointFiles f = read_checkpoint_files(ckpt);
      if (!f.verified) continue;
      const nn::SafetensorsFile m =
          nn::parse_safetensors(f.get("model.safetensors"), f.path("model.safetensors"));
      if (first_nonfinite(m.tensors).empty()) return ckpt;
    } catch (const Error&) {
    }
  }
  return "";
}

void fsync_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

std::string repair_metrics(const std::string& run_dir, const std::string& ckpt,
                           uint64_t metrics_bytes) {
  const std::string log = run_dir + "/metrics.jsonl";
  const bool exists = fs::exists(fs::symlink_status(log));
  std::optional<RunFile> file;  // a FIFO or a device here is refused, never waited on
  if (exists) file.emplace(log, "metrics log");
  const uint64_t size = exists ? file->size() : 0;
  const CheckpointFiles f = read_checkpoint_files(ckpt);
  const auto saved = f.bytes.find("metrics.jsonl");
  const bool have_copy = saved != f.bytes.end() && saved->second.size() == metrics_bytes;
  const std::string name = fs::path(ckpt).filename().string();
  if (exists && size >= metrics_bytes) {
    // The usual case: lines logged after the checkpoint are dropped (the run logs them again).
    if (!have_copy || file->read(0, metrics_bytes) == saved->second) {
      fs::resize_file(log, metrics_bytes);
      return "";
    }
    atomic_write_file(log, saved->second);
    return log + " did not begin with the log checkpoint " + name +
           " recorded; restored the checkpoint's copy (" + std::to_string(metrics_bytes) +
           " bytes)";
  }
  const std::string what = exists ? "is " + std::to_string(size) + " bytes, shorter than the " +
                                        std::to_string(metrics_bytes) + " bytes checkpoint " +
                                        name + " recorded"
                                  : "is missing (checkpoint " + name + " recorded " +
                                        std::to_string(metrics_bytes) + " bytes)";
  if (!have_copy)
    throw Error("train: " + log + " " + what +
                ", and that checkpoint (written by an older qkv) holds no copy of the log to "
                "restore it from; put the file back, or start the run again");
  atomic_write_file(log, saved->second);
  return log + " " + what + "; restored it from the checkpoint's copy";
}

}  // namespace qkv::run
