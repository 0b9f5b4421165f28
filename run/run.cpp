#include "run/run.hpp"

#include "core/precision.hpp"

#include "run/family.hpp"
#include "run/limits.hpp"
#include "runfolder/integrity.hpp"
#include "runfolder/run_file.hpp"

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/bounded_json.hpp"
#include "data/metrics.hpp"
#include "data/tokenizer.hpp"
#include "data/utf8.hpp"
#include "nn/safetensors.hpp"

namespace qkv::run {

namespace fs = std::filesystem;
using nlohmann::json;

double perplexity(double nats_per_token) { return std::exp(nats_per_token); }
double bits_per_token(double nats_per_token) { return nats_per_token / std::log(2.0); }

nn::ModelConfig model_config(const config::RunConfig& c, const data::DataSplits& d) {
  nn::ModelConfig m = c.model;
  m.src_vocab = d.src_vocab.size();
  m.tgt_vocab = d.tgt_vocab.size();
  return m;
}

LoadedRun load_run(const std::string& run_dir, const std::string& which) {
  return load_run(run_dir, parse_checkpoint_selector(which));
}

LoadedRun load_run(const std::string& run_dir, const CheckpointSelector& which) {
  const fs::path dir(run_dir);
  if (!fs::is_directory(dir)) throw Error(run_dir + ": no such run folder");
  if (!fs::exists(dir / "config.toml"))
    throw Error(run_dir + ": not a run folder (no config.toml)");
  LoadedRun r;
  r.dir = run_dir;
  r.config = config::load_config((dir / "config.toml").string());
  // A character language model samples with its saved vocabulary alone: no need to read its
  // text. (A SentencePiece one loads its model from the run folder through load_data.)
  bool data_loaded = false;
  if (r.family().needs_data(r.config) || !fs::exists(dir / "tgt_vocab.txt")) {
    data_loaded = true;
    check_data_memory(r.config);
    r.config.data.spm_dir = run_dir;  // the run's own SentencePiece models
    r.data = data::load_data(r.config.data);
  }
  // The vocabularies saved with the run are the ones the model was trained with; data made
  // from an edited config would hold ids the model has no row for.
  for (auto [file, vocab] : {std::pair{"src_vocab.txt", &r.data.src_vocab},
                             std::pair{"tgt_vocab.txt", &r.data.tgt_vocab}}) {
    if (!fs::exists(dir / file)) continue;
    const data::Vocab saved = data::Vocab::load((dir / file).string());
    // a model without a source side: its src_vocab.txt names nothing the model reads
    const bool used = r.family().reads_source() || vocab == &r.data.tgt_vocab;
    if (data_loaded && used && !(saved == *vocab))
      throw Error(run_dir + "/config.toml: its [data] section makes a vocabulary of " +
                  std::to_string(vocab->size()) + " tokens, not the " +
                  std::to_string(saved.size()) + " of " + file + " the model was trained with" +
                  (is_symbol_task(r.config.data) ? " (data.vocab_size" : " (the data") +
                  " changed since training; put the config back)");
    *vocab = saved;
  }
  check_model_memory(r.config, r.data.src_vocab.size(), r.data.tgt_vocab.size());
  Generator gen(r.config.seed);
  r.model = r.family().make_model(model_config(r.config, r.data), gen);
  // A training may be writing this run meanwhile: a checkpoint resolved here can lose its name
  // (checkpoint.keep) before its files are opened. Then resolve again; once open, the files
  // are read whole, and a named checkpoint never changes.
  for (int attempt = 1;; ++attempt) {
    r.checkpoint = resolve_checkpoint(run_dir, which);
    try {
      load_checkpoint(r.checkpoint, *r.model, nullptr);
      break;
    } catch (const Error&) {
      if (attempt >= 5 || fs::exists(r.checkpoint)) throw;
    }
  }
  r.model->eval();
  return r;
}

bool is_symbol_task(const data::DataConfig& dc) { return !data::is_text_pairs(dc.task); }

namespace {

// A typed symbol as an error message can show it: control bytes (a NUL would end the message
// where it is printed) as \xNN.
std::string visible(const std::string& s) {
  std::string out;
  for (const unsigned char c : s) {
    if (c >= 0x20 && c != 0x7f) {
      out += static_cast<char>(c);
      continue;
    }
    char buf[5];
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    out += buf;
  }
  return out;
}

}  // namespace

data::Ids encode_source(const LoadedRun& r, const std::string& input, const std::string& run_dir,
                        const char* op) {
  const data::DataConfig& dc = r.config.data;
  const std::string text = dc.lowercase ? data::to_lower_utf8(input) : input;
  data::Ids src;
  if (is_symbol_task(dc)) {
    std::istringstream words(text);
    std::string w;
    while (words >> w) {
      QKV_CHECK(r.data.src_vocab.contains(w), op, "symbol '", visible(w),
                "' is not in the task's vocabulary (", r.data.src_vocab.size(), " tokens, see ",
                run_dir, "/src_vocab.txt)");
      // <pad>, <bos>, <eos>, <unk> frame sequences; typed as input they mean nothing
      QKV_CHECK(!r.data.src_vocab.is_special(r.data.src_vocab.id(w)), op, "'", w,
                "' is a special token of the vocabulary, not an input symbol");
      src.push_back(r.data.src_vocab.id(w));
    }
  } else {
    src = data::encode_source_text(r.data, text);
    const data::Vocab& v = r.data.src_vocab;
    for (int64_t id : src)  // <unk> stands for unknown words; the others only frame sequences
      QKV_CHECK(id != v.pad() && id != v.bos() && id != v.eos(), op, "'", v.token(id),
                "' is a special token of the vocabulary, not input text");
  }
  QKV_CHECK(!src.empty(), op, "empty input");
  return src;
}

}  // namespace qkv::run
