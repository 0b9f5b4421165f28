// qkv attention DIR TEXT --out map.png [--kind self|decoder-self|cross] [--layer L] [--head
// H|mean]: runs a trained model on one input and draws one attention matrix as a labelled heatmap.
// A language model (model.kind = "decoder") draws the causal self-attention over TEXT itself.
#include <algorithm>
#include <cstdio>

#include "apps/attention_maps.hpp"
#include "apps/commands.hpp"
#include "core/parallel.hpp"
#include "data/lm.hpp"
#include "data/tokenizer.hpp"
#include "figures/attention_maps.hpp"
#include "run/limits.hpp"

namespace qkv::app {

using namespace figures;

namespace {

Tensor row_of(const data::Ids& ids) {
  return from_vector<int64_t>(ids, {1, static_cast<int64_t>(ids.size())});
}

// Labels: SentencePiece's word-start mark U+2581 is drawn as "_" (the heatmap font is ASCII).
std::vector<std::string> tokens_of(const data::Ids& ids, const data::Vocab& v) {
  std::vector<std::string> t;
  for (int64_t id : ids) {
    const std::string& piece = v.token(id);
    std::string label;
    if (piece == " " || piece == "\n") {  // a character model's blank characters, made visible
      t.push_back(piece == " " ? "_" : "\\n");
      continue;
    }
    for (size_t i = 0; i < piece.size(); ++i) {
      if (piece.compare(i, 3, "\xE2\x96\x81") == 0) {
        label += '_';
        i += 2;
      } else {
        label += piece[i];
      }
    }
    t.push_back(std::move(label));
  }
  return t;
}

// A language model: the text itself is the context. One causal pass gives every layer's
// self-attention (a.maps.decoder_self) and the model's next-token guess at each position.
AttendedInput attend_lm(const LoadedRun& r, const data::Ids& ids) {
  const nn::DecoderLM& lm = *r.model->lm;
  const int64_t context = std::min(r.config.data.block_size, lm.max_positions());
  QKV_CHECK(!ids.empty(), "attention", "the text is empty");
  QKV_CHECK(static_cast<int64_t>(ids.size()) <= context, "attention", "the text has ", ids.size(),
            r.data.tgt_spm ? " pieces" : " characters", ", more than the model's context of ",
            context);
  AttendedInput a;
  a.src = a.tgt_in = a.tgt_out = ids;  // each query is a token of the text
  ag::NoGrad no_grad;
  auto& m = const_cast<nn::Seq2Seq&>(*r.model);
  const bool was = m.is_training();
  m.eval();
  const Tensor logits =
      lm.forward(row_of(ids), Tensor(), &a.maps.decoder_self).data();  // (1, T, V)
  m.train(was);
  a.out = to_vector<int64_t>(argmax(logits.select(0, 0), -1));
  return a;
}

}  // namespace

AttendedInput attend(const LoadedRun& r, const data::Ids& src) {
  if (r.model->lm) return attend_lm(r, src);
  const nn::Seq2Seq& model = *r.model;
  const data::Framing& f = r.data.framing;
  AttendedInput a;
  a.src = src;
  // The model's own output (greedy), then one teacher-forced pass over it to get the maps.
  const int64_t max_len = static_cast<int64_t>(src.size()) + r.config.train.max_decode_extra;
  a.out = greedy_decode(model, {src}, f, {max_len})[0];
  data::Ids full{f.bos};
  full.insert(full.end(), a.out.begin(), a.out.end());
  if (f.eos >= 0) full.push_back(f.eos);
  QKV_CHECK(full.size() >= 2, "attention", "the model produced no output for this input");
  a.tgt_in.assign(full.begin(), full.end() - 1);
  a.tgt_out.assign(full.begin() + 1, full.end());
  ag::NoGrad no_grad;
  const bool was = model.is_training();
  auto& m = const_cast<nn::Seq2Seq&>(model);
  m.eval();
  const Tensor sv = ones({1, static_cast<int64_t>(src.size())}, DType::b8);
  const Tensor tv = ones({1, static_cast<int64_t>(a.tgt_in.size())}, DType::b8);
  model.forward(row_of(src), row_of(a.tgt_in), sv, tv, &a.maps);
  m.train(was);
  return a;
}

int64_t attention_heads(const AttendedInput& a) { return figures::attention_heads(a.maps); }

figures::Heatmap attention_heatmap(const LoadedRun& r, const AttendedInput& a,
                                   const std::string& kind, int64_t layer, const std::string& head,
                                   int cell, const char* op) {
  const figures::AttentionLabels labels{
      tokens_of(a.src, r.data.src_vocab), tokens_of(a.tgt_in, r.data.tgt_vocab),
      tokens_of(a.tgt_out, r.data.tgt_vocab), r.model->lm != nullptr};
  return figures::attention_heatmap(a.maps, labels, kind, layer, head, cell, op);
}

std::string target_text(const LoadedRun& r, const data::Ids& ids) {
  const std::vector<std::string> toks = r.data.tgt_vocab.decode(ids);
  if (r.model->lm) {  // the text, with a line break shown as \n to keep the line whole
    data::LmDetokenizer text(r.data.tgt_vocab, r.data.tgt_spm != nullptr);
    std::string shown;
    for (const int64_t id : ids) {
      const std::string s = text.next(id);
      shown += s == "\n" ? "\\n" : s;
    }
    return shown;
  }
  if (!is_symbol_task(r.config.data)) return data::decode_target(r.data, ids);
  std::string shown;
  for (size_t i = 0; i < toks.size(); ++i) shown += (i ? " " : "") + toks[i];
  return shown;
}

int cmd_attention(const AttentionArgs& a) {
  QKV_CHECK(a.kind.empty() || a.kind == "self" || a.kind == "cross" || a.kind == "decoder-self",
            "attention", "--kind must be self (encoder), decoder-self or cross, got '", a.kind,
            "'");
  QKV_CHECK(!a.out.empty(), "attention", "--out FILE.png (or .svg) is required");
  LoadedRun r = load_run(a.run_dir, a.checkpoint);
  apply_threads(a.threads > 0 ? a.threads : r.config.threads,
                a.threads > 0 ? "--threads" : "threads");
  const bool lm = r.model->lm != nullptr;
  // By default the map that shows the most: cross-attention, or a language model's only kind.
  const std::string kind = !a.kind.empty() ? a.kind : lm ? "self" : "cross";
  const data::Ids src =
      lm ? data::encode_lm_text(a.text, r.data.tgt_vocab, r.data.tgt_spm.get(), "attention: TEXT")
         : encode_source(r, a.text, a.run_dir, "attention");
  const AttendedInput att = attend(r, src);
  const Heatmap hm = attention_heatmap(r, att, kind, a.layer, a.head, a.cell);
  write_heatmap(a.out, hm);
  const HeatmapLayout l = heatmap_layout(hm);
  std::printf("%s%s\nwrote %s (%d x %d): %s, %lld x %lld\n",
              !lm              ? "output: "
              : r.data.tgt_spm ? "next-piece guesses: "
                               : "next-character guesses: ",
              target_text(r, att.out).c_str(), a.out.c_str(), l.width, l.height, hm.title.c_str(),
              static_cast<long long>(hm.rows), static_cast<long long>(hm.cols));
  return 0;
}

}  // namespace qkv::app
