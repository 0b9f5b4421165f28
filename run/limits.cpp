#include "run/limits.hpp"

#include <sched.h>
#include <sys/resource.h>

#include <spdlog/spdlog.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "data/task_kind.hpp"
#include "nn/model_cost.hpp"
#include "run/family.hpp"

namespace qkv::run {

namespace {

// [probe]: what a probe holds at once (inspect/probe_hook.hpp), besides the model: the run's
// family says (Family::probe_memory).
MemoryEstimate probe_memory(const config::RunConfig& c, double tv) {
  if (c.probe.every == 0) return {};
  return family_for(c.data.task).probe_memory(c, tv);
}

}  // namespace

MemoryEstimate probe_estimate(const config::RunConfig& c, double maps, const MemoryEstimate& pass) {
  const config::ProbeOptions& p = c.probe;
  const double n = 2.0 * static_cast<double>(p.length > 0 ? p.length : 16);
  const double seqs = static_cast<double>(p.sequences);
  const std::string key = pass.bytes > maps ? pass.key
                          : seqs >= n       ? "probe.sequences"
                                            : "probe.length";
  const std::string what = fmt::format(
      "probing this model's heads ({} sequences of 2 x {} tokens, every layer's and head's "
      "attention maps kept until scored{})",
      p.sequences, static_cast<int64_t>(n / 2), pass.what);
  return {maps + pass.bytes, key, what};
}

void check_data_memory(const config::RunConfig& c) {
  const data::DataConfig& d = c.data;
  const double examples = static_cast<double>(d.train_size) + static_cast<double>(d.valid_size) +
                          static_cast<double>(d.test_size);
  const bool tsv = d.task == data::TaskKind::tsv, repeat = d.task == data::TaskKind::repeat;
  // repeat: an example is an episode of block_size tokens (one id vector: counted as half length)
  const double len =
      tsv      ? 32.0
      : repeat ? static_cast<double>(d.block_size) / 2
               : (static_cast<double>(d.min_len) + static_cast<double>(d.max_len)) / 2 + 2;
  // two id vectors per example (8 bytes an id) and their headers, plus the batch plan
  const double example_bytes = examples * (96 + 2 * 8 * len);
  const bool symbols = data::is_synthetic(d.task);
  // a symbol's string, its hash-map node and its slot in the id table
  const double vocab_bytes = symbols ? static_cast<double>(d.vocab_size) * 128 : 0.0;
  const std::string n = std::to_string(static_cast<int64_t>(examples));
  if (vocab_bytes > example_bytes)
    require_memory("data.vocab_size", vocab_bytes + example_bytes,
                   "a vocabulary of " + std::to_string(d.vocab_size) + " symbols");
  else if (len > 96)  // long examples rather than many
    require_memory(repeat ? "data.block_size" : "data.max_len", vocab_bytes + example_bytes,
                   "generating " + n + " examples of up to " +
                       std::to_string(repeat ? d.block_size : d.max_len) + " symbols");
  else
    require_memory(d.train_size >= d.valid_size + d.test_size ? "data.train_size"
                   : d.valid_size >= d.test_size              ? "data.valid_size"
                                                              : "data.test_size",
                   vocab_bytes + example_bytes, "generating " + n + " examples");
  // A symbol task's vocabulary is known now (its symbols and 4 specials): the model is checked
  // before the data is generated.
  if (symbols) check_model_memory(c, d.vocab_size + 4, d.vocab_size + 4);
}

void check_model_memory(const config::RunConfig& c, int64_t src_vocab, int64_t tgt_vocab) {
  const MemoryEstimate e = estimate_model_memory(c, src_vocab, tgt_vocab);
  require_memory(e.key, e.bytes, e.what);
}

MemoryEstimate estimate_model_memory(const config::RunConfig& c, int64_t src_vocab,
                                     int64_t tgt_vocab) {
  const nn::ModelConfig& m = c.model;
  const double d = static_cast<double>(m.d_model);
  const double sv = static_cast<double>(src_vocab), tv = static_cast<double>(tgt_vocab);
  const double enc = static_cast<double>(m.encoder_layers),
               dec = static_cast<double>(m.decoder_layers), layers = enc + dec;
  const bool tsv = c.data.task == data::TaskKind::tsv;
  const double len = tsv && c.data.max_seq_len == 0
                         ? 64.0
                         : static_cast<double>(tsv ? c.data.max_seq_len : c.data.max_len) + 2;
  double tokens = static_cast<double>(c.data.batch_size) * len;
  if (c.data.max_tokens > 0) tokens = std::min(tokens, static_cast<double>(c.data.max_tokens));
  // Each parameter: its value, its gradient and the optimizer's state (Adam: two moments).
  const std::string opt(name_of(c.optim.optim.name));
  const double states = static_cast<double>(optim::state_buffers(c.optim.optim));
  const double per_param = 4 * (2 + states);
  // The terms, each with the key that drives it: parameters (embeddings and output layer,
  // learned positions, the model's layers as its kind counts them: nn/model_cost.hpp) and one
  // batch's activations saved for backward (per token, per (query, key) pair, and the logits
  // over the target vocabulary).
  const nn::StackCost s = nn::model_cost(m);
  const double vocab_params =
      (m.share_embeddings ? sv : sv + tv) * d + (m.tie_output ? 0 : tv * (s.output_in + 1));
  const double pos_params =
      m.position == nn::PositionKind::learned ? 2 * static_cast<double>(m.max_len) * d : 0;
  const double params = vocab_params + pos_params + s.params_d + s.params_ff;
  const double t_vocab = per_param * vocab_params + 4 * tokens * 3 * tv;
  const double t_pos = per_param * pos_params;
  const double t_d = per_param * s.params_d + 4 * tokens * s.act_d;
  const double t_ff = per_param * s.params_ff + 4 * tokens * s.act_ff;
  // (batch, heads, n, n) weights exist only where no fused kernel is used
  const bool weights = m.attention_dropout > 0 || nn::traits_of(m.attention).dense_scores ||
                       c.train.log_attention_entropy || m.position == nn::PositionKind::relative;
  const double t_attn = 4 * tokens * len * (s.pair_always + (weights ? s.pair_dense : 0.0));
  const double total = t_vocab + t_pos + t_d + t_ff + t_attn;
  const double act = t_attn + 4 * tokens * (s.act_d + s.act_ff + 3 * tv);
  std::string key = "model.d_model";
  double top = t_d;
  for (const auto& [k, v] :
       {std::pair{"data.vocab_size", t_vocab}, std::pair{"model.max_len", t_pos},
        std::pair{"model.d_ff", t_ff}, std::pair{"data.max_len", t_attn}})
    if (v > top) key = k, top = v;
  if (act > total / 2 && tokens > 65536)  // a huge batch: of many sequences, or of long ones
    key = static_cast<double>(c.data.batch_size) >= len ? "data.batch_size"
          : tsv                                         ? "data.max_seq_len"
                                                        : "data.max_len";
  else if (layers > 48 && key != "data.vocab_size" && key != "model.max_len")
    key = enc > dec ? "model.encoder_layers" : "model.decoder_layers";
  // The probe's inputs and maps, held beside the model's state between steps.
  const MemoryEstimate probe = probe_memory(c, tv);
  if (probe.bytes > top && probe.bytes > act) return {total + probe.bytes, probe.key, probe.what};
  char what[320];
  std::snprintf(what, sizeof what,
                "training this model (d_model %lld, d_ff %lld, %lld+%lld layers, vocabulary %lld, "
                "batch of %.0f tokens: %.3g parameters with gradients and %s state, and the "
                "batch's activations)",
                static_cast<long long>(m.d_model), static_cast<long long>(m.d_ff),
                static_cast<long long>(m.encoder_layers), static_cast<long long>(m.decoder_layers),
                static_cast<long long>(tgt_vocab), tokens, params, opt.c_str());
  return {total + probe.bytes, key, what};
}

int apply_threads(int64_t requested, const std::string& key) {
  QKV_CHECK(requested >= 0, key, "must be >= 0 (0: all cores), got ", requested);
  const int cores = usable_cores();
  const int64_t cap = 4 * static_cast<int64_t>(cores);
  int64_t n = requested;
  if (n > cap) {
    spdlog::warn(
        "{}: {} threads on {} core{}: using {} (more only slows BLAS down and costs memory)", key,
        n, cores, cores == 1 ? "" : "s", cap);
    n = cap;
  }
  // Each thread costs memory: its stack, its malloc arena and OpenBLAS's buffer. Under an
  // address-space limit OpenBLAS waits forever for a buffer it cannot map, so the count must fit
  // what is there. Address space, not memory, is what ulimit -v counts: measured with
  // `qkv train configs/copy.toml --threads N` (VmSize of the running process), each thread adds
  // 205-337 MB (a 134 MB OpenBLAS buffer, glibc arenas reserved in 64 MB heaps, an 8 MB stack).
  const MemoryInfo m = available_memory();
  const double per_thread = m.source == "ulimit -v" ? 350e6 : 32e6;
  const int64_t fit = std::max<int64_t>(1, static_cast<int64_t>(m.available / per_thread));
  const int64_t want = n > 0 ? n : cores;
  if (want > fit) {
    spdlog::warn(
        "{}: {} threads need about {} of memory, more than the {} available ({}): using {}", key,
        want, human_bytes(static_cast<double>(want) * per_thread), human_bytes(m.available),
        m.source, fit);
    n = fit;
  }
  set_num_threads(static_cast<int>(n));
  return get_num_threads();
}

Precision choose_precision(const std::string& flag, Precision configured, const std::string& key) {
  return choose_precision(
      flag.empty() ? std::nullopt : std::optional(parse_precision(flag, "--precision")), configured,
      key);
}

Precision choose_precision(std::optional<Precision> flag, Precision configured,
                           const std::string& key) {
  const Precision asked = flag.value_or(configured);
  const std::string what = flag ? "--precision" : key;
  const Precision p = resolve_precision(asked, what);
  if (asked == Precision::auto_) {
    const std::string why = bf16_unsupported_reason();
    std::fprintf(stderr, "[qkv] %s = auto: %s\n", what.c_str(),
                 why.empty() ? "bf16 (AVX512_BF16, oneDNN's bf16 kernels)"
                             : ("fp32, as bf16 cannot run here: " + why).c_str());
  }
  return p;
}

}  // namespace qkv::run
