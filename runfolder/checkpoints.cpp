// A run folder's checkpoints (runfolder/checkpoints.hpp): written whole or not at all, found by
// their pointers, verified when read.
#include "runfolder/checkpoints.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/bounded_json.hpp"
#include "nn/safetensors.hpp"
#include "runfolder/integrity.hpp"
#include "runfolder/run_file.hpp"

namespace qkv::run {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", static_cast<long long>(step));
  return buf;
}

void fsync_dir(const fs::path& dir) {
  // Makes a rename inside dir durable. Best effort: some filesystems refuse to open dirs.
  if (FILE* f = std::fopen(dir.c_str(), "r")) {
    ::fsync(fileno(f));
    std::fclose(f);
  }
}

// A checkpoint pointer (latest, best): a name, so a few bytes; anything else is refused.
std::string read_pointer(const fs::path& p) {
  std::string s = read_run_file(p.string(), "checkpoint pointer", kMaxPointerBytes);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// JSON has no NaN or Inf (nlohmann writes null); a diverged run's losses can be either, so
// state.json spells them as strings and reads both forms back exactly.
json finite_or_string(double x) {
  if (std::isfinite(x)) return x;
  return std::isnan(x) ? "nan" : x > 0 ? "inf" : "-inf";
}
double number_from(const json& v) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "nan") return std::nan("");
    if (s == "inf") return HUGE_VAL;
    if (s == "-inf") return -HUGE_VAL;
    throw Error("expected a number, got \"" + s + "\"");
  }
  return v.get<double>();
}

// Removes checkpoint folder dir/name so that a kill midway never leaves a named, half-deleted
// checkpoint: it first loses its name (an atomic rename to .tmp-old-*), then its files.
void remove_checkpoint(const fs::path& dir, const std::string& name) {
  if (!fs::exists(dir / name)) return;
  const fs::path doomed = dir / (".tmp-old-" + name);
  fs::remove_all(doomed);
  fs::rename(dir / name, doomed);
  fs::remove_all(doomed);
}

bool complete(const fs::path& ckpt) {
  return fs::exists(ckpt / "model.safetensors") && fs::exists(ckpt / "optim.safetensors") &&
         fs::exists(ckpt / "state.json");
}

}  // namespace

std::string save_checkpoint(const std::string& run_dir, const nn::Model& model,
                            const optim::Optimizer& opt, const TrainState& st, int64_t keep,
                            bool is_best) {
  const fs::path dir = fs::path(run_dir) / "checkpoints";
  fs::create_directories(dir);
  const std::string name = step_name(st.step);
  const fs::path tmp = dir / (".tmp-" + name);
  fs::remove_all(tmp);
  fs::create_directories(tmp);

  nn::save_safetensors((tmp / "model.safetensors").string(), model.checkpoint_state(),
                       {{"format", "qkv"}, {"step", std::to_string(st.step)}});
  const optim::OptimState os = opt.state();
  nn::save_safetensors((tmp / "optim.safetensors").string(), os.tensors,
                       {{"optimizer", os.optimizer}});
  json j;
  j["step"] = st.step;
  j["epoch"] = st.epoch;
  j["loader"] = {{"epoch", st.loader.epoch},
                 {"index", st.loader.index},
                 {"rng_seed", st.loader.rng_seed},
                 {"rng_position", st.loader.rng_position}};
  j["dropout_rng"] = {{"seed", st.dropout_seed}, {"position", st.dropout_position}};
  j["best_score"] = finite_or_string(st.best_score);
  j["best_loss"] = finite_or_string(st.best_loss);
  j["evals_since_best"] = st.evals_since_best;
  j["metrics_bytes"] = st.metrics_bytes;
  j["ranks"] = st.ranks;
  j["best"] = is_best ? name : st.best;
  j["log_interval"] = {{"loss_sum", finite_or_string(st.log_loss_sum)},
                       {"norm_sum", finite_or_string(st.log_norm_sum)},
                       {"count", st.log_count}};
  j["optimizer"] = {{"name", os.optimizer}, {"scalars", os.scalars}};
  atomic_write_file((tmp / "state.json").string(), j.dump(2) + "\n");
  // The log as the checkpoint knows it (metrics_bytes long), on disk with the checkpoint, and a
  // copy inside it, from which --resume repairs a log that lost lines.
  const fs::path log = fs::path(run_dir) / "metrics.jsonl";
  if (fs::exists(log)) {
    fsync_file(log.string());
    const std::string text = RunFile(log.string(), "metrics log").read(0, st.metrics_bytes);
    QKV_CHECK(text.size() == st.metrics_bytes, "checkpoint", log.string(), " is shorter than the ",
              st.metrics_bytes, " bytes just logged");
    atomic_write_file((tmp / "metrics.jsonl").string(), text);
  }
  write_manifest(tmp.string());  // last: the sizes and checksums of every file above
  fsync_dir(tmp);

  const fs::path final_dir = dir / name;
  remove_checkpoint(dir, name);
  fs::rename(tmp, final_dir);
  fsync_dir(dir);
  atomic_write_file((dir / "latest").string(), name + "\n");
  const std::string best = is_best ? name : st.best;
  if (is_best) atomic_write_file((dir / "best").string(), name + "\n");

  // Keep the newest `keep` checkpoints, and the best.
  std::vector<std::string> steps;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory() && n.rfind("step-", 0) == 0) steps.push_back(n);
  }
  std::sort(steps.begin(), steps.end());
  for (size_t i = 0; i + static_cast<size_t>(keep) < steps.size(); ++i)
    if (steps[i] != best && steps[i] != name) remove_checkpoint(dir, steps[i]);
  return name;
}

