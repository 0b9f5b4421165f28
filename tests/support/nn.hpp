// nn in tests: a tiny Seq2Seq config, the gradcheck fixture (a module's parameters appended to
// the inputs, one checker that requires every input and parameter to be checked and to pass,
// and the registry's rows (nn/gradcheck_layers.hpp) all passing), and a PyTorch reference
// script's run.
//
// gradcheck calls a tiny model thousands of times; on a loaded machine an OpenMP region per
// small op costs far more than the op, and results do not depend on the thread count: such
// checks run inside ScopedThreads(1).
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "autograd/gradcheck.hpp"
#include "nn/decoder_lm.hpp"
#include "nn/gradcheck_layers.hpp"
#include "nn/hooks.hpp"
#include "nn/module.hpp"
#include "nn/seq2seq.hpp"
#include "support/tensors.hpp"

namespace qkv::testing {

// The tiny models' sizes: d_model 8, 2 heads, d_ff 12, 1 encoder and 2 decoder layers, no
// dropout.
inline void set_tiny_sizes(nn::ModelConfig& c) {
  c.d_model = 8;
  c.heads = 2;
  c.d_ff = 12;
  c.encoder_layers = 1;
  c.decoder_layers = 2;
  c.dropout = 0.0;
}

// A tiny Seq2Seq without dropout, for gradcheck and incremental decoding.
inline nn::ModelConfig tiny_config(bool norm_first, bool final_norm = false) {
  nn::ModelConfig c;
  c.src_vocab = 7;
  c.tgt_vocab = 6;
  set_tiny_sizes(c);
  c.norm_first = norm_first;
  c.final_norm = final_norm;
  return c;
}

// A tiny recurrent encoder-decoder (nn/rnn_seq2seq.hpp): a GRU encoder and decoder, with
// Bahdanau's attention (attend) or one fixed context.
inline nn::ModelConfig tiny_rnn_config(bool attend) {
  nn::ModelConfig c = tiny_config(false);
  c.encoder = nn::EncoderKind::gru;
  c.decoder = nn::DecoderKind::gru;
  c.decoder_layers = 1;
  c.position = nn::PositionKind::none;
  c.attention = nn::AttentionKind::additive;
  c.cross_attention = attend;
  return c;
}

// A tiny decoder-only LM (GPT's defaults, 7 tokens, up to 32 positions).
inline nn::ModelConfig tiny_lm(nn::PositionKind position = nn::PositionKind::learned,
                               nn::AttentionKind attention = nn::AttentionKind::dot,
                               int64_t window = 0) {
  nn::ModelConfig c = nn::ModelConfig::decoder_defaults();
  c.src_vocab = c.tgt_vocab = 7;
  set_tiny_sizes(c);
  c.max_len = 32;
  c.position = position;
  c.attention = attention;
  c.window = window;
  return c;
}

// inputs first, then every parameter of m (named, so a failure names the parameter)
inline std::vector<ag::Var> with_params(std::vector<ag::Var> inputs, const nn::Module& m) {
  return nn::with_parameters(std::move(inputs), &m);
}
// (B, n) bool padding masks, as the registry builds them
using nn::valid_mask;

// mha.forward(q, k, v, mask) and its attention weights (B, h, n, m), captured at its hook point
// "pattern" (nn/hooks.hpp). through_pattern: the pattern is also replaced by itself, so the
// output is computed as pattern @ v (the weights path) instead of the scorer's fast path.
struct AttentionWithWeights {
  ag::Var out, weights;
};
inline AttentionWithWeights forward_with_weights(const nn::MultiHeadAttention& mha,
                                                 const ag::Var& q, const ag::Var& k,
                                                 const ag::Var& v, const Tensor& mask = Tensor(),
                                                 bool through_pattern = false) {
  const std::string point = mha.hook_prefix + "pattern";
  nn::Hooks h;
  h.capture = nn::names_matching({point});
  if (through_pattern) h.add(point, [](const ag::Var& w) { return w; });
  nn::HookScope scope(h);
  const ag::Var out = mha.forward(q, k, v, mask);
  return {out, h.cache.at(point)};
}

// gradcheck of f at in on one thread (central differences call f thousands of times; a
// parallel region per op would only add noise). Prints the worst errors under the test's name.
inline void check_gradients(const ag::GradcheckFn& f, const std::vector<ag::Var>& in) {
  const ScopedThreads one(1);
  const ag::GradcheckReport r = ag::gradcheck(f, in);
  INFO(r.summary());
  CHECK(r.passed);
  double worst_abs = 0, worst_rel = 0;
  int64_t checked = 0;
  for (const auto& c : r.inputs) {
    worst_abs = std::max(worst_abs, c.max_abs_err);
    worst_rel = std::max(worst_rel, c.max_rel_err);
    checked += c.checked;
  }
  std::printf("gradcheck [%s] %zu inputs: max abs err %.2g, max rel err %.2g\n",
              Catch::getResultCapture().getCurrentTestName().c_str(), r.inputs.size(), worst_abs,
              worst_rel);
  CHECK(checked > 0);
  CHECK(r.inputs.size() == in.size());  // every input (and parameter) was checked
}

// Every row of a registry layer's gradcheck passed (and there was at least one).
inline bool all_passed(const std::vector<nn::GradcheckRow>& rows) {
  for (const auto& r : rows)
    if (!r.passed) return false;
  return !rows.empty();
}

// A PyTorch reference script (tests/nn/reference_*.py) run by /usr/bin/python3 on the cases in
// a folder, its stdout and stderr kept for a failure's message.
struct ReferenceRun {
  std::string command, output;
  int status = -1;  // std::system's
  // "command: ...\nexit status N\noutput:\n...", for INFO
  std::string report() const {
    return "command: " + command + "\nexit status " + std::to_string(status) + "\noutput:\n" +
           output;
  }
};

// Runs `/usr/bin/python3 SCRIPT DIR`, its output in DIR/python.log. Callers INFO(report()) and
// REQUIRE status 0, so that the failure (and every later one) shows the script's output.
inline ReferenceRun run_reference(const std::string& script, const TempDir& dir) {
  ReferenceRun r;
  const std::string log = dir.file("python.log");
  r.command = "/usr/bin/python3 '" + script + "' '" + dir.path.string() + "' > '" + log + "' 2>&1";
  r.status = std::system(r.command.c_str());
  r.output = read_file(log);
  return r;
}

}  // namespace qkv::testing

// Ends the running test case as skipped where /usr/bin/python3 cannot import torch. Only where
// QKV_SKIP may stand.
#define SKIP_WITHOUT_TORCH()                                                     \
  do {                                                                           \
    if (std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") != 0) \
      QKV_SKIP("/usr/bin/python3 has no torch (Debian's python3-torch)");        \
  } while (0)
