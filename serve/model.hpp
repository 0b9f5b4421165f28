// The server's one door into run/: a trained run's checkpoint loaded once and asked questions
// (decode, sample, attention, next-token probabilities), answers as JSON. Everything `qkv serve`
// needs of run/, data/ and nn/ goes through here, so the server itself knows none of them.
//
// Every answer comes from the run's inference interface (run/inference.hpp), in the run's
// precision or the one `qkv serve --precision` names: the page answers as `qkv translate` and
// `qkv generate` do, token for token.
//
// Every question may name heads to remove, "ablate": "L.H,..." as `--ablate` names them
// (inspect/heads.hpp): the answer is the one of the model with those heads zero-ablated. An
// empty or absent ablate installs nothing (the answer is the same bits as without).
//
// Thread safety: one Model answers many questions at once, each on its own thread (its
// Inference's calls run concurrently: run/inference.hpp), each with its own ablation. How many
// compute at once is the server's business (queue.hpp). A question stops at its next pass
// boundary when its thread's cancellation token is cancelled (core/cancel.hpp: Cancelled).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/precision.hpp"
#include "data/dataset.hpp"
#include "inspect/work.hpp"

namespace qkv::run {
class Inference;
}

namespace qkv::serve {

// Bad input from a request (empty text, unknown symbols, too long): the message is one line
// and becomes an HTTP 400.
struct BadInput : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Bounds on what one request may ask for.
struct Limits {
  int64_t max_text_bytes = 4096;   // a source or prompt
  int64_t max_input_tokens = 256;  // a source or prompt (also bounded by the model's positions)
  int64_t max_new_tokens = 1000;   // one LM sample
  int64_t max_beam = 16;
  int64_t max_top_k = 20;  // next-token probabilities per position
  // The head table runs a split: at most this many batches of it, and of probe sequences, and
  // at most max_head_work token passes in all (inspect/work.hpp).
  int64_t max_head_batches = 8;
  int64_t max_probes = 16;
  int64_t max_head_work = inspect::kMaxHeadsWork;
  // Token attribution and attribution patching (serve/attribution.hpp): integrated gradients'
  // steps, a language model's scored tokens, the exact patches of one request, and each
  // request's token passes (as `qkv attribute` and `qkv patch` bound them by default).
  int64_t max_attribution_steps = 256;
  int64_t max_attribution_tokens = 64;
  int64_t max_patch_check = 64;
  int64_t max_attribution_work = 1'000'000;
  int64_t max_patch_work = inspect::kMaxPatchWork;
};

struct SampleRequest {
  std::string prompt;
  int64_t tokens = 200;
  double temperature = 0.8, top_p = 1.0;
  int64_t top_k = 200;
  uint64_t seed = 1;
  std::string ablate;  // heads removed while sampling
};

// POST .../heads: the head table's options (inspect/head_table.hpp), as `qkv heads` takes them;
// batches kAsManyAsFit (absent): up to 4, as many as Limits::max_head_work allows.
inline constexpr int64_t kAsManyAsFit = -1;
struct HeadsRequest {
  std::string split = "valid";
  int64_t batches = kAsManyAsFit, probes = 4;
  uint64_t seed = 1;
};

// POST .../lens: the logit lens of text, the k most likely tokens per layer, and with a target
// token its direct logit attribution (inspect/lens.hpp, inspect/attribution.hpp).
struct LensRequest {
  std::string text, target;
  int64_t top = 5;
};

class Model {
 public:
  // run_dir's checkpoint `which` (best, latest, step-N), its products in `precision` (fp32,
  // bf16, auto; empty: the run's); qkv::Error when it cannot be loaded.
  Model(const std::string& run_dir, const std::string& which,
        std::optional<Precision> precision = std::nullopt);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const std::string& checkpoint() const { return checkpoint_; }  // the folder's name, step-N

  // {"source_tokens":[...], "greedy": text, "beam": text, "beam_size": n}
  nlohmann::json translate(const std::string& text, int64_t beam, const Limits& lim,
                           const std::string& ablate = "");
  // The input's class probabilities, as `qkv classify --json` prints them:
  // {"tokens":[...], "predicted": name, "classes":[{"class": name, "p": probability}...]}
  nlohmann::json classify(const std::string& text, const Limits& lim,
                          const std::string& ablate = "");
  // A language model's sample of r.tokens tokens after the prompt, each piece of text handed to
  // on_text as it is made (on_text returns false when the client went away: Cancelled is
  // thrown). A bad request throws BadInput before the first piece, but the server asks
  // check_sample first.
  void generate(const SampleRequest& r, const Limits& lim,
                const std::function<bool(const std::string&)>& on_text);
  // Checks a sample request (unknown heads to ablate, bad options, prompt outside the
  // vocabulary or longer than the context) before any of it is streamed; throws BadInput.
  // Installs nothing and runs no pass.
  void check_sample(const SampleRequest& r, const Limits& lim) const;
  // Every layer's and head's attention for one input, with the tokens of the axes:
  // {"output": text, "kinds":[{"kind","title","site","rows":[labels],"cols":[labels],
  //   "layers":[[ head (n x m, row-major) ... ] ...]}]}, one per attention site in forward
  // order: "site" is {"name", "title", "head_prefix", "queries", "keys", "causal", "layers",
  // "heads"} (nn/attention_site.hpp), "kind" its key on the page (encoder_self, cross, ...).
  // k > 0: also next_tokens's "steps", from the same pass (the page asks for both at once).
  nlohmann::json attention(const std::string& text, const Limits& lim,
                           const std::string& ablate = "", int64_t k = 0);
  // The top-k next-token probabilities at each position (LM) or output step (Seq2Seq):
  // {"steps":[{"at": label, "top":[{"token","p"}...]}...]}
  nlohmann::json next_tokens(const std::string& text, int64_t k, const Limits& lim,
                             const std::string& ablate = "");
  // The head table as `qkv heads --json` prints it (inspect::head_table_json), within the
  // limits' batches and probes.
  nlohmann::json heads(const HeadsRequest& r, const Limits& lim, const std::string& ablate = "");
  // The logit lens as `qkv lens --json` prints it (inspect::lens_json). With r.target, also
  // the attribution, or when it fails (a target that is no output token, a post-LN model)
  // "attribution_error": its one-line message beside the lens.
  nlohmann::json lens(const LensRequest& r, const Limits& lim, const std::string& ablate = "");
  // f's answer from the loaded inference, with the heads `ablate` names removed around it (an
  // unknown head is a BadInput naming op --ablate) and f's qkv::Error a BadInput: the door the
  // look-inside questions outside this file take (serve/attribution.hpp).
  nlohmann::json ask(const std::string& ablate, const char* op,
                     const std::function<nlohmann::json(const run::Inference&)>& f);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string checkpoint_;
};

// The text's ids, as the run reads input (what names the text in a message: "the text"),
// within the model's positions and lim's bytes and tokens; BadInput otherwise.
data::Ids encode_input(const run::Inference& inf, const std::string& text, const Limits& lim);

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
