// The server's one door into run/: a trained run's checkpoint loaded once and asked questions
// (decode, sample, attention, next-token probabilities), answers as JSON. Everything `qkv serve`
// needs of run/, data/ and nn/ goes through here, so the server itself knows none of them.
//
// Every answer comes from the run's inference interface (run/inference.hpp), in the run's
// precision or the one `qkv serve --precision` names: the page answers as `qkv translate` and
// `qkv generate` do, token for token.
//
// Thread safety: one Model may be asked from many threads; its Inference serialises the
// passes (they flip the model's shared training flag). Different Models run in parallel.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace qkv::serve {

// Bad input from a request (empty text, unknown symbols, too long): the message is one line
// and becomes an HTTP 400.
struct BadInput : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Bounds on what one request may ask for.
struct Limits {
  int64_t max_text_bytes = 4096;    // a source or prompt
  int64_t max_input_tokens = 256;  // a source or prompt (also bounded by the model's positions)
  int64_t max_new_tokens = 1000;    // one LM sample
  int64_t max_beam = 16;
  int64_t max_top_k = 20;  // next-token probabilities per position
};

struct SampleRequest {
  std::string prompt;
  int64_t tokens = 200;
  double temperature = 0.8, top_p = 1.0;
  int64_t top_k = 200;
  uint64_t seed = 1;
};

class Model {
 public:
  // run_dir's checkpoint `which` (best, latest, step-N), its products in `precision` (fp32,
  // bf16, auto; empty: the run's); qkv::Error when it cannot be loaded.
  Model(const std::string& run_dir, const std::string& which, const std::string& precision = "");
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const std::string& checkpoint() const { return checkpoint_; }  // the folder's name, step-N

  // {"source_tokens":[...], "greedy": text, "beam": text, "beam_size": n}
  nlohmann::json translate(const std::string& text, int64_t beam, const Limits& lim);
  // A language model's sample of r.tokens tokens after the prompt, each piece of text handed to
  // on_text as it is made (on_text returns false to stop early: the client went away).
  void generate(const SampleRequest& r, const Limits& lim,
                const std::function<bool(const std::string&)>& on_text);
  // Checks a sample request (bad options, prompt outside the vocabulary or longer than the
  // context) before any of it is streamed; throws BadInput.
  void check_sample(const SampleRequest& r, const Limits& lim);
  // Every layer's and head's attention for one input, with the tokens of the axes:
  // {"output": text, "kinds":[{"kind","title","rows":[labels],"cols":[labels],
  //   "layers":[[ head (n x m, row-major) ... ] ...]}]}
  nlohmann::json attention(const std::string& text, const Limits& lim);
  // The top-k next-token probabilities at each position (LM) or output step (Seq2Seq):
  // {"steps":[{"at": label, "top":[{"token","p"}...]}...]}
  nlohmann::json next_tokens(const std::string& text, int64_t k, const Limits& lim);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string checkpoint_;
};

// The checkpoints of a run folder: "best" and "latest" when they exist, then each kept step-N
// folder's name, oldest first. Reads only names (a training may be adding and removing them).
nlohmann::json list_checkpoints(const std::string& run_dir);
// The checkpoint folder's name `which` resolves to now (best and latest move while a training
// runs); qkv::Error when there is none.
std::string resolve_checkpoint_name(const std::string& run_dir, const std::string& which);
// A run folder's key facts from its config.toml: task, model kind and sizes, data and optimiser
// settings. qkv::Error when the config cannot be read.
nlohmann::json run_facts(const std::string& run_dir);

}  // namespace qkv::serve
