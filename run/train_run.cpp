#include "run/train_run.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/parallel.hpp"
#include "core/random.hpp"
#include "data/lm.hpp"
#include "run/family.hpp"
#include "run/limits.hpp"
#include "runfolder/average.hpp"
#include "runfolder/integrity.hpp"
#include "runfolder/provenance.hpp"

namespace qkv::run {

namespace fs = std::filesystem;

namespace {

// A folder holding nothing but .lock is not a run yet: a new run that failed before writing
// its config (a full disk) leaves it so, and running the same command again must start it.
bool folder_has_files(const fs::path& p) {
  if (!fs::exists(p)) return false;
  if (!fs::is_directory(p)) return true;
  for (const auto& e : fs::directory_iterator(p))
    if (e.path().filename() != ".lock") return true;
  return false;
}

// The config and folder: the run folder's own (--resume) or a new one's.
void read_config(TrainingRun& r, const TrainRunArgs& a, int rank) {
  if (!a.resume.empty()) {
    QKV_CHECK(a.config.empty() && a.config_text.empty() && a.overrides.empty(), "train",
              "--resume takes the run folder's own config; give no config file or overrides");
    const fs::path run_dir = a.resume;
    r.dir = run_dir.string();
    r.resuming = true;
    QKV_CHECK(
        fs::exists(run_dir / "config.toml"), "train", run_dir.string(),
        ": not a run folder (no config.toml; a run killed or failed before writing it has nothing"
        " to resume: run the same qkv train command again)");
    // One writer: taken before reading anything, so the checkpoint found below stays the newest.
    if (rank == 0 && !a.dry_run) r.lock.emplace(run_dir.string());
    r.config = config::load_config((run_dir / "config.toml").string());
    r.resume_from = find_checkpoint(run_dir.string());
    // Killed before its first checkpoint: config.toml fixes everything, so the run restarts
    // from step 0 and still ends exactly as an uninterrupted one.
    r.restart = r.resume_from.empty();
  } else {
    QKV_CHECK(!a.config.empty() || !a.config_text.empty(), "train",
              "no config file given (try configs/copy.toml)");
    r.config =
        a.config_text.empty()
            ? config::load_config(a.config, a.overrides)
            : config::config_from_toml(
                  config::parse_config(a.config_text, a.config.empty() ? "config.toml" : a.config),
                  a.overrides);
    const fs::path run_dir =
        a.run_dir.empty() ? fs::path("runs") / r.config.name : fs::path(a.run_dir);
    r.dir = run_dir.string();
    if (!folder_has_files(run_dir) || a.dry_run) return;
    QKV_CHECK(a.overwrite, "train", "run folder ", run_dir.string(),
              " already exists; resume it with --resume ", run_dir.string(),
              ", replace it with --overwrite, or choose another with --run-dir");
    // Only a run folder is replaced, never a folder that happens to be named.
    QKV_CHECK(fs::is_directory(run_dir) &&
                  (fs::exists(run_dir / "config.toml") || fs::exists(run_dir / ".lock")),
              "train", run_dir.string(),
              " is not a run folder (no config.toml); --overwrite replaces run folders only");
    // Taken now, so a training still writing it is found before any work; the old files go
    // once the new run has passed every check (create_folder).
    if (rank == 0) r.lock.emplace(run_dir.string());
    r.replace = true;
  }
}

// Data, model, optimizer and this rank's loader; the steps of an epoch and of the run.
void build(TrainingRun& r, int rank, int ranks) {
  const config::RunConfig& cfg = r.config;
  Generator init(cfg.seed);
  r.model = r.family().make_model(model_config(cfg, r.data), init);
  r.opt = optim::make_optimizer(cfg.optim.optim, r.model->checkpoint_parameters());
  r.loader = r.family().make_loader(cfg, r.data, rank, ranks);
  const int64_t batches = r.family().steps_per_epoch(cfg, r.data);
  QKV_CHECK(batches > 0, "train", "the training split of ", r.data.train.name, " is empty");
  // train.grad_accum: an optimizer step takes that many batches; an epoch is still one pass.
  r.per_epoch = (batches + cfg.train.grad_accum - 1) / cfg.train.grad_accum;
}

// The Trainer's options: the run's length (the task's), validations (once per epoch unless
// train.eval_every), clipping and the schedule.
train::TrainerOptions trainer_options(const config::RunConfig& cfg, const Family& task,
                                      int64_t per_epoch) {
  train::TrainerOptions o;
  o.total_steps = task.total_steps(cfg, per_epoch);
  o.eval_every = cfg.train.eval_every > 0 ? cfg.train.eval_every : per_epoch;
  o.checkpoint_every = cfg.checkpoint.every;
  o.clip_norm = cfg.optim.clip_norm;
  o.clip_value = cfg.optim.clip_value;
  o.skip_nonfinite = cfg.train.skip_nonfinite;
  o.grad_accum = cfg.train.grad_accum;
  // A cosine schedule without its length decays over the whole run (the saved config keeps 0).
  o.schedule = optim::fill_schedule(cfg.optim.schedule, 0, o.total_steps);
  return o;
}

}  // namespace

void open_training_run(TrainingRun& r, const TrainRunArgs& a, int rank, int ranks) {
  read_config(r, a, rank);
  // threads = 0 (all cores) is saved as the count it became: the run's bits depend on it.
  r.config.threads = apply_threads(r.config.threads, "threads");
  if (r.resuming && rank == 0)
    if (const std::string note = kernel_change(r.dir, "resume"); !note.empty())
      spdlog::warn("{}", note);
  // bf16 where it cannot run is an error before any data is read or generated.
  const Precision precision = choose_precision(std::nullopt, r.config.precision, "precision");
  if (rank != 0) spdlog::set_level(spdlog::level::err);  // data-parallel: rank 0 says it once
  check_data_memory(r.config);                           // before generating or reading anything
  r.config.data.spm_dir = r.dir;  // SentencePiece: a resumed run loads its own models
  r.data = data::load_data(r.config.data);
  r.family().check_positions(r.config, r.data);
  check_model_memory(r.config, r.data.src_vocab.size(), r.data.tgt_vocab.size());
  if (!r.resume_from.empty()) {
    // The run's own vocabularies: the model's ids mean these tokens.
    const data::Vocab sv = data::Vocab::load((fs::path(r.dir) / "src_vocab.txt").string());
    const data::Vocab tv = data::Vocab::load((fs::path(r.dir) / "tgt_vocab.txt").string());
    QKV_CHECK(
        sv == r.data.src_vocab && tv == r.data.tgt_vocab, "train", r.dir,
        ": the saved vocabularies differ from the data's; the data changed since the run began");
  }
  build(r, rank, ranks);
  r.family().check_probe_length(r.config, *r.model);
  r.options = trainer_options(r.config, r.family(), r.per_epoch);
  r.options.precision = precision;
  if (!r.resume_from.empty()) {
    r.state = load_checkpoint(r.resume_from, *r.model, r.opt.get());
    r.loader->restore(r.state.loader);
  }
}

namespace {

// A resumed folder: forget what was logged after the checkpoint (the resumed run logs it
// again); a log that lost lines is restored from the checkpoint's copy.
void repair_resumed(const TrainingRun& r, int ranks) {
  if (const std::string note = repair_metrics(r.dir, r.resume_from, r.state.metrics_bytes);
      !note.empty())
    spdlog::warn("{}", note);
  if (r.state.ranks != ranks)
    spdlog::warn(
        "{} was trained with {} process(es) and resumes with {}: the result matches an "
        "uninterrupted run to float rounding, not bit for bit",
        r.dir, r.state.ranks, ranks);
}

// The folder create_folder made for a new run (discard_unfinished_run).
struct NewFolder {
  std::mutex mu;
  std::string dir;  // "" when none
  bool existed = false;
};
NewFolder& new_folder() {
  static NewFolder f;
  return f;
}

bool holds_checkpoint(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir / "checkpoints", ec))
    if (e.path().filename().string().rfind("step-", 0) == 0) return true;
  return false;
}

