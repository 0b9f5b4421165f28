#include "apps/bench_models.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>

#include "bench/bench_runtime.hpp"
#include "bench/bench_util.hpp"
#include "bench/gemm_shapes.hpp"
#include "bench/loop_rate.hpp"
#include "core/parallel.hpp"
#include "core/random.hpp"
#include "nn/decoder_lm.hpp"
#include "nn/rnn_seq2seq.hpp"
#include "nn/seq2seq.hpp"
#include "optim/clip.hpp"
#include "optim/optimizers.hpp"
#include "run/distributed.hpp"
#include "train/trainer.hpp"

namespace qkv::app {

using namespace bench;
using nlohmann::json;

int64_t target_length(const BenchModel& m) { return m.tgt_length > 0 ? m.tgt_length : m.length; }

const std::vector<BenchModel>& models() {
  static const std::vector<BenchModel> m = {
      {"tiny", true, 64, 4, 256, 2, 2, 16, 32, 64},
      {"small", true, 128, 4, 512, 2, 2, 16, 32, 64},
      {"annotated", true, 512, 8, 2048, 2, 2, 11, 10, 80},
      {"attention-4096", false, 512, 8, 0, 0, 0, 0, 4096, 1},
      // nanoGPT's shakespeare_char CPU recipe: 4 layers, d 128, 65 characters, block 64, batch 12
      {"gpt-char", false, 128, 4, 512, 0, 4, 65, 64, 12, 0, true},
      // configs/multi30k.toml's model on a real Multi30k batch: 128 sentences, the mean padded
      // lengths of its training batches (17 source, 21 target subwords; docs/multi30k.md)
      {"multi30k", true, 256, 4, 512, 3, 3, 6000, 17, 128, 21},
      // configs/bahdanau-copy.toml's model at the copy task's size: 10 symbols and 4 specials,
      // sources of the longest length 10, targets 11 (with <eos>), batch 64
      {"bahdanau", true, 64, 1, 0, 1, 1, 14, 10, 64, 11, false, true},
  };
  return m;
}

const BenchModel& find_model(const std::string& name) {
  for (const BenchModel& m : models())
    if (m.name == name) return m;
  std::string known;
  for (const BenchModel& m : models()) known += (known.empty() ? "" : ", ") + m.name;
  throw Error(cat("bench: unknown model '", name, "' (known: ", known, ")"));
}

// Matmul FLOPs of one training step: backward costs twice the forward (dX and dW products).
double train_flops(const BenchModel& m) {
  const double B = m.batch, L = m.length, d = m.d_model, f = m.d_ff, V = m.vocab;
  const double T = static_cast<double>(target_length(m));
  auto attn = [&](double n, double k) {  // n queries, k keys: projections, scores, context
    return 2 * 2 * B * n * d * d + 2 * 2 * B * k * d * d + 2 * 2 * B * n * k * d;
  };
  auto ffn = [&](double n) { return 2 * 2 * B * n * d * f; };
  if (m.gpt) return 3 * (m.dec_layers * (attn(L, L) + ffn(L)) + 2 * B * L * d * V);
  if (m.bahdanau) {
    // encoder: per layer and token, two directions of d / 2 units over an input of d: 3 gates
    // of (d x d/2) and (d/2 x d/2) each way; the keys U_a h (d x d) once per source token; s_0
    // = W_s h<-_1 (d/2 -> d) once per row
    const double enc = m.enc_layers * B * L * 9 * d * d + B * L * 2 * d * d + B * d * d;
    // decoder, per target token: W_a s (d x d), the GRU cell (3 gates over 2d inputs and d
    // state: 12 d^2 + 6 d^2), the readout U_o, V_o, C_o (3 x 2 d^2), W_o (d/2 -> V); per
    // (target, source) pair the score v . tanh(..) and the context, 2 d each
    const double dec = B * T * (2 * d * d + 18 * d * d + 6 * d * d + d * V) + B * T * L * 4 * d;
    return 3 * (enc + dec);
  }
  if (!m.seq2seq) return 3 * attn(L, L);
  const double fwd = m.enc_layers * (attn(L, L) + ffn(L)) +
                     m.dec_layers * (attn(T, T) + attn(T, L) + ffn(T)) + 2 * B * T * d * V;
  return 3 * fwd;
}

double tokens_per_step(const BenchModel& m) {
  return m.seq2seq ? double(m.batch) * double(m.length + target_length(m))
                   : double(m.batch) * m.length;
}

namespace {

// One model's training step, ready to time. The Seq2Seq and GPT models train through the
// Trainer's step (train/trainer.hpp), as qkv train does: forward, backward, gradient reduction,
// clipping, the optimizer's update. Heap-allocated: step() refers to its members.
struct BenchStep {
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<optim::Optimizer> opt;
  std::unique_ptr<run::dist::Context> ctx;  // data-parallel: mpirun's ranks
  std::unique_ptr<train::Trainer> trainer;
  Tensor src, tgt_in, tgt_out, valid, tgt_valid, x_data, g_out;
  std::function<void()> step;

