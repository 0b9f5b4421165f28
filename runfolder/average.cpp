#include "runfolder/average.hpp"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/atomic_file.hpp"
#include "core/bounded_json.hpp"
#include "core/error.hpp"
#include "runfolder/checkpoints.hpp"
#include "runfolder/integrity.hpp"

namespace qkv::run {

namespace fs = std::filesystem;

namespace {

// sum += x, element-wise in float64.
void accumulate(std::vector<double>& sum, const Tensor& x) {
  const std::vector<double> v = to_vector<double>(x.to(DType::f64).contiguous());
  for (size_t i = 0; i < v.size(); ++i) sum[i] += v[i];
}

}  // namespace

std::vector<std::string> last_checkpoints(const std::string& run_dir, int64_t n, bool exact) {
  QKV_CHECK(n >= 1, "average", "--last must be >= 1, got ", n);
  QKV_CHECK(fs::exists(fs::path(run_dir) / "config.toml"), "average", run_dir,
            ": not a run folder (no config.toml)");
  const fs::path dir = fs::path(run_dir) / "checkpoints";
  const std::vector<std::string> steps = step_checkpoints(run_dir);
  QKV_CHECK(!steps.empty(), "average", run_dir, ": no checkpoint in this run folder");
  const auto have = static_cast<int64_t>(steps.size());
  QKV_CHECK(!exact || have >= n, "average", run_dir, " keeps ", have, " checkpoint",
            have == 1 ? "" : "s", ", fewer than the last ", n,
            " asked (checkpoint.keep sets how many a run keeps)");
  std::vector<std::string> out;
  for (int64_t i = std::max<int64_t>(0, have - n); i < have; ++i)
    out.push_back((dir / steps[static_cast<size_t>(i)]).string());
  return out;
}

void average_checkpoints(const std::vector<std::string>& ckpts, const std::string& out_dir) {
  QKV_CHECK(!ckpts.empty(), "average", "no checkpoints to average");
  nn::NamedTensors first;
  std::vector<std::vector<double>> sums;
  CheckpointFiles newest;
  for (const std::string& c : ckpts) {
    CheckpointFiles files = read_checkpoint_files(c);
    const std::string path = files.path("model.safetensors");
    const nn::SafetensorsFile f = nn::parse_safetensors(files.get("model.safetensors"), path);
    if (const std::string bad = first_nonfinite(f.tensors); !bad.empty())
      throw Error(path + ": " + bad + "; this checkpoint cannot be averaged");
    if (first.empty()) {
      first = f.tensors;
      for (const auto& [name, t] : first) sums.emplace_back(static_cast<size_t>(t.numel()), 0.0);
    }
    QKV_CHECK(f.tensors.size() == first.size(), "average", path, " holds ", f.tensors.size(),
              " tensors, ", ckpts.front(), " ", first.size(), ": not checkpoints of one model");
    for (size_t i = 0; i < first.size(); ++i) {
      const auto& [name, t] = f.tensors[i];
      QKV_CHECK(name == first[i].first && t.shape() == first[i].second.shape() &&
                    t.dtype() == first[i].second.dtype(),
                "average", path, ": tensor ", name, " ", t.shape(), " does not match ",
                first[i].first, " ", first[i].second.shape(), " of ", ckpts.front());
      accumulate(sums[i], t);
    }
    newest = std::move(files);
  }
  nn::NamedTensors mean;
  const double n = static_cast<double>(ckpts.size());
  for (size_t i = 0; i < first.size(); ++i) {
    std::vector<double>& s = sums[i];
    for (double& x : s) x /= n;
    const Tensor& like = first[i].second;
    mean.emplace_back(first[i].first, from_vector<double>(s, like.shape()).to(like.dtype()));
  }
  // The folder is complete before it gets its name (as every checkpoint).
  const fs::path out(out_dir);
  const fs::path tmp = out.parent_path() / (".tmp-" + out.filename().string());
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  nn::save_safetensors((tmp / "model.safetensors").string(), mean,
                       {{"format", "qkv"}, {"averaged", std::to_string(ckpts.size())}});
  atomic_write_file((tmp / "optim.safetensors").string(), newest.get("optim.safetensors"));
  nlohmann::json state = parse_json(newest.get("state.json"),
                                    newest.path("state.json") + ": corrupt checkpoint state");
  state["averaged"] = nlohmann::json::array();
  for (const std::string& c : ckpts) state["averaged"].push_back(fs::path(c).filename().string());
  atomic_write_file((tmp / "state.json").string(), state.dump(2) + "\n");
  write_manifest(tmp.string());
  fs::remove_all(out);
  fs::rename(tmp, out);
}

}  // namespace qkv::run