void create_folder(TrainingRun& r) {
  const fs::path run_dir = r.dir;
  if (!r.restart) {
    NewFolder& f = new_folder();
    std::lock_guard<std::mutex> hold(f.mu);
    f.dir = r.dir, f.existed = fs::exists(run_dir);
  }
  if (r.replace) {
    // --overwrite: the old run's files go, the lock this process holds stays.
    for (const auto& e : fs::directory_iterator(run_dir))
      if (e.path().filename() != ".lock") fs::remove_all(e.path());
    spdlog::info("--overwrite: replaced the old run in {}", r.dir);
  }
  fs::create_directories(run_dir);
  if (!r.lock) {
    // A new run: two trainings started at once may both have seen no folder; the lock lets
    // one in, and the other then finds the folder in use (or already holding a run).
    r.lock.emplace(r.dir);
    for (const auto& e : fs::directory_iterator(run_dir))
      QKV_CHECK(e.path().filename() == ".lock", "train", "run folder ", r.dir,
                " already exists; resume it with --resume ", r.dir,
                ", or choose another with --run-dir");
  }
  if (!r.restart) {
    atomic_write_file((run_dir / "config.toml").string(), config::effective_toml(r.config));
    // What produced the run (runfolder/provenance.hpp); not in config.toml, which runs again as is.
    atomic_write_file(
        (run_dir / "provenance.json").string(),
        provenance(static_cast<int>(r.config.threads), r.config.precision, r.options.precision)
                .dump(2) +
            "\n");
  }
  // Atomic like every run file: a kill mid-write must not leave half a vocabulary.
  for (const auto& [file, vocab] : {std::pair{"src_vocab.txt", &r.data.src_vocab},
                                    std::pair{"tgt_vocab.txt", &r.data.tgt_vocab}}) {
    std::ostringstream text;
    vocab->write(text);
    atomic_write_file((run_dir / file).string(), text.str());
  }
  for (const auto& [file, bytes] : data::sentencepiece_files(r.data))
    atomic_write_file((run_dir / file).string(), bytes);
  if (r.restart && fs::exists(run_dir / "metrics.jsonl"))
    fs::resize_file(run_dir / "metrics.jsonl", 0);
}

