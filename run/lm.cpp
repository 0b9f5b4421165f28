#include "run/lm.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/cancel.hpp"
#include "data/lm.hpp"
#include "nn/inference_scope.hpp"

namespace qkv::run {

double lm_loss_estimate(const nn::DecoderLM& model, const data::Ids& tokens, int64_t block,
                        int64_t batch, int64_t iters, Generator& gen) {
  const nn::InferenceScope scope(model);
  double sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    cancellation_point();
    const data::Batch b = data::lm_batch(
        tokens, data::lm_offsets(static_cast<int64_t>(tokens.size()), block, batch, gen), block);
    const ag::Var logits = model.forward(b.tgt_in);
    sum += ag::cross_entropy(ag::reshape(logits, {-1, logits.size(-1)}), b.tgt_out.flatten(), -1)
               .item();
  }
  return sum / static_cast<double>(iters);
}

LmLoss lm_loss_full(const nn::DecoderLM& model, const data::Ids& tokens, int64_t block,
                    int64_t batch) {
  const nn::InferenceScope scope(model);
  std::vector<int64_t> offsets;
  for (int64_t o = 0; o + block < static_cast<int64_t>(tokens.size()); o += block)
    offsets.push_back(o);
  LmLoss r;
  double sum = 0;
  for (size_t at = 0; at < offsets.size(); at += static_cast<size_t>(batch)) {
    cancellation_point();
    const std::vector<int64_t> part(
        offsets.begin() + static_cast<std::ptrdiff_t>(at),
        offsets.begin() + static_cast<std::ptrdiff_t>(std::min(offsets.size(), at + batch)));
    const data::Batch b = data::lm_batch(tokens, part, block);
    const ag::Var logits = model.forward(b.tgt_in);
    const double mean =
        ag::cross_entropy(ag::reshape(logits, {-1, logits.size(-1)}), b.tgt_out.flatten(), -1)
            .item();
    sum += mean * static_cast<double>(b.tgt_tokens);
    r.tokens += b.tgt_tokens;
  }
  r.windows = static_cast<int64_t>(offsets.size());
  r.loss = r.tokens ? sum / static_cast<double>(r.tokens) : 0.0;
  return r;
}

void validate(const SampleOptions& o) {
  QKV_CHECK(std::isfinite(o.temperature) && o.temperature >= 0, "generate",
            "--temperature must be >= 0 (0: greedy), got ", o.temperature);
  // Logits divided by a temperature near zero overflow to inf, and inf - inf samples garbage;
  // below 1e-6 the distribution is the greedy choice anyway, which 0 asks for exactly.
  QKV_CHECK(o.temperature == 0 || o.temperature >= 1e-6, "generate",
            "--temperature must be 0 (greedy) or at least 1e-06, got ", o.temperature);
  QKV_CHECK(o.top_k >= 0, "generate", "--top-k must be >= 0 (0: all tokens), got ", o.top_k);
  QKV_CHECK(o.top_p > 0 && o.top_p <= 1, "generate", "--top-p must be in (0, 1], got ", o.top_p);
}

int64_t sample_token(const Tensor& logits_in, const SampleOptions& o, Generator& gen) {
  const std::vector<double> logits = to_vector<double>(logits_in.to(DType::f64).contiguous());
  const int64_t v = static_cast<int64_t>(logits.size());
  QKV_CHECK(v > 0, "sample_token", "empty logits");
  if (o.temperature == 0)
    return std::max_element(logits.begin(), logits.end()) - logits.begin();  // first maximum
  // Tokens by decreasing logit (ties by id, so the order is deterministic).
  std::vector<int64_t> order(static_cast<size_t>(v));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  size_t keep =
      o.top_k > 0 ? std::min<size_t>(static_cast<size_t>(o.top_k), order.size()) : order.size();
  std::vector<double> p(keep);
  const double top = logits[order[0]] / o.temperature;
  double z = 0;
  for (size_t i = 0; i < keep; ++i) z += p[i] = std::exp(logits[order[i]] / o.temperature - top);
  if (o.top_p < 1) {  // the smallest prefix whose mass reaches top_p (at least one token)
    double mass = 0;
    size_t n = 0;
    while (n < keep && mass < o.top_p * z) mass += p[n++];
    keep = std::max<size_t>(n, 1);
    z = 0;
    for (size_t i = 0; i < keep; ++i) z += p[i];
  }
  double u = gen.next_uniform() * z;
  for (size_t i = 0; i < keep; ++i) {
    if (u < p[i]) return order[i];
    u -= p[i];
  }
  return order[keep - 1];  // rounding left u just past the last kept token
}

void generate(const nn::DecoderLM& lm, const data::Ids& prompt, int64_t n, int64_t context,
              const SampleOptions& o, Generator& gen, bool cached,
              const std::function<void(int64_t)>& on_token) {
  QKV_CHECK(!prompt.empty(), "generate", "empty prompt");
  QKV_CHECK(context >= 2 && static_cast<int64_t>(prompt.size()) <= context, "generate",
            "a prompt of ", prompt.size(), " tokens does not fit the context of ", context);
  validate(o);
  const nn::InferenceScope scope(lm);
  data::Ids seq = prompt;
  size_t start = 0;  // the context is seq[start:]
  nn::DecoderLM::Cache cache;
  auto row = [](const data::Ids& ids, size_t from) {
    const data::Ids part(ids.begin() + static_cast<std::ptrdiff_t>(from), ids.end());
    return from_vector<int64_t>(part, {1, static_cast<int64_t>(part.size())});
  };
  Tensor logits;  // (V): the next token's
  for (int64_t i = 0; i < n; ++i) {
    cancellation_point();  // each token is a pass
    // Room for the next token: drop the oldest half of a full context.
    bool reread = i == 0;
    if (static_cast<int64_t>(seq.size() - start) >= context) {
      start = seq.size() - static_cast<size_t>(context / 2);
      reread = true;
    }
    if (!cached) {
      const ag::Var out = lm.forward(row(seq, start));  // (1, t, V)
      logits = out.data().select(0, 0).select(0, out.size(1) - 1);
    } else if (reread) {
      cache = nn::DecoderLM::Cache();
      const ag::Var out = lm.step(cache, row(seq, start));
      logits = out.data().select(0, 0).select(0, out.size(1) - 1);
    } else {
      const ag::Var out = lm.step(cache, row(seq, seq.size() - 1));  // the newest token alone
      logits = out.data().select(0, 0).select(0, 0);
    }
    const int64_t next = sample_token(logits, o, gen);
    seq.push_back(next);
    on_token(next);
  }
}

}  // namespace qkv::run
