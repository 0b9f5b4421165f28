// lm: running text for a language model, the last 10% held out (data/lm.hpp).
#include <filesystem>

#include "data/lm.hpp"
#include "data/task_loading.hpp"

namespace qkv::data {

void load_task_lm(const DataConfig& c, DataSplits& out) {
  LmOptions o;
  o.tokenizer = c.tokenizer;
  o.spm = sentencepiece_options(c);
  if (!c.spm_dir.empty()) o.spm_model = (std::filesystem::path(c.spm_dir) / "spm.model").string();
  LmCorpus corpus = load_lm_corpus(c.path, o);
  QKV_DATA_KEY_CHECK(static_cast<int64_t>(corpus.valid.size()) > c.block_size, "block_size",
                     c.block_size, " does not fit in the validation text (", corpus.valid.size(),
                     " tokens, the last 10% of ", c.path, ")");
  out.lm_train = std::move(corpus.train);
  out.lm_valid = std::move(corpus.valid);
  out.src_vocab = out.tgt_vocab = corpus.vocab;
  if (corpus.spm) {
    out.tokenizer = TokenizerKind::sentencepiece;
    out.src_spm = out.tgt_spm = corpus.spm;
  }
  name_splits(out, c.path);
  out.framing = Framing{-1, -1};  // no <bos> / <eos>: windows of running text
}

}  // namespace qkv::data
