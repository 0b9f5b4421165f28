// qkv train CONFIG [--run-dir DIR] [--section.key VALUE ...]   |   qkv train --resume DIR
//
// Under `mpirun -np N` this trains data-parallel (docs/distributed.md): every rank holds the
// same model, takes its shard of the same global batch and sums gradients with the others;
// rank 0 alone writes the run folder, validates and prints. The parts that differ from a
// single process are marked "data-parallel".
#include <spdlog/spdlog.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "apps/commands.hpp"
#include "run/distributed.hpp"
#include "run/integrity.hpp"
#include "run/limits.hpp"
#include "run/lm.hpp"
#include "run/run.hpp"
#include "run/run_lock.hpp"
#include "core/parallel.hpp"
#include "core/random.hpp"
#include "data/lm.hpp"
#include "data/loader.hpp"
#include "figures/attention_stats.hpp"
#include "figures/plot.hpp"
#include "figures/progress.hpp"
#include "nn/safetensors.hpp"
#include "optim/clip.hpp"
#include "optim/schedule.hpp"

namespace qkv::app {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace figures;

namespace {

// SIGINT (Ctrl-C), SIGTERM (docker stop, systemd, job schedulers) and SIGHUP (a closed
// terminal) all end the run at the next step boundary with a checkpoint; the exit code is
// 128 + the signal, as a shell reports a process killed by it.
std::atomic<bool> g_interrupted{false};
std::atomic<int> g_signal{0};
// A second signal ends the process at once (the first may be waiting on a stuck step).
void on_stop_signal(int sig) {
  int none = 0;
  if (!g_signal.compare_exchange_strong(none, sig)) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_interrupted = true;
}

// metrics.jsonl, appended one record per line and flushed, so a crash loses at most a line.
class MetricsLog {
 public:
  explicit MetricsLog(const fs::path& path) : path_(path), out_(path, std::ios::app) {
    QKV_CHECK(out_.good(), "train", "cannot write ", path.string());
  }
  void write(const json& j) {
    out_ << j.dump() << '\n';
    out_.flush();
  }
  uint64_t bytes() { return static_cast<uint64_t>(fs::file_size(path_)); }

