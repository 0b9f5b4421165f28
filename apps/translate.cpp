// qkv translate DIR [TEXT ...] [--beam N]: one output line per input (arguments or stdin lines).
#include <cmath>
#include <iostream>
#include <string>

#include "apps/commands.hpp"
#include "core/parallel.hpp"
#include "data/tokenizer.hpp"
#include "run/limits.hpp"
#include "run/run.hpp"

namespace qkv::app {

int cmd_translate(const TranslateArgs& a) {
  run::LoadedRun r = run::load_run(a.run_dir, a.checkpoint);
  QKV_CHECK(!r.task().language_model(), "translate", a.run_dir,
            " is a language model (model.kind = \"decoder\"): sample from it with qkv generate");
  run::apply_threads(a.threads > 0 ? a.threads : r.config.threads,
                     a.threads > 0 ? "--threads" : "threads");
  // The products' precision for all the decoding below (the weights stay fixed in it).
  const PrecisionScope precision(
      run::choose_precision(a.precision, r.config.precision, "precision"));
  QKV_CHECK(std::isfinite(a.alpha) && a.alpha >= 0, "translate",
            "--alpha must be a finite number >= 0, got ", a.alpha);
  const bool symbols = run::is_symbol_task(r.config.data);
  const nn::Seq2Seq& model = r.seq2seq("translate");
  auto one = [&](const std::string& text) {
    const data::Ids src = run::encode_source(r, text, a.run_dir, "translate");
    const int64_t max_len =
        a.max_len > 0 ? a.max_len
                      : static_cast<int64_t>(src.size()) + r.config.train.max_decode_extra;
    const data::Ids out =
        a.beam > 1 ? run::beam_decode(model, {src}, r.data.framing, a.beam, {max_len}, a.alpha)[0]
                   : run::greedy_decode(model, {src}, r.data.framing, {max_len})[0];
    std::vector<std::string> toks = r.data.tgt_vocab.decode(out);
    std::string line;
    if (symbols) {
      for (size_t i = 0; i < toks.size(); ++i) line += (i ? " " : "") + toks[i];
    } else {
      line = data::decode_target(r.data, out);  // detokenized (SentencePiece: plain text)
    }
    std::cout << line << std::endl;
  };
  if (!a.texts.empty()) {
    for (const std::string& t : a.texts) one(t);
  } else {
    std::string line;
    // One output line per input line, so outputs line up with inputs: a blank (or all-space)
    // input gives a blank output.
    while (std::getline(std::cin, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos)
        std::cout << std::endl;
      else
        one(line);
    }
  }
  return 0;
}

}  // namespace qkv::app