  void train_with(train::ForwardFn forward, const train::TrainerOptions& o) {
    trainer = std::make_unique<train::Trainer>(model->parameters(), *opt, std::move(forward), o,
                                               ctx.get());
    step = [this] { trainer->step(); };
  }
};

// Only what a step needs: no gradient-norm pass unless clipping.
train::TrainerOptions bench_options(double clip_norm, Precision precision) {
  train::TrainerOptions o;
  o.precision = precision;
  o.measure_grad_norm = false;
  o.clip_norm = clip_norm;
  return o;
}

// A decoder-only GPT trained as configs/shakespeare-char.toml: AdamW, clipping at 1.0.
void build_gpt(BenchStep& b, const BenchModel& m, Generator& gen, Precision p) {
  nn::ModelConfig c = nn::ModelConfig::decoder_defaults();
  c.src_vocab = c.tgt_vocab = m.vocab;
  c.d_model = m.d_model, c.heads = m.heads, c.d_ff = m.d_ff, c.decoder_layers = m.dec_layers;
  c.dropout = 0, c.max_len = m.length, c.bias = false;
  auto lm = std::make_shared<nn::DecoderLM>(c, gen);
  b.model = lm;
  b.tgt_in = randint({m.batch, m.length}, 0, m.vocab, gen);
  b.tgt_out = randint({m.batch * m.length}, 0, m.vocab, gen);
  optim::OptimConfig gc;
  gc.name = optim::OptimizerKind::adamw, gc.lr = 1e-3, gc.beta2 = 0.99, gc.weight_decay = 0.1;
  b.opt = optim::make_optimizer(gc, b.model->named_parameters());
  b.train_with(
      [&b, lm] {
        // as a run's training step computes its loss (train/seq2seq_step.cpp)
        return train::Forward{
            lm->forward_loss(Tensor(), b.tgt_in, Tensor(), Tensor(), b.tgt_out, -100, 0.0), 0};
      },
      bench_options(1.0, p));
}

// An encoder-decoder (nn.Transformer's layout) with Adam. Data-parallel: every rank drew the
// same global batch and keeps rows rank, rank + N, ... (as data::shard_indices); its loss is
// its rows' share of the global mean.
void build_seq2seq(BenchStep& b, const BenchModel& m, int64_t rank, int64_t ranks,
                   bool data_parallel, Generator& gen, Precision p) {
  nn::ModelConfig c;
  c.src_vocab = c.tgt_vocab = m.vocab;
  c.d_model = m.d_model;
  c.heads = m.heads;
  c.d_ff = m.d_ff;
  c.encoder_layers = m.enc_layers;
  c.decoder_layers = m.dec_layers;
  c.dropout = 0;
  c.final_norm = true;  // as nn.Transformer, which ends both stacks with a LayerNorm
  auto s2s = std::make_shared<nn::Seq2Seq>(c, gen);
  b.model = s2s;
  b.src = randint({m.batch, m.length}, 0, m.vocab, gen);
  const int64_t tl = target_length(m);
  b.tgt_in = randint({m.batch, tl}, 0, m.vocab, gen);
  b.tgt_out = randint({m.batch, tl}, 0, m.vocab, gen);
  const int64_t rows = (m.batch - rank + ranks - 1) / ranks;
  const double share = static_cast<double>(rows) / static_cast<double>(m.batch);
  if (ranks > 1) {
    b.src = b.src.slice(0, rank, m.batch, ranks).contiguous();
    b.tgt_in = b.tgt_in.slice(0, rank, m.batch, ranks).contiguous();
    b.tgt_out = b.tgt_out.slice(0, rank, m.batch, ranks).contiguous();
  }
  b.tgt_out = b.tgt_out.flatten();
  b.valid = ones({rows, m.length}, DType::b8);
  b.tgt_valid = ones({rows, tl}, DType::b8);
  optim::OptimConfig oc;
  oc.name = optim::OptimizerKind::adam;
  oc.lr = 1e-4;
  b.opt = optim::make_optimizer(oc, b.model->named_parameters());
  if (data_parallel) b.ctx = std::make_unique<run::dist::Context>(b.model->parameters());
  b.train_with(
      [&b, s2s, share, ranks] {
        ag::Var loss =
            s2s->forward_loss(b.src, b.tgt_in, b.valid, b.tgt_valid, b.tgt_out, -100, 0.0);
        if (ranks > 1) loss = loss * share;
        return train::Forward{loss, 0};
      },
      bench_options(0, p));
}

// Bahdanau et al.'s GRU encoder-decoder with additive attention, on random full-length
// batches, with Adam (no clipping, as build_seq2seq).
void build_bahdanau(BenchStep& b, const BenchModel& m, Generator& gen, Precision p) {
  nn::ModelConfig c;
  c.src_vocab = c.tgt_vocab = m.vocab;
  c.d_model = m.d_model;
  c.encoder = nn::EncoderKind::gru, c.decoder = nn::DecoderKind::gru;
  c.attention = nn::AttentionKind::additive, c.cross_attention = true;
  c.encoder_layers = m.enc_layers, c.decoder_layers = 1;
  c.position = nn::PositionKind::none, c.scale_embedding = false, c.dropout = 0;
  auto rnn = std::make_shared<nn::RecurrentSeq2Seq>(c, gen);
  b.model = rnn;
  const int64_t tl = target_length(m);
  b.src = randint({m.batch, m.length}, 0, m.vocab, gen);
  b.tgt_in = randint({m.batch, tl}, 0, m.vocab, gen);
  b.tgt_out = randint({m.batch * tl}, 0, m.vocab, gen);
  b.valid = ones({m.batch, m.length}, DType::b8);
  b.tgt_valid = ones({m.batch, tl}, DType::b8);
  optim::OptimConfig oc;
  oc.name = optim::OptimizerKind::adam;
  oc.lr = 1e-4;
  b.opt = optim::make_optimizer(oc, b.model->named_parameters());
  b.train_with(
      [&b, rnn] {
        return train::Forward{
            rnn->forward_loss(b.src, b.tgt_in, b.valid, b.tgt_valid, b.tgt_out, -100, 0.0), 0};
      },
      bench_options(0, p));
}

// One MultiHeadAttention layer's forward and backward: not a training step (no optimizer).
void build_attention(BenchStep& b, const BenchModel& m, Generator& gen, Precision p) {
  auto mha = std::make_shared<nn::MultiHeadAttention>(m.d_model, m.heads, gen);
  b.model = mha;
  b.x_data = randn({m.batch, m.length, m.d_model}, gen);
  b.g_out = randn({m.batch, m.length, m.d_model}, gen);
  b.step = [&b, mha, p] {
    PrecisionScope scope(p);
    mha->zero_grad();
    const ag::Var x(b.x_data, true);
    const ag::Var y = mha->forward(x, x, x);
    y.backward(b.g_out);
  };
}

}  // namespace

json run_one(const BenchModel& m, double min_seconds, bool data_parallel, bool gemm_shapes,
             Precision precision) {
  QKV_CHECK(!data_parallel || (m.seq2seq && !m.bahdanau), "bench",
            "--data-parallel needs a Seq2Seq model (tiny, "
            "small, annotated), not ",
            m.name);
  const int64_t ranks = data_parallel ? run::dist::size() : 1,
                rank = data_parallel ? run::dist::rank() : 0;
  QKV_CHECK(m.batch >= ranks, "bench", m.name, ": a batch of ", m.batch, " rows cannot feed ",
            ranks, " ranks");
  const double base_mb = proc_status_mb("VmRSS");
  Generator gen(1);
  auto bench = std::make_unique<BenchStep>();
  if (m.gpt)
    build_gpt(*bench, m, gen, precision);
  else if (m.bahdanau)
    build_bahdanau(*bench, m, gen, precision);
  else if (m.seq2seq)
    build_seq2seq(*bench, m, rank, ranks, data_parallel, gen, precision);
  else
    build_attention(*bench, m, gen, precision);
  const std::function<void()>& step = bench->step;
  run::dist::GradReducer* reducer = bench->ctx ? &bench->ctx->reducer() : nullptr;
  for (int i = 0; i < 3; ++i) step();  // warm-up: fills the allocator's cache
  const AllocatorStats a0 = allocator_stats();
  const double reduce0 = reducer ? reducer->seconds() : 0;
  const long faults0 = minor_page_faults();
  // steady_clock is CLOCK_MONOTONIC here: scripts/profile-bench.sh records perf's samples on
  // that clock and keeps those from this moment on, the timed steps without the warm-up's.
  const double timed_from = std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  // under mpirun, rank 0 decides when to stop
  auto rank0_decides = [](bool more) {
    return run::dist::size() == 1 ? more : run::dist::from_root(more ? 1 : 0) != 0;
  };
  const std::vector<double> ms = time_steps(step, 0, 5, min_seconds, rank0_decides);
  const long faults1 = minor_page_faults();
  const AllocatorStats a1 = allocator_stats();
  json j;
  j["model"] = m.name;
  j["framework"] = "qkv";
  j["precision"] = precision_name(precision);
  j["threads"] = get_num_threads();
  j["ms_per_step"] = median(ms);
  j["steps"] = ms.size();
  j["timed_from_monotonic_s"] = timed_from;
  j["peak_rss_mb"] = proc_status_mb("VmHWM") - base_mb;
  j["peak_tensor_mb"] = double(a1.peak_live_bytes) / (1 << 20);
  // Blocks taken from the system during the timed steps: 0 once the cache is warm.
  j["system_allocs_per_step"] = double(a1.system_allocs - a0.system_allocs) / ms.size();
  // Bytes of the tensors a step creates: each is written once and read at least once, so twice
  // this is a floor on the step's memory traffic outside the products' own tiles.
  j["created_mb_per_step"] = double(a1.created_bytes - a0.created_bytes) / (1 << 20) / ms.size();
  // Pages touched for the first time during the timed steps (each costs a kernel entry).
  j["page_faults_per_step"] = double(faults1 - faults0) / ms.size();
  j["runtime"] = to_json(this_process(get_num_threads()));
  // Separate steps: the timers stay out of the step times above. The products they record,
  // each timed alone in a loop: the step's products at their loop rate (not under mpirun, where
  // every rank would time its loops on the same cores).
  if (!data_parallel) {  // (--gemm-shapes is refused with --data-parallel)
    json profile = profile_steps(step, gemm_shapes ? std::clamp<int>(ms.size(), 3, 20) : 1);
    const double loop_seconds = std::min(0.05, min_seconds / 40);  // per shape
    j["products_loop_ms"] = add_loop_rates(profile["gemm_shapes"], [&](const GemmShapeStats& s) {
      return seconds_per_product(s, loop_seconds);
    });
    if (gemm_shapes) j.update(profile);
  }
  if (data_parallel) {
    j["ranks"] = ranks;
    j["global_batch"] = m.batch;
    // In a step the allreduce also waits for the slowest rank; alone, after a barrier, it
    // is the communication itself (what overlapping it with backward could hide).
    j["allreduce_ms_per_step"] = 1e3 * (reducer->seconds() - reduce0) / double(ms.size());
    std::vector<double> alone;
    for (int i = 0; i < 5; ++i) {
      run::dist::barrier();
      const double before = reducer->seconds();
      reducer->reduce();
      alone.push_back(1e3 * (reducer->seconds() - before));
    }
    j["allreduce_alone_ms"] = median(alone);
    j["allreduce_buckets"] = reducer->buckets();
  }
  return j;
}

}  // namespace qkv::app
