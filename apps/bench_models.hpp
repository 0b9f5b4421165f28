// The fixed models `qkv bench` times, and the timed child that runs one of them: the model
// table, each model's matmul FLOPs and tokens per step, building its training step (as
// qkv train runs one, through train::Trainer), and timing it after warm-up.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
#include "core/precision.hpp"

namespace qkv::app {

struct BenchModel {
  std::string name;
  bool seq2seq;  // false: one MultiHeadAttention layer
  int64_t d_model, heads, d_ff, enc_layers, dec_layers, vocab, length, batch;
  int64_t tgt_length = 0;  // the decoder's length, when it differs from the source's `length`
  // A decoder-only GPT (dec_layers blocks) trained as configs/shakespeare-char.toml does:
  // no attention projection biases, AdamW with weight decay on 2-D weights, clipping at 1.0.
  bool gpt = false;
  // Bahdanau et al.'s recurrent encoder-decoder (nn::RecurrentSeq2Seq, configs/bahdanau-*.toml):
  // a bidirectional GRU encoder (enc_layers), one GRU decoder layer with additive attention, a
  // maxout readout; heads and d_ff do not apply. Adam, as the Transformer encoder-decoders.
  bool bahdanau = false;
};

const std::vector<BenchModel>& models();                // tiny, small, ..., multi30k, bahdanau
const BenchModel& find_model(const std::string& name);  // throws qkv::Error naming the known ones
int64_t target_length(const BenchModel& m);
double train_flops(const BenchModel& m);  // matmul FLOPs of one training step
double tokens_per_step(const BenchModel& m);

// The child: one model, in this process, timed; one JSON object (ms_per_step, steps, peak
// memory, allocations and page faults per step, the runtime, timed_from_monotonic_s;
// products_loop_ms: the products one more step records, each timed alone in a loop,
// bench/loop_rate.hpp; with gemm_shapes the step's GEMMs, bench/gemm_shapes.hpp, with their loop
// rates). data_parallel: this process is one
// rank of mpirun and trains on its rows of the global batch.
// precision: the products' (core/precision.hpp; fp32 or bf16).
nlohmann::json run_one(const BenchModel& m, double min_seconds, bool data_parallel,
                       bool gemm_shapes, Precision precision = Precision::fp32);

}  // namespace qkv::app