void clean_checkpoints(const TrainingRun& r) {
  const fs::path run_dir = r.dir;
  // Half-written checkpoints of a killed run: never complete, never named, safe to drop.
  for (const auto& e : fs::directory_iterator(run_dir / "checkpoints"))
    if (const std::string n = e.path().filename().string();
        n.rfind(".tmp-", 0) == 0 || n.find(".tmp.") != std::string::npos)
      fs::remove_all(e.path());
  // A kill between naming a new best checkpoint and writing "best" leaves the pointer one
  // behind; the checkpoint's own state knows the best, and the final test uses the pointer.
  if (!r.state.best.empty() &&
      find_checkpoint(r.dir, "best") != (run_dir / "checkpoints" / r.state.best).string())
    atomic_write_file((run_dir / "checkpoints" / "best").string(), r.state.best + "\n");
}

}  // namespace

namespace testing {
namespace {
std::function<void()>& after_folder_hook() {
  static std::function<void()> hook;
  return hook;
}
}  // namespace
void set_after_folder(std::function<void()> hook) { after_folder_hook() = std::move(hook); }
void after_folder() {
  if (after_folder_hook()) after_folder_hook()();
}
}  // namespace testing

std::string discard_unfinished_run() {
  NewFolder& f = new_folder();
  std::lock_guard<std::mutex> hold(f.mu);
  const fs::path dir = f.dir;
  if (dir.empty() || holds_checkpoint(dir)) return "";
  std::error_code ec;
  if (!f.existed) {
    fs::remove_all(dir, ec);
  } else {
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().filename() != ".lock") fs::remove_all(e.path(), ec);
  }
  f.dir.clear();
  return dir.string();
}

void prepare_run_folder(TrainingRun& r, train::Distributed& dist) {
  // data-parallel: every rank has checked and read the run folder before rank 0 changes it.
  dist.barrier();
  if (!dist.is_root()) return;
  if (!r.resume_from.empty())
    repair_resumed(r, dist.size());
  else
    create_folder(r);
  if (r.resuming && fs::is_directory(fs::path(r.dir) / "checkpoints")) clean_checkpoints(r);
}

std::string load_final_weights(TrainingRun& r) {
  if (std::string averaged = load_final_average(r); !averaged.empty()) return averaged;
  const std::string best = find_checkpoint(r.dir, "best");
  if (!best.empty()) load_checkpoint(best, *r.model, nullptr);
  return "best checkpoint";
}

std::string load_final_average(TrainingRun& r) {
  const int64_t n = r.config.checkpoint.average_last;
  if (n == 0) return "";
  const std::vector<std::string> ckpts = last_checkpoints(r.dir, n, false);
  const std::string out = (fs::path(r.dir) / "checkpoints" / kAverageCheckpoint).string();
  average_checkpoints(ckpts, out);
  load_checkpoint(out, *r.model, nullptr);
  return fmt::format("average of the last {} checkpoints{}", ckpts.size(),
                     static_cast<int64_t>(ckpts.size()) < n
                         ? fmt::format(" (of {} asked: the run wrote {})", n, ckpts.size())
                         : "");
}

std::string run_summary(const TrainingRun& r, int ranks) {
  return fmt::format("{} {}: {} parameters, {}, {} steps ({} per epoch), {} threads{}",
                     r.restart               ? "restarting (no checkpoint yet)"
                     : r.resume_from.empty() ? "training"
                                             : "resuming",
                     r.dir, r.model->parameter_count(), r.family().split_sizes(r.data),
                     r.options.total_steps, r.per_epoch, get_num_threads(),
                     ranks > 1 ? fmt::format(" x {} processes (data-parallel)", ranks) : "");
}

}  // namespace qkv::run
