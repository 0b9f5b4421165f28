// One input through a trained model, every attention map kept (see inspect.hpp).
#include "serve/inspect.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "data/lm.hpp"
#include "data/tokenizer.hpp"
#include "figures/attention_maps.hpp"

namespace qkv::serve {

namespace {

Tensor row_of(const data::Ids& ids) {
  return from_vector<int64_t>(ids, {1, static_cast<int64_t>(ids.size())});
}

// A language model: the text itself is the context. One causal pass gives every layer's
// self-attention (a.maps.decoder_self) and the model's next-token guess at each position.
AttendedInput attend_lm(const run::LoadedRun& r, const data::Ids& ids) {
  const nn::DecoderLM& lm = r.lm("attention");
  const int64_t context = std::min(r.config.data.block_size, lm.max_positions());
  QKV_CHECK(!ids.empty(), "attention", "the text is empty");
  QKV_CHECK(static_cast<int64_t>(ids.size()) <= context, "attention", "the text has ", ids.size(),
            r.data.tgt_spm ? " pieces" : " characters", ", more than the model's context of ",
            context);
  AttendedInput a;
  a.src = a.tgt_in = a.tgt_out = ids;  // each query is a token of the text
  ag::NoGrad no_grad;
  auto& m = const_cast<nn::DecoderLM&>(lm);
  const bool was = m.is_training();
  m.eval();
  a.logits = lm.forward(row_of(ids), Tensor(), &a.maps.decoder_self).data().select(0, 0);
  m.train(was);
  a.out = to_vector<int64_t>(argmax(a.logits, -1));
  return a;
}

}  // namespace

AttendedInput attend(const run::LoadedRun& r, const data::Ids& src) {
  if (r.task().language_model()) return attend_lm(r, src);
  const nn::Seq2Seq& model = r.seq2seq("attention");
  const data::Framing& f = r.data.framing;
  AttendedInput a;
  a.src = src;
  // The model's own output (greedy), then one teacher-forced pass over it to get the maps.
  const int64_t max_len = static_cast<int64_t>(src.size()) + r.config.train.max_decode_extra;
  a.out = run::greedy_decode(model, {src}, f, {max_len})[0];
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
  a.logits = model.forward(row_of(src), row_of(a.tgt_in), sv, tv, &a.maps).data().select(0, 0);
  m.train(was);
  return a;
}

int64_t attention_heads(const AttendedInput& a) { return figures::attention_heads(a.maps); }

std::vector<std::string> token_labels(const data::Ids& ids, const data::Vocab& v) {
  std::vector<std::string> t;
  for (int64_t id : ids) {
    const std::string& piece = v.token(id);
    if (piece == " " || piece == "\n") {  // a character model's blank characters, made visible
      t.push_back(piece == " " ? "_" : "\\n");
      continue;
    }
    std::string label;
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

std::string target_text(const run::LoadedRun& r, const data::Ids& ids) {
  if (r.task()
          .language_model()) {  // the text, with a line break shown as \n to keep the line whole
    data::LmDetokenizer text(r.data.tgt_vocab, r.data.tgt_spm != nullptr);
    std::string shown;
    for (const int64_t id : ids) {
      const std::string s = text.next(id);
      shown += s == "\n" ? "\\n" : s;
    }
    return shown;
  }
  if (!run::is_symbol_task(r.config.data)) return data::decode_target(r.data, ids);
  const std::vector<std::string> toks = r.data.tgt_vocab.decode(ids);
  std::string shown;
  for (size_t i = 0; i < toks.size(); ++i) shown += (i ? " " : "") + toks[i];
  return shown;
}

}  // namespace qkv::serve
