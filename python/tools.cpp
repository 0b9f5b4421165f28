// The commands as functions: translate, generate, classify, score (qkv eval), heads, lens,
// patch and attribute, each with ablate= (the heads removed, as --ablate removes them: an
// inspect::Ablation on the thread that runs the call). The dicts are the commands' --json, built by
// the same library functions (run::scores_json, inspect::head_table_json, lens_json, patch_json,
// token_attribution_json, run::classification_json), so the numbers are the command line's to the
// last bit. The GIL is released while each runs.
#include <pybind11/stl.h>

#include <chrono>
#include <optional>

#include "core/error.hpp"
#include "data/lm.hpp"
#include "inspect/attribution.hpp"
#include "inspect/attribution_patching.hpp"
#include "inspect/head_table.hpp"
#include "inspect/heads.hpp"
#include "inspect/lens.hpp"
#include "inspect/patch.hpp"
#include "inspect/path_patching.hpp"
#include "inspect/token_attribution.hpp"
#include "inspect/work.hpp"
#include "python/run.hpp"

namespace qkv::python {

namespace {

using Json = nlohmann::json;

// ablate: None, "0.1,1.0" or ["0.1", "cross.1.0"] -> the --ablate spec.
std::string ablate_spec(const py::handle& ablate) {
  if (ablate.is_none()) return "";
  if (py::isinstance<py::str>(ablate)) return ablate.cast<std::string>();
  std::string spec;
  for (const std::string& h : ablate.cast<std::vector<std::string>>())
    spec += (spec.empty() ? "" : ",") + h;
  return spec;
}

py::object to_python(const Json& j) { return py::module_::import("json").attr("loads")(j.dump()); }

// texts: one str (-> one answer) or a list of them (-> a list).
bool one_text(const py::handle& texts) { return py::isinstance<py::str>(texts); }
std::vector<std::string> texts_of(const py::handle& texts) {
  if (one_text(texts)) return {texts.cast<std::string>()};
  return texts.cast<std::vector<std::string>>();
}

py::object translate(const Run& r, const py::handle& texts, int64_t beam, double alpha,
                     int64_t max_len, const py::handle& ablate) {
  const auto inf = r.get("translate");
  const std::vector<std::string> in = texts_of(texts);
  const std::string spec = ablate_spec(ablate);
  std::vector<std::string> out;
  {
    py::gil_scoped_release release;
    const inspect::Ablation ablation(*inf, spec, "translate");
    inf->require(run::Capability::decode, "translate");
    QKV_CHECK(beam >= 1 && alpha >= 0 && max_len >= 0, "translate",
              "beam must be >= 1, alpha >= 0 and max_len >= 0, got ", beam, ", ", alpha, ", ",
              max_len);
    const run::DecodeOptions o{.beam = beam, .alpha = alpha, .max_len = max_len};
    for (const std::string& t : in)  // one at a time, as qkv translate decodes its lines
      out.push_back(inf->text(inf->decode({inf->encode(t, "translate")}, o)[0]));
  }
  return one_text(texts) ? py::object(py::str(out[0])) : py::object(py::cast(out));
}

// The continuation only (qkv generate prints the prompt before it). A Ctrl-C between tokens
// raises KeyboardInterrupt.
std::string generate(const Run& r, const std::string& prompt, int64_t tokens, double temperature,
                     int64_t top_k, double top_p, uint64_t seed, const py::handle& ablate) {
  const auto inf = r.get("generate");
  const std::string spec = ablate_spec(ablate);
  std::string out;
  py::gil_scoped_release release;
  QKV_CHECK(tokens >= 1, "generate", "tokens must be >= 1, got ", tokens);
  const run::SampleOptions o{temperature, top_k, top_p};
  run::validate(o);
  const inspect::Ablation ablation(*inf, spec, "generate");
  inf->require(run::Capability::generate, "generate");
  const data::Ids ids = inf->encode(prompt, "generate: prompt");
  data::LmDetokenizer text(inf->run().data.tgt_vocab, inf->run().data.tgt_spm != nullptr,
                           prompt.empty() || prompt.back() == '\n');
  Generator gen(seed);
  // Signals are looked at every 100 ms, not every token: taking the GIL back waits for the
  // thread holding it, up to Python's switch interval.
  auto checked = std::chrono::steady_clock::now();
  inf->generate(ids, tokens, o, gen, true, [&](int64_t id) {
    out += text.next(id);
    if (std::chrono::steady_clock::now() - checked < std::chrono::milliseconds(100)) return;
    const py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    checked = std::chrono::steady_clock::now();
  });
  return out;
}

py::object classify(const Run& r, const py::handle& texts, const py::handle& ablate) {
  const auto inf = r.get("classify");
  const std::vector<std::string> in = texts_of(texts);
  const std::string spec = ablate_spec(ablate);
  Json out = Json::array();
  {
    py::gil_scoped_release release;
    const inspect::Ablation ablation(*inf, spec, "classify");
    inf->require(run::Capability::classify, "classify");
    for (const std::string& t : in) {
      const data::Ids ids = inf->encode(t, "classify");
      out.push_back(run::classification_json(t, inf->input_labels(ids), inf->classify({ids})[0]));
    }
  }
  return to_python(one_text(texts) ? out[0] : out);
}

py::object score(const Run& r, const std::string& split, int64_t beam, double alpha,
                 int64_t max_len, int64_t min_len, bool lowercase, const py::handle& ablate) {
  const auto inf = r.get("score");
  const std::string spec = ablate_spec(ablate);
  run::ScoreOptions o;
  o.split = split, o.max_len = max_len, o.min_len = min_len, o.lowercase = lowercase;
  o.decode.beam = beam, o.decode.alpha = alpha;
  Json j;
  {
    py::gil_scoped_release release;
    const inspect::Ablation ablation(*inf, spec, "eval");
    j = run::scores_json(inf->score(o));
  }
  return to_python(j);
}

py::object heads(const Run& r, const std::string& split, int64_t batches, int64_t probes,
                 uint64_t seed, int64_t max_work, const py::handle& ablate) {
  const auto inf = r.get("heads");
  const std::string spec = ablate_spec(ablate);
  Json j;
  {
    py::gil_scoped_release release;
    const inspect::Ablation ablation(*inf, spec, "heads");
    inspect::HeadTableOptions o{.split = split, .probes = probes, .seed = seed};
    o.max_batches =
        inspect::head_table_batches(*inf, o, batches, max_work, "heads",
                                    "max_work; ask for fewer batches or probes, or raise it");
    j = inspect::head_table_json(inspect::head_table(*inf, o));
  }
  return to_python(j);
}

py::object lens(const Run& r, const std::string& text, const std::optional<std::string>& target,
                int64_t top, const py::handle& ablate, int64_t position) {
  const auto inf = r.get("lens");
  const std::string spec = ablate_spec(ablate);
  Json j;
  {
    py::gil_scoped_release release;
    QKV_CHECK(top >= 1, "lens", "top must be >= 1, got ", top);
    const inspect::Ablation ablation(*inf, spec, "lens");
    const data::Ids input = inf->encode(text, "lens");
    std::optional<inspect::Attribution> parts;
    if (target)
      parts = inspect::direct_logit_attribution(
          *inf, input, inspect::output_token_id(*inf, *target, "lens: target"));
    QKV_CHECK(position == -1 || !target, "lens",
              "target's attribution reads the last position; use position without it");
    j = inspect::lens_json(inspect::logit_lens(*inf, input, top, position),
                           parts ? &*parts : nullptr);
  }
  return to_python(j);
}

py::object patch(const Run& r, const std::string& clean, const std::string& corrupt,
                 int64_t max_work, const py::handle& ablate, bool approx, const py::handle& check,
                 const py::handle& path) {
  const auto inf = r.get("patch");
  const std::string spec = ablate_spec(ablate);
  QKV_CHECK(approx || check.is_none(), "patch",
            "check= needs approx=True (it patches the largest estimates exactly beside them)");
  const int64_t k = check.is_none() ? 0 : py::cast<int64_t>(check);
  QKV_CHECK(check.is_none() || k >= 1, "patch", "check must be 1..", inspect::kMaxPatchCheck,
            ", got ", k);
  QKV_CHECK(path.is_none() || !approx, "patch",
            "path= and approx=True are two methods: ask one at a time");
  const std::optional<std::string> senders =
      path.is_none() ? std::nullopt : std::optional(py::cast<std::string>(path));
  Json j;
  {
    py::gil_scoped_release release;
    const inspect::Ablation ablation(*inf, spec, "patch");
    const data::Ids c = inf->encode(clean, "patch: clean"),
                    x = inf->encode(corrupt, "patch: corrupt");
    const auto n = static_cast<int64_t>(c.size());
    if (senders) {
      inspect::check_work(
          inspect::path_patching_work(*inf, n, inspect::path_senders(*inf, *senders, "patch")),
          max_work, "patch", "max_work; use shorter inputs, fewer senders, or raise it");
      j = inspect::path_patching_json(inspect::path_patching(*inf, c, x, *senders));
    } else {
      inspect::check_work(
          approx ? inspect::attribution_patching_work(*inf, n, k) : inspect::patch_work(*inf, n),
          max_work, "patch", "max_work; use shorter inputs, or raise it");
      j = approx ? inspect::attribution_patching_json(inspect::attribution_patching(*inf, c, x, k))
                 : inspect::patch_json(inspect::patch_activations(*inf, c, x));
    }
  }
  return to_python(j);
}

// What qkv attribute --json prints: the model's own outputs or target's, scored by method.
py::object attribute(const Run& r, const std::string& text, const std::string& method,
                     const py::handle& target, const py::handle& contrast, int64_t tokens,
                     int64_t steps, int64_t batch, const std::string& baseline, int64_t max_work,
                     const py::handle& ablate) {
  const auto inf = r.get("attribute");
  const std::string spec = ablate_spec(ablate);
  const std::optional<std::string> t =
      target.is_none() ? std::nullopt : std::optional(py::cast<std::string>(target));
  const std::optional<std::string> c =
      contrast.is_none() ? std::nullopt : std::optional(py::cast<std::string>(contrast));
  Json j;
  {
    py::gil_scoped_release release;
    const inspect::Ablation ablation(*inf, spec, "attribute");
    inspect::AttributionQuery q;
    q.method = inspect::attribution_method(method, "attribute");
    q.baseline = inspect::ig_baseline(baseline, "attribute: baseline");
    q.input = inf->encode(text, "attribute");
    q.outputs = t ? inspect::output_ids(*inf, *t, "attribute: target")
                  : inspect::default_outputs(*inf, q.input, tokens);
    if (c) q.contrast = inspect::output_token_id(*inf, *c, "attribute: contrast");
    QKV_CHECK(batch >= 1 && batch <= inspect::kMaxAttributionSteps, "attribute",
              "batch must be 1..", inspect::kMaxAttributionSteps, ", got ", batch);
    q.steps = steps, q.batch = batch, q.max_work = max_work;
    j = inspect::token_attribution_json(inspect::attribute_tokens(*inf, q));
  }
  return to_python(j);
}

}  // namespace

void bind_tools(py::class_<Run>& run) {
  const auto none = py::none();
  run.def("translate", &translate, py::arg("texts"), py::arg("beam") = 1, py::arg("alpha") = 1.0,
          py::arg("max_len") = 0, py::arg("ablate") = none,
          "Each text's output (qkv translate): a str for a str, a list for a list.");
  run.def("generate", &generate, py::arg("prompt") = "\n", py::arg("tokens") = 500,
          py::arg("temperature") = 0.8, py::arg("top_k") = 200, py::arg("top_p") = 1.0,
          py::arg("seed") = 1, py::arg("ablate") = none,
          "Text sampled after prompt (qkv generate's, without the prompt).");
  run.def("classify", &classify, py::arg("texts"), py::arg("ablate") = none,
          "Each text's classes (qkv classify --json's objects).");
  run.def("score", &score, py::arg("split") = "valid", py::arg("beam") = 1, py::arg("alpha") = 1.0,
          py::arg("max_len") = 0, py::arg("min_len") = 0, py::arg("lowercase") = false,
          py::arg("ablate") = none, "A split scored: the dict qkv eval --json prints.");
  run.def("heads", &heads, py::arg("split") = "valid", py::arg("batches") = -1,
          py::arg("probes") = 4, py::arg("seed") = 1, py::arg("max_work") = inspect::kMaxHeadsWork,
          py::arg("ablate") = none, "Every head's scores: the dict qkv heads --json prints.");
  run.def("lens", &lens, py::arg("text"), py::arg("target") = none, py::arg("top") = 5,
          py::arg("ablate") = none, py::arg("position") = -1,
          "The logit lens: the dict qkv lens --json prints (position: --position).");
  run.def("patch", &patch, py::arg("clean"), py::arg("corrupt"),
          py::arg("max_work") = inspect::kMaxPatchWork, py::arg("ablate") = none,
          py::arg("approx") = false, py::arg("check") = none, py::arg("path") = none,
          "Activation patching: the dict qkv patch --json prints; approx=True: attribution "
          "patching's estimates (qkv patch --approx), check=K the K largest patched exactly; "
          "path='1.0': path patching of those heads (qkv patch --path).");
  run.def("attribute", &attribute, py::arg("text"), py::arg("method") = "saliency",
          py::arg("target") = none, py::arg("contrast") = none, py::arg("tokens") = 1,
          py::arg("steps") = 64, py::arg("batch") = 16, py::arg("baseline") = "zero",
          py::arg("max_work") = inspect::kMaxAttributionWork, py::arg("ablate") = none,
          "Token attribution: the dict qkv attribute --json prints (method, target, contrast, "
          "tokens, steps, batch, baseline: its options).");
}

}  // namespace qkv::python