 private:
  fs::path path_;
  std::ofstream out_;
};

// loss.svg from metrics.jsonl: the training loss and the validation loss against steps.
void plot_losses(const fs::path& run_dir) {
  std::ifstream in(run_dir / "metrics.jsonl");
  Series train{"train loss", {}, {}, ""}, valid{"valid loss", {}, {}, ""};
  std::string line;
  while (std::getline(in, line)) {
    try {
      const json j = json::parse(line);
      if (!j.contains("split")) {
        train.x.push_back(j.at("step").get<double>());
        train.y.push_back(j.at("loss").get<double>());
      } else if (j.at("split") == "valid") {
        valid.x.push_back(j.at("step").get<double>());
        valid.y.push_back(j.at("loss").get<double>());
      }
    } catch (const json::exception&) {
    }
  }
  LineChart c{"Loss", "step", "cross-entropy (nats / token)", false, false, {train, valid}};
  write_svg((run_dir / "loss.svg").string(), c);
}

// Learned positions end at model.max_len: refuse data that needs more before the run folder
// exists, rather than failing at the first long batch (or at validation) mid-run.
void check_positions(const RunConfig& cfg, const data::DataSplits& d) {
  // lm: block_size <= max_len, checked with the config
  if (cfg.model.position != "learned" || cfg.data.task == "lm") return;
  int64_t need = 0;
  std::string where;
  auto consider = [&](const data::Dataset& ds, bool decoded) {
    for (size_t i = 0; i < ds.examples.size(); ++i) {
      const auto& e = ds.examples[i];
      const int64_t src = static_cast<int64_t>(e.src.size()),
                    tgt = static_cast<int64_t>(e.tgt.size());
      int64_t n = std::max(src, d.framing.target_len(tgt));
      // validation decodes up to the longer side plus train.max_decode_extra tokens
      if (decoded && d.framing.eos >= 0)
        n = std::max(n, std::max(tgt, src) + cfg.train.max_decode_extra);
      if (n > need) {
        need = n;
        where = fmt::format("{} example {}", ds.name, i + 1);
      }
    }
  };
  consider(d.train, false);
  consider(d.valid, true);
  consider(d.test, true);
  QKV_CHECK(need <= cfg.model.max_len, "model.max_len", "learned positions cover ",
            cfg.model.max_len, " tokens, but ", where, " needs ", need,
            " (with <bos>/<eos> and train.max_decode_extra); raise model.max_len or drop long pairs"
            " with data.max_seq_len");
}

bool folder_has_files(const fs::path& p) {
  return fs::exists(p) && (!fs::is_directory(p) || !fs::is_empty(p));
}

// --- data-parallel helpers ---

// Sum of every parameter value: equal on all ranks while the replicas agree (checked at
// each checkpoint).
double param_checksum(const std::vector<ag::Var>& params) {
  double s = 0;
  for (const ag::Var& p : params)
    for (float v : to_vector<float>(p.data())) s += v;
  return s;
}

// Rank r draws its dropout masks of step `step` from its own stream, a pure function of
// (seed, rank, step): independent across ranks and resumable without saving every rank's
// generator. (One process keeps the model's single running stream, as before.)
void seed_dropout_for_step(nn::Seq2Seq& model, uint64_t seed, int rank, int64_t step) {
  const uint64_t stream = random_bits(seed ^ 0x64726f706f7574ULL, static_cast<uint64_t>(rank));
  model.dropout_generator().set_state(stream, static_cast<uint64_t>(step) << 32);
}

// Each layer's attention entropy over the global batch, approximated as the mean of the
// ranks' values weighted by their rows (a rank with an empty shard has no maps).
std::vector<double> global_entropy(const std::vector<ag::Var>& maps, size_t layers, int64_t rows,
                                   int64_t global_rows) {
  std::vector<double> e(layers, 0.0);
  if (!maps.empty()) {
    const std::vector<double> mine = attention_entropy(maps);
    for (size_t i = 0; i < layers && i < mine.size(); ++i)
      e[i] = mine[i] * static_cast<double>(rows) / static_cast<double>(global_rows);
  }
  dist::allreduce_sum(e.data(), static_cast<int64_t>(e.size()));
  return e;
}

}  // namespace

int cmd_train(const TrainArgs& a) {
  std::optional<RunLock> lock;  // held while this process writes the run folder
  RunConfig cfg;
  fs::path run_dir;
  std::string resume_from;
  bool restart = false;  // --resume of a run that has no checkpoint yet
  if (!a.resume.empty()) {
    QKV_CHECK(a.config.empty() && a.overrides.empty(), "train",
              "--resume takes the run folder's own config; give no config file or overrides");
    run_dir = a.resume;
    QKV_CHECK(
        fs::exists(run_dir / "config.toml"), "train", run_dir.string(),
        ": not a run folder (no config.toml; a run killed before writing it has nothing to resume:"
        " delete the folder and start again)");
    // One writer: taken before reading anything, so the checkpoint found below stays the newest.
    if (dist::rank() == 0) lock.emplace(run_dir.string());
    cfg = load_config((run_dir / "config.toml").string());
    resume_from = find_checkpoint(run_dir.string());
    // Killed before its first checkpoint: config.toml fixes everything, so the run restarts
    // from step 0 and still ends exactly as an uninterrupted one.
    restart = resume_from.empty();
  } else {
    QKV_CHECK(!a.config.empty(), "train", "no config file given (try configs/copy.toml)");
    cfg = load_config(a.config, a.overrides);
    run_dir = a.run_dir.empty() ? fs::path("runs") / cfg.name : fs::path(a.run_dir);
    QKV_CHECK(!folder_has_files(run_dir), "train", "run folder ", run_dir.string(),
              " already exists; resume it with --resume ", run_dir.string(),
              ", or choose another with --run-dir");
  }
  apply_threads(cfg.threads, "threads");
  // data-parallel: rank 0 of 1 unless started by mpirun
  const int rank = dist::rank(), ranks = dist::size();
  const bool root = rank == 0;
  if (!root) spdlog::set_level(spdlog::level::err);  // rank 0 says it once

  check_data_memory(cfg);  // before generating or reading anything
  cfg.data.spm_dir = run_dir.string();  // SentencePiece: a resumed run loads its own models
  data::DataSplits data = data::load_data(cfg.data);
  check_positions(cfg, data);
  check_model_memory(cfg, data.src_vocab.size(), data.tgt_vocab.size());
  const bool text_task = !is_symbol_task(cfg.data);
  if (!resume_from.empty()) {
    // The run's own vocabularies: the model's ids mean these tokens.
    const data::Vocab sv = data::Vocab::load((run_dir / "src_vocab.txt").string());
    const data::Vocab tv = data::Vocab::load((run_dir / "tgt_vocab.txt").string());
    QKV_CHECK(
        sv == data.src_vocab && tv == data.tgt_vocab, "train", run_dir.string(),
        ": the saved vocabularies differ from the data's; the data changed since the run began");
  }
  Generator init(cfg.seed);
  nn::Seq2Seq model(model_config(cfg, data), init);
  auto opt = optim::make_optimizer(cfg.optim.optim, model.named_parameters());
  const std::vector<ag::Var> params = model.parameters();
  auto train_set = std::make_shared<const data::Dataset>(data.train);
  data::LoaderOptions lopt = data::loader_options(cfg.data);
  lopt.shard_rank = rank;  // data-parallel: this rank's rows of every global batch
  lopt.shard_count = ranks;
  // A language model (data.task = "lm") trains on windows at random offsets of one token
  // stream; an "epoch" is then as many tokens as the training text.
  const bool lm = cfg.data.task == "lm";
  std::unique_ptr<data::BatchSource> loader;
  if (lm)
    loader = std::make_unique<data::LmLoader>(std::make_shared<const data::Ids>(data.lm_train),
                                              cfg.data.block_size, cfg.data.batch_size, cfg.seed,
                                              rank, ranks);
  else
    loader = std::make_unique<data::Loader>(train_set, data.framing, lopt, cfg.seed);
  dist::GradReducer reducer(params);

  // Steps per epoch, from the first epoch's plan (a copy of the loader's generator).
  Generator plan_gen(cfg.seed);
  const int64_t per_epoch =
      lm ? std::max<int64_t>(1, static_cast<int64_t>(data.lm_train.size()) /
                                    (cfg.data.batch_size * cfg.data.block_size))
         : static_cast<int64_t>(
               data::plan_batches(*train_set, data.framing, lopt.batch, plan_gen).size());
  QKV_CHECK(per_epoch > 0, "train", "the training split of ", data.train.name, " is empty");
  // epochs = 0 with max_steps: as many epochs as max_steps takes; lm: max_steps alone, when
  // set, is the run's length (nanoGPT's max_iters)
  const int64_t total =
      cfg.train.epochs == 0 || (lm && cfg.train.max_steps > 0) ? cfg.train.max_steps
      : cfg.train.max_steps > 0 ? std::min(cfg.train.max_steps, cfg.train.epochs * per_epoch)
                                : cfg.train.epochs * per_epoch;
  const int64_t eval_every = cfg.train.eval_every > 0 ? cfg.train.eval_every : per_epoch;
  // A cosine schedule without its length decays over the whole run (the saved config keeps 0).
  optim::ScheduleConfig schedule = cfg.optim.schedule;
  if (schedule.name == "cosine" && schedule.total_steps == 0) {
    schedule.total_steps = total;
    QKV_CHECK(total > schedule.warmup, "optim.warmup", schedule.warmup,
              " warmup steps do not fit in a run of ", total, " steps");
  }

  TrainState st;
  if (!resume_from.empty()) {
    st = load_checkpoint(resume_from, model, opt.get());
    loader->restore(st.loader);
  }
  // data-parallel: every rank has checked and read the run folder before rank 0 changes it.
  dist::barrier();
  if (root && !resume_from.empty()) {
    // Forget what was logged after the checkpoint (the resumed run logs it again); a log that
    // lost lines is restored from the checkpoint's copy.
    if (const std::string note = repair_metrics(run_dir.string(), resume_from, st.metrics_bytes);
        !note.empty())
      spdlog::warn("{}", note);
    if (st.ranks != ranks)
      spdlog::warn(
          "{} was trained with {} process(es) and resumes with {}: the result matches an "
          "uninterrupted run to float rounding, not bit for bit",
          run_dir.string(), st.ranks, ranks);
  } else if (root) {
    fs::create_directories(run_dir);
    if (!lock) {
      // A new run: two trainings started at once may both have seen no folder; the lock lets
      // one in, and the other then finds the folder in use (or already holding a run).
      lock.emplace(run_dir.string());
      for (const auto& e : fs::directory_iterator(run_dir))
        QKV_CHECK(e.path().filename() == ".lock", "train", "run folder ", run_dir.string(),
                  " already exists; resume it with --resume ", run_dir.string(),
                  ", or choose another with --run-dir");
    }
    if (!restart) nn::atomic_write_file((run_dir / "config.toml").string(), effective_toml(cfg));
    // Atomic like every run file: a kill mid-write must not leave half a vocabulary.
    for (const auto& [file, vocab] : {std::pair{"src_vocab.txt", &data.src_vocab},
                                      std::pair{"tgt_vocab.txt", &data.tgt_vocab}}) {
      std::ostringstream text;
      vocab->write(text);
      nn::atomic_write_file((run_dir / file).string(), text.str());
    }
    for (const auto& [file, bytes] : data::sentencepiece_files(data))
      nn::atomic_write_file((run_dir / file).string(), bytes);
    if (restart && fs::exists(run_dir / "metrics.jsonl"))
      fs::resize_file(run_dir / "metrics.jsonl", 0);
  }
  if (root && !a.resume.empty() && fs::is_directory(run_dir / "checkpoints")) {
    // Half-written checkpoints of a killed run: never complete, never named, safe to drop.
    for (const auto& e : fs::directory_iterator(run_dir / "checkpoints"))
      if (const std::string n = e.path().filename().string();
          n.rfind(".tmp-", 0) == 0 || n.find(".tmp.") != std::string::npos)
        fs::remove_all(e.path());
    // A kill between naming a new best checkpoint and writing "best" leaves the pointer one
    // behind; the checkpoint's own state knows the best, and the final test uses the pointer.
    if (!st.best.empty() &&
        find_checkpoint(run_dir.string(), "best") != (run_dir / "checkpoints" / st.best).string())
      nn::atomic_write_file((run_dir / "checkpoints" / "best").string(), st.best + "\n");
  }
  std::optional<MetricsLog> metrics;  // data-parallel: rank 0's alone
  if (root) metrics.emplace(run_dir / "metrics.jsonl");
  Progress progress(total, st.step, cfg.train.log_every, a.quiet || !root, a.verbose && root);
  progress.message(fmt::format(
      "{} {}: {} parameters, {} train / {} valid {}, {} steps ({} per epoch), {} threads{}",
      restart               ? "restarting (no checkpoint yet)"
      : resume_from.empty() ? "training"
                            : "resuming",
      run_dir.string(), model.parameter_count(), lm ? data.lm_train.size() : data.train.size(),
      lm ? data.lm_valid.size() : data.valid.size(), lm ? "tokens" : "examples", total, per_epoch,
      get_num_threads(), ranks > 1 ? fmt::format(" x {} processes (data-parallel)", ranks) : ""));

  double loss_sum = st.log_loss_sum, norm_sum = st.log_norm_sum;
  int64_t loss_n = st.log_count, tokens = 0;
  int64_t saved_step = -1;
  auto checkpoint = [&](bool is_best) {
    st.log_loss_sum = loss_sum;  // a log interval may span the checkpoint
    st.log_norm_sum = norm_sum;
    st.log_count = loss_n;
    saved_step = st.step;
    st.loader = loader->state();
    st.dropout_seed = model.dropout_generator().seed();
    st.dropout_position = model.dropout_generator().position();
    st.ranks = ranks;
    // data-parallel: a cheap guard that the replicas still agree (a no-op for one process)
    dist::check_same_on_all_ranks(param_checksum(params), "the sum of the parameters");
    if (!root) return std::string();
    // A checkpoint is only ever written from finite weights, so "last good" stays true. (The
    // next step's loss is then non-finite too: it stops the run, or is skipped.)
    if (const std::string bad = first_nonfinite(model.state_dict()); !bad.empty()) {
      spdlog::warn("step {}: the parameters are no longer finite ({}); no checkpoint written",
                   st.step, bad);
      return std::string();
    }
    st.metrics_bytes = metrics->bytes();
    const std::string name =
        save_checkpoint(run_dir.string(), model, *opt, st, cfg.checkpoint.keep, is_best);
    if (is_best) st.best = name;
    return name;
  };
  // nanoGPT's estimate_loss: eval_iters random batches of each split, drawn from a generator
  // of (seed, step), so a resumed run estimates exactly as an uninterrupted one.
  auto validate_lm = [&]() {
    Generator g(random_bits(cfg.seed ^ 0x65737469ULL, static_cast<uint64_t>(st.step)));
    const int64_t bs = cfg.data.block_size, b = cfg.data.batch_size, it = cfg.train.eval_iters;
    const double train_loss = lm_loss_estimate(model, data.lm_train, bs, b, it, g);
    const double loss = lm_loss_estimate(model, data.lm_valid, bs, b, it, g);
    metrics->write({{"step", st.step},
                    {"split", "valid"},
                    {"loss", loss},
                    {"train_loss", train_loss},
                    {"batches", it}});
    const bool better = loss < st.best_loss;
    if (better) {
      st.best_loss = loss;
      st.evals_since_best = 0;
    } else {
      ++st.evals_since_best;
    }
    progress.message(fmt::format("step {}: train loss {:.4f}, val loss {:.4f}{}", st.step,
                                 train_loss, loss, better ? "  (best)" : ""));
    return better;
  };
  auto validate = [&]() -> bool {  // returns whether to stop early
    bool better = false;
    if (root && lm) {
      better = validate_lm();
    } else if (root) {  // data-parallel: rank 0 validates alone (the numbers of one process)
      const Metrics m =
          evaluate(model, data.valid, data.framing, cfg.data.batch_size, cfg.train.max_decode_extra,
                   cfg.train.eval_examples, text_task ? &data : nullptr);
      json j = {{"step", st.step},
                {"epoch", st.epoch},
                {"split", "valid"},
                {"loss", m.loss},
                {"token_accuracy", m.token_accuracy},
                {"exact_match", m.exact_match},
                {"examples", m.examples}};
      if (m.bleu >= 0) j["bleu"] = m.bleu, j["chrf"] = m.chrf;
      metrics->write(j);
      // train.best_metric: the score to beat (higher is better); ties go to the lower loss
      const double score = cfg.train.best_metric == "bleu"   ? m.bleu
                           : cfg.train.best_metric == "loss" ? -m.loss
                                                             : m.exact_match;
      better = score > st.best_score || (score == st.best_score && m.loss < st.best_loss);
      if (st.best.empty()) better = true;  // the first validation (-loss may be below -1)
      if (better) {
        st.best_score = score;
        st.best_loss = m.loss;
        st.evals_since_best = 0;
      } else {
        ++st.evals_since_best;
      }
      progress.message(fmt::format(
          "step {} valid: loss {:.4f}  token acc {:.4f}  exact match {:.4f}{}{}", st.step, m.loss,
          m.token_accuracy, m.exact_match,
          m.bleu >= 0 ? fmt::format("  BLEU {:.2f}  chrF {:.2f} (greedy)", m.bleu, m.chrf) : "",
          better ? "  (best)" : ""));
    }
    // data-parallel: rank 0's decisions are everyone's (the others wait here meanwhile)
    better = dist::from_root(better ? 1 : 0) != 0;
    st.evals_since_best =
        static_cast<int64_t>(dist::from_root(static_cast<double>(st.evals_since_best)));
    if (cfg.checkpoint.every == 0)
      checkpoint(better);
    else if (better)
      checkpoint(true);
    if (root) plot_losses(run_dir);
    return cfg.train.early_stopping > 0 && st.evals_since_best >= cfg.train.early_stopping;
  };

  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, on_stop_signal);
  model.train();
  auto t0 = std::chrono::steady_clock::now();
  bool stopped_early = false;
  // A run resumed at its last step was already validated and checkpointed there.
  bool evaluated_last = st.step > 0 && (st.step % eval_every == 0 || st.step == total);
  if (!resume_from.empty()) saved_step = st.step;
  while (st.step < total) {
    const data::Batch b = loader->next();
    ++st.step;
    evaluated_last = false;
    dist::maybe_inject_fault(st.step);
    if (ranks > 1) seed_dropout_for_step(model, cfg.seed, rank, st.step);
    // A non-finite loss (or, in anomaly mode, the first op whose output or gradient is
    // non-finite, named with its module) stops the run at this step, or skips the step.
    // Returns whether to skip. Every rank decides alike: the loss it sees is the global one.
    auto nonfinite = [&](const std::string& what) {
      if (cfg.train.skip_nonfinite) {
        progress.message(fmt::format("step {}: {}; skipping this step", st.step, what));
        if (root) metrics->write({{"step", st.step}, {"skipped", true}});
        opt->zero_grad();  // anomaly mode may stop backward half-way
        return true;
      }
      const std::string last = last_good_checkpoint(run_dir.string());
      progress.finish();
      throw Error(
          fmt::format("train: step {}: {}; stopping (last good checkpoint: {}; "
                      "set train.skip_nonfinite = true to skip such steps)",
                      st.step, what, last.empty() ? "none" : last));
    };
    // Anomaly mode's findings are about the numbers; any other error is a real one. A finding
    // is this rank's alone: with several ranks it stops them all (a skip on one rank would
    // leave the others waiting in the allreduce).
    auto anomaly = [&](const Error& e) {
      const std::string msg = e.what();
      if (!ag::anomaly_mode() || msg.rfind("anomaly: ", 0) != 0) throw e;
      if (ranks > 1) throw Error(fmt::format("train: step {}: {}; stopping", st.step, msg));
      return nonfinite(msg);
    };
    nn::AttentionMaps maps;
    ag::Var loss;
    double lv = 0;
    try {
      if (b.size() > 0) {  // data-parallel: a rank's shard of a small last batch may be empty
        const ag::Var logits = model.forward(b.src, b.tgt_in, b.src_mask, b.tgt_mask,
                                             cfg.train.log_attention_entropy ? &maps : nullptr);
        // Label 0 is <pad> (ignored), except in a language model's vocabulary (no specials).
        loss = ag::cross_entropy(ag::reshape(logits, {-1, logits.size(-1)}), b.tgt_out.flatten(),
                                 lm ? -1 : 0, cfg.train.label_smoothing);
        // data-parallel: (sum of this shard's token losses) / (global tokens), so the ranks'
        // losses and gradients sum to those of the global batch.
        if (ranks > 1)
          loss =
              loss * (static_cast<double>(b.tgt_tokens) / static_cast<double>(b.global_tgt_tokens));
        lv = loss.item();
      }
    } catch (const Error& e) {
      if (anomaly(e)) continue;
    }
    // data-parallel: the global loss and "someone was interrupted", so every rank takes the
    // same branch below.
    bool interrupted = g_interrupted;
    if (ranks > 1) {
      double r[2] = {lv, interrupted ? 1.0 : 0.0};
      dist::allreduce_sum(r, 2);
      lv = r[0];
      interrupted = r[1] > 0;
    }
    if (!std::isfinite(lv) && nonfinite(fmt::format("loss is {}", lv))) continue;
    try {
      if (b.size() > 0) loss.backward();
    } catch (const Error& e) {
      if (anomaly(e)) continue;
    }
    reducer.reduce();  // data-parallel: sum the gradients over the ranks (one process: nothing)
    const double gnorm = cfg.optim.clip_norm > 0
                             ? optim::clip_grad_norm(params, cfg.optim.clip_norm)
                             : optim::grad_norm(params);
    if (cfg.optim.clip_value > 0) optim::clip_grad_value(params, cfg.optim.clip_value);
    const double lr = optim::apply_schedule(*opt, schedule);
    opt->step();
    opt->zero_grad();
    st.loader = loader->state();
    st.epoch = st.loader.epoch;

    loss_sum += lv;
    norm_sum += gnorm;
    ++loss_n;
    tokens += b.global_src_tokens + b.global_tgt_tokens;  // the whole global batch's
    if (st.step % cfg.train.log_every == 0 || st.step == total) {
      json j = {{"step", st.step},
                {"epoch", st.epoch},
                {"loss", loss_sum / loss_n},
                {"lr", lr},
                {"grad_norm", norm_sum / loss_n}};
      if (cfg.train.log_attention_entropy && ranks == 1) {
        j["attention_entropy"] = {{"encoder_self", attention_entropy(maps.encoder_self)},
                                  {"decoder_self", attention_entropy(maps.decoder_self)},
                                  {"decoder_cross", attention_entropy(maps.decoder_cross)}};
      } else if (cfg.train.log_attention_entropy) {  // data-parallel: combined over the ranks
        const auto enc = static_cast<size_t>(cfg.model.encoder_layers);
        const auto dec = static_cast<size_t>(cfg.model.decoder_layers);
        j["attention_entropy"] = {
            {"encoder_self", global_entropy(maps.encoder_self, enc, b.size(), b.global_size)},
            {"decoder_self", global_entropy(maps.decoder_self, dec, b.size(), b.global_size)},
            {"decoder_cross", global_entropy(maps.decoder_cross, dec, b.size(), b.global_size)}};
      }
      if (root) metrics->write(j);
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      progress.update(st.step, loss_sum / loss_n, lr, secs > 0 ? tokens / secs : 0);
      loss_sum = norm_sum = 0;
      loss_n = tokens = 0;
      t0 = std::chrono::steady_clock::now();
    } else if (!a.quiet) {
      progress.update(st.step, lv, lr, 0);
    }
    if (st.step % eval_every == 0 || st.step == total) {
      evaluated_last = true;
      if (validate()) {
        progress.message(fmt::format("early stopping: no improvement in {} validations",
                                     cfg.train.early_stopping));
        stopped_early = true;
        break;
      }
    }
    // (not twice: validation may just have written this step's checkpoint as the best)
    if (cfg.checkpoint.every > 0 && st.step % cfg.checkpoint.every == 0 && saved_step != st.step)
      checkpoint(false);
    if (ranks == 1) interrupted = g_interrupted;  // one process: the latest news
    if (interrupted) {
      progress.finish();
      const std::string name = saved_step == st.step
                                   ? fs::path(find_checkpoint(run_dir.string())).filename().string()
                                   : checkpoint(false);
      // data-parallel: mpirun ends the job at the first non-zero exit; rank 0 must be done.
      dist::barrier();
      const int sig = g_signal.load() != 0 ? g_signal.load() : SIGINT;
      if (root)
        spdlog::warn(
            "interrupted ({}) at step {}: {}; continue with qkv train --resume {}",
            sig == SIGTERM  ? "SIGTERM"
            : sig == SIGHUP ? "SIGHUP"
                            : "SIGINT",
            st.step,
            name.empty() ? "no checkpoint written (see above)" : "wrote checkpoint " + name,
            run_dir.string());
      return 128 + sig;
    }
  }
  if (!evaluated_last && !stopped_early) validate();
  if (saved_step != st.step) checkpoint(false);
  progress.finish();
  if (ranks > 1 && !a.quiet && root)
    spdlog::info(
        "data-parallel: {} processes; summing gradients ({} buckets) took {:.2f} s on rank 0",
        ranks, reducer.buckets(), reducer.seconds());
  if (!root) return 0;  // data-parallel: the test split is rank 0's alone
  if (lm) {             // no test split: the best validation estimate is the result
    plot_losses(run_dir);
    if (!a.quiet)
      spdlog::info("done: {} steps; best val loss {:.4f} ({} batches of {} x {} tokens)", st.step,
                   st.best_loss, cfg.train.eval_iters, cfg.data.batch_size, cfg.data.block_size);
    return 0;
  }

  // The held-out test split, with the best checkpoint.
  const std::string best = find_checkpoint(run_dir.string(), "best");
  if (!best.empty()) load_checkpoint(best, model, nullptr);
  const Metrics test = evaluate(model, data.test, data.framing, cfg.data.batch_size,
                                cfg.train.max_decode_extra, 0, text_task ? &data : nullptr);
  json tj = {{"step", st.step},
             {"split", "test"},
             {"loss", test.loss},
             {"token_accuracy", test.token_accuracy},
             {"exact_match", test.exact_match},
             {"examples", test.examples}};
  if (test.bleu >= 0) tj["bleu"] = test.bleu, tj["chrf"] = test.chrf;
  metrics->write(tj);
  plot_losses(run_dir);
  if (!a.quiet)
    spdlog::info(
        "done: {} steps; test ({} examples, best checkpoint): loss {:.4f}  token acc {:.4f}  exact "
        "match {:.4f}{}",
        st.step, test.examples, test.loss, test.token_accuracy, test.exact_match,
        test.bleu >= 0 ? fmt::format("  BLEU {:.2f}  chrF {:.2f} (greedy)", test.bleu, test.chrf)
                       : "");
  return 0;
}

}  // namespace qkv::app
