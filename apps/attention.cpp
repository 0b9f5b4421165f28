// qkv attention DIR TEXT --out map.png [--kind self|decoder-self|cross] [--layer L] [--head
// H|mean]: runs a trained model on one input and draws one attention matrix as a labelled heatmap.
#include <algorithm>
#include <cstdio>

#include "apps/commands.hpp"
#include "apps/heatmap.hpp"
#include "apps/limits.hpp"
#include "apps/run.hpp"
#include "core/parallel.hpp"
#include "data/tokenizer.hpp"

namespace qkv::app {

namespace {

Tensor row_of(const data::Ids& ids) {
  return from_vector<int64_t>(ids, {1, static_cast<int64_t>(ids.size())});
}

std::vector<std::string> tokens_of(const data::Ids& ids, const data::Vocab& v) {
  std::vector<std::string> t;
  for (int64_t id : ids) t.push_back(v.token(id));
  return t;
}

}  // namespace

int cmd_attention(const AttentionArgs& a) {
  QKV_CHECK(a.kind == "self" || a.kind == "cross" || a.kind == "decoder-self", "attention",
            "--kind must be self (encoder), decoder-self or cross, got '", a.kind, "'");
  QKV_CHECK(!a.out.empty(), "attention", "--out FILE.png (or .svg) is required");
  LoadedRun r = load_run(a.run_dir, a.checkpoint);
  apply_threads(a.threads > 0 ? a.threads : r.config.threads,
                a.threads > 0 ? "--threads" : "threads");
  const nn::Seq2Seq& model = *r.model;
  const data::Framing& f = r.data.framing;

  // The model's own output (greedy), then one teacher-forced pass over it to get the maps.
  const data::Ids src = encode_source(r, a.text, a.run_dir, "attention");
  const int64_t max_len = static_cast<int64_t>(src.size()) + r.config.train.max_decode_extra;
  data::Ids out = greedy_decode(model, {src}, f, {max_len})[0];
  data::Ids full{f.bos};
  full.insert(full.end(), out.begin(), out.end());
  if (f.eos >= 0) full.push_back(f.eos);
  QKV_CHECK(full.size() >= 2, "attention", "the model produced no output for '", a.text, "'");
  const data::Ids tgt_in(full.begin(), full.end() - 1), tgt_out(full.begin() + 1, full.end());

  nn::AttentionMaps maps;
  {
    ag::NoGrad no_grad;
    const bool was = model.is_training();
    auto& m = const_cast<nn::Seq2Seq&>(model);
    m.eval();
    const Tensor sv = ones({1, static_cast<int64_t>(src.size())}, DType::b8);
    const Tensor tv = ones({1, static_cast<int64_t>(tgt_in.size())}, DType::b8);
    model.forward(row_of(src), row_of(tgt_in), sv, tv, &maps);
    m.train(was);
  }
  const std::vector<ag::Var>& list = a.kind == "self"    ? maps.encoder_self
                                     : a.kind == "cross" ? maps.decoder_cross
                                                         : maps.decoder_self;
  const int64_t layers = static_cast<int64_t>(list.size());
  QKV_CHECK(layers > 0, "attention", "the model has no ", a.kind, "-attention layers");
  const int64_t layer = a.layer == 0 ? layers : a.layer;
  QKV_CHECK(layer >= 1 && layer <= layers, "attention", "--layer must be in 1..", layers, " (",
            a.kind, "-attention layers of this model), got ", a.layer);
  const Tensor w = list[layer - 1].data().to(DType::f64).select(0, 0);  // (h, n, m)
  const int64_t heads = w.size(0);
  Tensor mat;
  std::string head_text;
  if (a.head == "mean") {
    mat = mean(w, {0});
    head_text = heads == 1 ? "1 head" : "mean of " + std::to_string(heads) + " heads";
  } else {
    int64_t h = 0;
    try {
      size_t used = 0;
      h = std::stoll(a.head, &used);
      if (used != a.head.size()) h = 0;
    } catch (const std::exception&) {
      h = 0;
    }
    QKV_CHECK(h >= 1 && h <= heads, "attention", "--head must be mean or a head in 1..", heads,
              ", got '", a.head, "'");
    mat = w.select(0, h - 1);
    head_text = "head " + std::to_string(h) + " of " + std::to_string(heads);
  }

  const std::vector<std::string> src_tok = tokens_of(src, r.data.src_vocab);
  const std::vector<std::string> out_tok = tokens_of(tgt_out, r.data.tgt_vocab);
  Heatmap hm;
  hm.rows = mat.size(0);
  hm.cols = mat.size(1);
  hm.values = to_vector<double>(mat.contiguous());
  hm.cell = a.cell;
  const std::string where =
      "layer " + std::to_string(layer) + "/" + std::to_string(layers) + ", " + head_text;
  if (a.kind == "self") {
    hm.title = "encoder self-attention, " + where;
    hm.row_labels = hm.col_labels = src_tok;
    hm.x_label = "key (source)";
    hm.y_label = "query (source)";
  } else if (a.kind == "cross") {
    hm.title = "cross-attention, " + where;
    hm.row_labels = out_tok;
    hm.col_labels = src_tok;
    hm.x_label = "key (source)";
    hm.y_label = "output token";
  } else {
    hm.title = "decoder self-attention, " + where;
    hm.row_labels = out_tok;
    hm.col_labels = tokens_of(tgt_in, r.data.tgt_vocab);
    hm.x_label = "key (decoder input)";
    hm.y_label = "output token";
  }
  write_heatmap(a.out, hm);
  const HeatmapLayout l = heatmap_layout(hm);
  const bool synthetic = is_symbol_task(r.config.data);
  const std::vector<std::string> toks = r.data.tgt_vocab.decode(out);
  std::string shown;
  if (synthetic)
    for (size_t i = 0; i < toks.size(); ++i) shown += (i ? " " : "") + toks[i];
  else
    shown = data::detokenize(toks);
  std::printf("output: %s\nwrote %s (%d x %d): %s, %lld x %lld\n", shown.c_str(), a.out.c_str(),
              l.width, l.height, hm.title.c_str(), static_cast<long long>(hm.rows),
              static_cast<long long>(hm.cols));
  return 0;
}

}  // namespace qkv::app