std::vector<std::string> step_checkpoints(const std::string& run_dir) {
  const fs::path dir = fs::path(run_dir) / "checkpoints";
  std::vector<std::string> steps;
  if (!fs::is_directory(dir)) return steps;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory() && n.rfind("step-", 0) == 0 && complete(e.path())) steps.push_back(n);
  }
  std::sort(steps.begin(), steps.end());  // step-%08d: by step
  return steps;
}

std::string find_checkpoint(const std::string& run_dir, const std::string& which) {
  const fs::path dir = fs::path(run_dir) / "checkpoints";
  if (!fs::is_directory(dir)) return "";
  if (fs::exists(dir / which)) {
    const std::string n = read_pointer(dir / which);
    if (!n.empty() && n.find('/') == std::string::npos && complete(dir / n))
      return (dir / n).string();
  }
  const std::vector<std::string> steps = step_checkpoints(run_dir);
  return steps.empty() ? "" : (dir / steps.back()).string();
}

TrainState load_checkpoint(const std::string& ckpt_dir, nn::Model& model, optim::Optimizer* opt) {
  // Every file read once and checked against the manifest; then parsed from those bytes.
  const CheckpointFiles files = read_checkpoint_files(ckpt_dir);
  const std::string model_path = files.path("model.safetensors");
  const nn::SafetensorsFile mf = nn::parse_safetensors(files.get("model.safetensors"), model_path);
  if (const std::string bad = first_nonfinite(mf.tensors); !bad.empty())
    throw Error(model_path + ": " + bad + "; this checkpoint cannot be used");
  try {
    model.load_checkpoint_state(mf.tensors);
  } catch (const Error& e) {
    throw Error(model_path + ": does not fit this model's config: " + e.what());
  }
  const std::string state_path = files.path("state.json");
  try {
    const json j = parse_json(files.get("state.json"), state_path + ": corrupt checkpoint state");
    TrainState st;
    st.step = j.at("step").get<int64_t>();
    st.epoch = j.at("epoch").get<int64_t>();
    const json& l = j.at("loader");
    st.loader = {l.at("epoch").get<int64_t>(), l.at("index").get<int64_t>(),
                 l.at("rng_seed").get<uint64_t>(), l.at("rng_position").get<uint64_t>()};
    st.dropout_seed = j.at("dropout_rng").at("seed").get<uint64_t>();
    st.dropout_position = j.at("dropout_rng").at("position").get<uint64_t>();
    st.best_score = number_from(j.at("best_score"));
    st.best_loss = number_from(j.at("best_loss"));
    st.evals_since_best = j.at("evals_since_best").get<int64_t>();
    st.metrics_bytes = j.at("metrics_bytes").get<uint64_t>();
    st.ranks = j.value("ranks", int64_t{1});  // absent in checkpoints older than data parallelism
    st.best = j.at("best").get<std::string>();
    st.log_loss_sum = number_from(j.at("log_interval").at("loss_sum"));
    st.log_norm_sum = number_from(j.at("log_interval").at("norm_sum"));
    st.log_count = j.at("log_interval").at("count").get<int64_t>();
    model.dropout_generator().set_state(st.dropout_seed, st.dropout_position);
    if (opt) {
      optim::OptimState os;
      os.optimizer = j.at("optimizer").at("name").get<std::string>();
      os.scalars = j.at("optimizer").at("scalars").get<std::map<std::string, double>>();
      const std::string optim_path = files.path("optim.safetensors");
      os.tensors = nn::parse_safetensors(files.get("optim.safetensors"), optim_path).tensors;
      if (const std::string bad = first_nonfinite(os.tensors); !bad.empty())
        throw Error(optim_path + ": " + bad + "; this checkpoint cannot be used");
      opt->load_state(os);
    }
    return st;
  } catch (const json::exception& e) {
    throw Error(state_path + ": corrupt checkpoint state: " + json_message(e.what()));
  }
}

std::string resolve_checkpoint(const std::string& run_dir, const CheckpointSelector& which) {
  switch (which.kind) {
    case CheckpointKind::path:  // a checkpoint folder's path (qkv average --out)
      QKV_CHECK(
          complete(which.value), "--checkpoint", which.value,
          " is not a checkpoint folder (no model.safetensors, optim.safetensors, state.json)");
      return which.value;
    case CheckpointKind::step:
    case CheckpointKind::average: {
      const fs::path p = fs::path(run_dir) / "checkpoints" / which.text();
      QKV_CHECK(complete(p), "--checkpoint", run_dir, " has no checkpoint ", which.text());
      return p.string();
    }
    case CheckpointKind::best:
    case CheckpointKind::latest:
      break;
  }
  std::string c = find_checkpoint(run_dir, which.text());
  if (c.empty()) c = find_checkpoint(run_dir, "latest");
  if (c.empty()) throw Error(run_dir + ": no checkpoint in this run folder");
  return c;
}

std::string resolve_checkpoint(const std::string& run_dir, const std::string& which) {
  return resolve_checkpoint(run_dir, parse_checkpoint_selector(which));
}

}  // namespace qkv::run
