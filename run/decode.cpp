#include "run/decode.hpp"

#include <algorithm>
#include <chrono>

#include "core/cancel.hpp"
#include "core/precision.hpp"
#include "data/metrics.hpp"
#include "nn/inference_scope.hpp"

namespace qkv::run {

std::pair<Tensor, Tensor> pad_sources(const std::vector<data::Ids>& srcs) {
  int64_t s = 1;
  for (const auto& x : srcs) s = std::max<int64_t>(s, static_cast<int64_t>(x.size()));
  const int64_t b = static_cast<int64_t>(srcs.size());
  Tensor ids = zeros({b, s}, DType::i64), valid = zeros({b, s}, DType::b8);
  int64_t* p = ids.data<int64_t>();
  uint8_t* v = valid.data<uint8_t>();
  for (int64_t i = 0; i < b; ++i)
    for (size_t j = 0; j < srcs[i].size(); ++j) {
      p[i * s + static_cast<int64_t>(j)] = srcs[i][j];
      v[i * s + static_cast<int64_t>(j)] = 1;
    }
  return {ids, valid};
}

std::vector<data::Ids> greedy_decode(const nn::EncoderDecoder& model,
                                     const std::vector<data::Ids>& srcs, const data::Framing& f,
                                     const std::vector<int64_t>& max_lens) {
  const nn::InferenceScope scope(model);
  const int64_t b = static_cast<int64_t>(srcs.size());
  std::vector<data::Ids> out(b);
  if (b == 0) return out;
  auto [ids, valid] = pad_sources(srcs);
  auto state = model.start_decoding(model.encode(ids, valid), valid);
  std::vector<bool> done(b, false);
  Tensor tokens = full({b}, static_cast<double>(f.bos), DType::i64);
  const int64_t longest = *std::max_element(max_lens.begin(), max_lens.end());
  for (int64_t t = 0; t < longest; ++t) {
    // each step is a pass
    cancellation_point();
    const Tensor next = argmax(model.decode_step(state, tokens).data(), -1);  // (B)
    const int64_t* p = next.data<int64_t>();
    bool all = true;
    for (int64_t i = 0; i < b; ++i) {
      if (done[i]) continue;
      if ((f.eos >= 0 && p[i] == f.eos) || static_cast<int64_t>(out[i].size()) >= max_lens[i]) {
        done[i] = true;
        continue;
      }
      out[i].push_back(p[i]);
      if (static_cast<int64_t>(out[i].size()) >= max_lens[i] && f.eos < 0) done[i] = true;
      all = all && done[i];
    }
    if (all) break;
    tokens = next;
  }
  return out;
}

Metrics evaluate(const nn::EncoderDecoder& model, const data::Dataset& ds, const data::Framing& f,
                 int64_t batch_size, const ScoredLength& length, int64_t limit,
                 const data::DataSplits* text) {
  // A scope boundary: the weights may have changed since the last products (a checkpoint was
  // loaded), so their bf16 copies are made afresh; the precision stays the caller's.
  const nn::InferenceScope scope(model, current_precision());
  const bool score_text = text != nullptr && !ds.text.empty();
  Metrics m;
  const int64_t n = limit > 0 ? std::min(limit, ds.size()) : ds.size();
  double loss_sum = 0;
  int64_t correct_tokens = 0, exact = 0;
  for (int64_t at = 0; at < n; at += batch_size) {
    cancellation_point();
    std::vector<int64_t> idx;
    for (int64_t i = at; i < std::min(n, at + batch_size); ++i) idx.push_back(i);
    const data::Batch b = data::make_batch(ds, idx, f);
    const ag::Var logits = model.forward(b.src, b.tgt_in, b.src_mask, b.tgt_mask);
    const int64_t v = logits.size(-1);
    const Tensor labels = b.tgt_out.flatten();
    const ag::Var loss = ag::cross_entropy(ag::reshape(logits, {-1, v}), labels, 0);
    loss_sum += loss.item() * static_cast<double>(b.tgt_tokens);
    const Tensor pred = argmax(logits.data(), -1).flatten();
    const Tensor hit = logical_and(eq(pred, labels), ne(labels, 0.0));
    correct_tokens += static_cast<int64_t>(sum(hit).item());
    m.tokens += b.tgt_tokens;
    // Greedy exact match.
    std::vector<data::Ids> srcs;
    std::vector<int64_t> lens;
    for (int64_t i : idx) {
      const data::Example& e = ds.examples[static_cast<size_t>(i)];
      srcs.push_back(e.src);
      lens.push_back(
          length(static_cast<int64_t>(e.src.size()), static_cast<int64_t>(e.tgt.size())));
    }
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<data::Ids> outs = greedy_decode(model, srcs, f, lens);
    m.decode_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (size_t i = 0; i < idx.size(); ++i) exact += outs[i] == ds.examples[idx[i]].tgt;
    if (score_text)
      for (const data::Ids& o : outs) m.hypotheses.push_back(data::decode_target(*text, o));
  }
  if (score_text) {
    std::vector<std::string> refs;
    for (int64_t i = 0; i < n; ++i) refs.push_back(ds.text[static_cast<size_t>(i)].tgt);
    m.bleu = data::corpus_bleu(m.hypotheses, refs).score;
    m.chrf = data::corpus_chrf(m.hypotheses, refs).score;
  }
  m.examples = n;
  m.loss = m.tokens ? loss_sum / static_cast<double>(m.tokens) : 0.0;
  m.token_accuracy =
      m.tokens ? static_cast<double>(correct_tokens) / static_cast<double>(m.tokens) : 0.0;
  m.exact_match = n ? static_cast<double>(exact) / static_cast<double>(n) : 0.0;
  return m;
}

}  // namespace qkv::run
