#include "config/config.hpp"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>

#include "core/nearest.hpp"

namespace qkv::config {
namespace {

// Reads typed fields out of one section, remembering which keys it used, so that anything
// left over is an unknown key.
struct Reader {
  const ojson& j;
  std::string section;
  std::set<std::string> used;

  std::string key(const char* k) const { return section.empty() ? k : section + "." + k; }
  const ojson* find(const char* k) {
    used.insert(k);
    if (!j.is_object() || !j.contains(k)) return nullptr;
    return &j.at(k);
  }
  [[noreturn]] void wrong(const char* k, const char* want, const ojson& v) const {
    throw Error(key(k) + ": expected " + want + ", got " + std::string(v.type_name()) + " " +
                v.dump());
  }
  void operator()(const char* k, int64_t& out) {
    if (const ojson* v = find(k)) {
      if (!v->is_number_integer()) wrong(k, "an integer", *v);
      out = v->get<int64_t>();
    }
  }
  void operator()(const char* k, uint64_t& out) {
    if (const ojson* v = find(k)) {
      if (!v->is_number_integer() || v->get<int64_t>() < 0) wrong(k, "a non-negative integer", *v);
      out = v->get<uint64_t>();
    }
  }
  void operator()(const char* k, int& out) {
    int64_t x = out;
    (*this)(k, x);
    if (x < INT32_MIN || x > INT32_MAX)
      throw Error(key(k) + ": " + std::to_string(x) + " is out of range for this key");
    out = static_cast<int>(x);
  }
  void operator()(const char* k, double& out) {
    if (const ojson* v = find(k)) {
      if (!v->is_number()) wrong(k, "a number", *v);
      out = v->get<double>();
    }
  }
  void operator()(const char* k, bool& out) {
    if (const ojson* v = find(k)) {
      if (!v->is_boolean()) wrong(k, "true or false", *v);
      out = v->get<bool>();
    }
  }
  void operator()(const char* k, std::string& out) {
    if (const ojson* v = find(k)) {
      if (!v->is_string()) wrong(k, "a string", *v);
      out = v->get<std::string>();
    }
  }
  void operator()(const char* k, std::vector<std::string>& out) {
    if (const ojson* v = find(k)) {
      if (!v->is_array()) wrong(k, "a list of strings", *v);
      out.clear();
      for (const ojson& e : *v) {
        if (!e.is_string()) wrong(k, "a list of strings", *v);
        out.push_back(e.get<std::string>());
      }
    }
  }
  // Two numbers written as one list, [first, second] (optim.betas).
  void operator()(const char* k, double& first, double& second) {
    if (const ojson* v = find(k)) {
      if (!v->is_array() || v->size() != 2 || !(*v)[0].is_number() || !(*v)[1].is_number())
        wrong(k, "a list of two numbers", *v);
      first = (*v)[0].get<double>();
      second = (*v)[1].get<double>();
    }
  }
  // [model] attention_scale: a number, 0 for the default (nn/attention_scale.hpp).
  void operator()(const char* k, nn::AttentionScale& out) {
    double x = out.config_value();
    (*this)(k, x);
    out = nn::AttentionScale::from_config(x, key(k));
  }
  // A kind: parsed here, once, by its names table.
  template <NamedEnum E>
  void operator()(const char* k, E& out) {
    if (const ojson* v = find(k)) {
      if (!v->is_string()) wrong(k, "a string", *v);
      out = parse_name<E>(v->get<std::string>(), key(k));
    }
  }
  // Anything the field list did not ask for is unknown; the nearest key it did ask for (or
  // section, at the top level) is offered.
  void finish() const {
    if (!j.is_object()) return;
    static constexpr std::string_view kSections[] = {"model", "data",       "train",
                                                     "optim", "checkpoint", "probe"};
    std::vector<std::string_view> keys;
    for (const std::string& u : used)
      if (!section.empty() ||
          std::find(std::begin(kSections), std::end(kSections), u) == std::end(kSections))
        keys.push_back(u);
    for (auto it = j.begin(); it != j.end(); ++it)
      if (!used.count(it.key())) {
        if (section.empty() && it.value().is_object())
          throw Error("[" + it.key() +
                      "]: unknown section (expected model, data, train, optim, checkpoint, probe)" +
                      did_you_mean(it.key(), kSections, "[", "]"));
        const std::string prefix = section.empty() ? "" : section + ".";
        throw Error(key(it.key().c_str()) + ": unknown key" + did_you_mean(it.key(), keys, prefix));
      }
  }
};

// Writes the same fields into JSON.
struct Writer {
  ojson j = ojson::object();
  template <class T>
  void operator()(const char* k, const T& v) {
    if constexpr (NamedEnum<T>)
      j[k] = std::string(name_of(v));
    else
      j[k] = v;
  }
  void operator()(const char* k, double first, double second) { j[k] = {first, second}; }
  void operator()(const char* k, const nn::AttentionScale& s) { j[k] = s.config_value(); }
};

// The field lists: one place names each key, for reading and for writing.
template <class V, class M>
void model_fields(V& v, M& m) {
  v("kind", m.kind);
  v("d_model", m.d_model);
  v("heads", m.heads);
  v("d_ff", m.d_ff);
  v("attn_only", m.attn_only);
  v("encoder_layers", m.encoder_layers);
  v("encoder", m.encoder);
  v("decoder", m.decoder);
  v("cross_attention", m.cross_attention);
  v("decoder_layers", m.decoder_layers);
  v("dropout", m.dropout);
  v("attention_dropout", m.attention_dropout);
  v("norm_first", m.norm_first);
  v("final_norm", m.final_norm);
  v("norm", m.norm);
  v("qk_norm", m.qk_norm);
  v("activation", m.activation);
  v("position", m.position);
  v("max_len", m.max_len);
  v("relative_clip", m.relative_clip);
  v("scale_embedding", m.scale_embedding);
  v("share_embeddings", m.share_embeddings);
  v("tie_output", m.tie_output);
  v("logit_softcap", m.logit_softcap);
  v("attention_scale", m.attention_scale);
  v("layer_norm_eps", m.layer_norm_eps);
  v("bias", m.bias);
  v("attention", m.attention);
  v("window", m.window);
  v("pool", m.pool);
}

template <class V, class D>
void data_fields(V& v, D& d) {
  v("task", d.task);
  v("seed", d.seed);  // 0: the run's seed
  v("vocab_size", d.vocab_size);
  v("min_len", d.min_len);
  v("max_len", d.max_len);
  v("max_depth", d.max_depth);
  v("train_size", d.train_size);
  v("valid_size", d.valid_size);
  v("test_size", d.test_size);
  v("path", d.path);
  v("src_lang", d.src_lang);
  v("tgt_lang", d.tgt_lang);
  v("train_split", d.train_split);
  v("valid_split", d.valid_split);
  v("test_split", d.test_split);
  v("lowercase", d.lowercase);
  v("skip_malformed", d.skip_malformed);
  v("tokenizer", d.tokenizer);
  v("spm_vocab_size", d.spm_vocab_size);
  v("spm_type", d.spm_type);
  v("spm_alpha", d.spm_alpha);
  v("min_freq", d.min_freq);
  v("max_vocab", d.max_vocab);
  v("shared_vocab", d.shared_vocab);
  v("max_seq_len", d.max_seq_len);
  v("year_min", d.year_min);
  v("year_max", d.year_max);
  v("batch_size", d.batch_size);
  v("max_tokens", d.max_tokens);
  v("bucket", d.bucket);
  v("bucket_pool", d.bucket_pool);
  v("shuffle", d.shuffle);
  v("prefetch", d.prefetch);
  v("block_size", d.block_size);
}

template <class V, class T>
void train_fields(V& v, T& t) {
  v("epochs", t.epochs);
  v("max_steps", t.max_steps);
  v("label_smoothing", t.label_smoothing);
  v("log_every", t.log_every);
  v("eval_every", t.eval_every);
  v("eval_examples", t.eval_examples);
  v("max_decode_extra", t.max_decode_extra);
  v("early_stopping", t.early_stopping);
  v("log_attention_entropy", t.log_attention_entropy);
  v("skip_nonfinite", t.skip_nonfinite);
  v("eval_iters", t.eval_iters);
  v("best_metric", t.best_metric);
  v("grad_accum", t.grad_accum);
}

template <class V, class C>
void checkpoint_fields(V& v, C& c) {
  v("every", c.every);
  v("keep", c.keep);
  v("average_last", c.average_last);
}

template <class V, class P>
void probe_fields(V& v, P& p) {
  v("every", p.every);
  v("sequences", p.sequences);
  v("length", p.length);
  v("seed", p.seed);
  v("icl_windows", p.icl_windows);
}

// The model kind each data family trains: one row per family (data/task_kind.hpp's TaskFamily,
// nn/kinds.hpp's ModelKind). A new family is one row here.
struct FamilyModel {
  data::TaskFamily family;
  nn::ModelKind kind;
};
constexpr FamilyModel kFamilyModels[] = {
    {data::TaskFamily::pairs, nn::ModelKind::encoder_decoder},
    {data::TaskFamily::lm, nn::ModelKind::decoder},
    {data::TaskFamily::classify, nn::ModelKind::encoder},
};

// The tasks of a data family, for a message: "lm, repeat".
std::string tasks_of(data::TaskFamily f) {
  std::string out;
  for (const auto& n : data::kTaskNames)
    if (data::family_of(n.value) == f) out += (out.empty() ? "" : ", ") + std::string(n.name);
  return out;
}

// model.kind against data.task's family, by kFamilyModels: "data.task = \"copy\" needs
// model.kind = \"encoder_decoder\", got \"decoder\" (which trains lm, repeat)".
void check_model_kind(nn::ModelKind kind, data::TaskKind task) {
  const auto need = [](data::TaskFamily f) {
    return std::find_if(std::begin(kFamilyModels), std::end(kFamilyModels),
                        [&](const FamilyModel& r) { return r.family == f; });
  };
  const auto row = need(data::family_of(task));
  if (row == std::end(kFamilyModels) || row->kind == kind) return;
  std::string trains;
  for (const FamilyModel& r : kFamilyModels)
    if (r.kind == kind) trains = " (which trains " + tasks_of(r.family) + ")";
  throw Error("model.kind: data.task = \"" + std::string(name_of(task)) +
              "\" needs model.kind = \"" + std::string(name_of(row->kind)) + "\", got \"" +
              std::string(name_of(kind)) + "\"" + trains);
}

// Prefixes an error from a section parser with where the key was set. An error about a key of
// the file that a command-line value made wrong ("heads: d_model 100 is not divisible by heads
// 3" after --model.d_model 100) is blamed on the flag, with the file's line beside it.
[[noreturn]] void rethrow_located(const Error& e, const ConfigDoc& doc,
                                  const std::map<std::string, std::string>& from_cli) {
  std::string msg = e.what();
  const std::string key = msg.substr(0, msg.find(':'));
  // "[section]: ..." messages name a section
  std::string lookup = key;
  if (!lookup.empty() && lookup.front() == '[') lookup = lookup.substr(1, lookup.size() - 2);
  if (from_cli.count(lookup)) throw Error("command line: --" + lookup + msg.substr(key.size()));
  auto it = doc.lines.find(lookup);
  const std::string where =
      it != doc.lines.end() ? doc.path + ":" + std::to_string(it->second) : doc.path;
  const std::string text = msg.substr(std::min(msg.size(), key.size() + 1));
  for (const auto& [flag, value] : from_cli) {
    const size_t dot = flag.find('.');
    if (dot == std::string::npos || flag.compare(0, dot, lookup, 0, lookup.find('.')) != 0)
      continue;  // only a key of the same section
    const std::string shortname = flag.substr(dot + 1);
    const size_t at = text.find(shortname);
    const auto word = [&](size_t i) {
      return i < text.size() &&
             (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_');
    };
    if (at != std::string::npos && !word(at + shortname.size()) && (at == 0 || !word(at - 1)))
      throw Error("command line: --" + flag + " " + value + ": " + msg + " (" + lookup +
                  (it != doc.lines.end() ? " set at " + where : " from the defaults") + ")");
  }
  if (doc.path.empty()) throw Error(msg);
  throw Error(where + ": " + msg);
}

// NaN and Inf are valid TOML, but no key of a run takes them: refused before any default or
// validation could treat them as "unset".
void check_finite(const ojson& j, const std::string& key) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      check_finite(it.value(), key.empty() ? it.key() : key + "." + it.key());
  } else if (j.is_array()) {
    for (const ojson& e : j) check_finite(e, key);
  } else if (j.is_number_float() && !std::isfinite(j.get<double>())) {
    const double v = j.get<double>();
    throw Error(key + ": must be a finite number, got " +
                (std::isnan(v) ? "nan"
                 : v > 0       ? "inf"
                               : "-inf"));
  }
}

}  // namespace

void RunConfig::validate() const {
  if (threads < 0)
    throw Error("threads: must be >= 0 (0: all cores), got " + std::to_string(threads));
  nn::ModelConfig m = model;
  m.src_vocab = m.tgt_vocab = 1;  // known only once the data is loaded
  m.validate();
  data::validate(data);
  auto need = [](bool ok, const std::string& msg) {
    if (!ok) throw Error(msg);
  };
  need(train.epochs >= 0, "train.epochs: must be >= 0 (0: as many as train.max_steps takes)");
  need(train.epochs >= 1 || train.max_steps >= 1,
       "train.epochs: must be >= 1 (or set train.max_steps)");
  need(train.max_steps >= 0, "train.max_steps: must be >= 0");
  need(train.label_smoothing >= 0 && train.label_smoothing < 1,
       "train.label_smoothing: must be in [0, 1)");
  need(train.log_every >= 1, "train.log_every: must be >= 1");
  need(train.eval_every >= 0, "train.eval_every: must be >= 0");
  need(train.eval_examples >= 0, "train.eval_examples: must be >= 0");
  need(train.max_decode_extra >= 0, "train.max_decode_extra: must be >= 0");
  need(train.early_stopping >= 0, "train.early_stopping: must be >= 0");
  need(train.eval_iters >= 1, "train.eval_iters: must be >= 1");
  need(train.grad_accum >= 1,
       "train.grad_accum: must be >= 1 (micro-batches per optimizer step), got " +
           std::to_string(train.grad_accum));
  const std::string task(name_of(data.task));
  check_model_kind(model.kind, data.task);
  need(train.best_metric != BestMetric::bleu || data::is_text_pairs(data.task),
       "train.best_metric: bleu needs a text task (tsv, dates or parallel), not " + task);
  need(checkpoint.every >= 0, "checkpoint.every: must be >= 0");
  need(checkpoint.keep >= 1, "checkpoint.keep: must be >= 1");
  need(checkpoint.average_last >= 0, "checkpoint.average_last: must be >= 0 (0: off), got " +
                                         std::to_string(checkpoint.average_last));
  need(checkpoint.average_last <= checkpoint.keep,
       "checkpoint.average_last: averages the last " + std::to_string(checkpoint.average_last) +
           " checkpoints, but checkpoint.keep = " + std::to_string(checkpoint.keep) +
           " keeps fewer; set checkpoint.keep >= " + std::to_string(checkpoint.average_last));
  need(probe.every >= 0, "probe.every: must be >= 0 (0: off), got " + std::to_string(probe.every));
  // Upper bounds too: each sizes the probe's inputs and the attention maps it keeps.
  need(probe.sequences >= 1 && probe.sequences <= kMaxProbeSequences,
       "probe.sequences: must be in 1.." + std::to_string(kMaxProbeSequences) + ", got " +
           std::to_string(probe.sequences));
  need(probe.length >= 0 && probe.length <= kMaxProbeLength,
       "probe.length: must be in 0.." + std::to_string(kMaxProbeLength) + " (0: automatic), got " +
           std::to_string(probe.length));
  need(probe.icl_windows >= 1 && probe.icl_windows <= kMaxIclWindows,
       "probe.icl_windows: must be in 1.." + std::to_string(kMaxIclWindows) + ", got " +
           std::to_string(probe.icl_windows));
  optim.validate();
  // cosine with total_steps = 0 decays over the whole run, known once the data is loaded.
  optim::validate_unfilled(optim::fill_schedule(optim.schedule, model.d_model, 0));
}

std::vector<std::pair<std::string, std::string>> take_overrides(std::vector<std::string>& args) {
  std::vector<std::pair<std::string, std::string>> out;
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool dotted =
        a.rfind("--", 0) == 0 && a.find('.') != std::string::npos && a.find('.') < a.find('=');
    const bool top = a == "--seed" || a == "--threads" || a == "--precision" ||
                     a.rfind("--seed=", 0) == 0 || a.rfind("--threads=", 0) == 0 ||
                     a.rfind("--precision=", 0) == 0;
    if (!dotted && !top) {
      rest.push_back(a);
      continue;
    }
    const size_t eq = a.find('=');
    if (eq != std::string::npos) {
      out.emplace_back(a.substr(2, eq - 2), a.substr(eq + 1));
    } else {
      if (i + 1 >= args.size()) throw Error("command line: " + a + " needs a value");
      out.emplace_back(a.substr(2), args[++i]);
    }
  }
  args = rest;
  return out;
}

RunConfig config_from_toml(const ConfigDoc& doc_in,
                           const std::vector<std::pair<std::string, std::string>>& overrides) {
  ConfigDoc doc = doc_in;
  std::map<std::string, std::string> from_cli;
  for (const auto& [key, text] : overrides) {
    const size_t dot = key.find('.');
    const ojson v = parse_value_or_string(text);
    if (dot == std::string::npos) {
      doc.root[key] = v;
    } else {
      const std::string sec = key.substr(0, dot), k = key.substr(dot + 1);
      if (!doc.root.contains(sec)) doc.root[sec] = ojson::object();
      if (!doc.root[sec].is_object())
        throw Error("command line: --" + key + ": " + sec + " is not a section");
      doc.root[sec][k] = v;
    }
    from_cli[key] = text;
  }
  RunConfig c;
  if (!doc.path.empty()) c.name = std::filesystem::path(doc.path).stem().string();
  try {
    check_finite(doc.root, "");
    Reader top{doc.root, "", {}};
    top("seed", c.seed);
    top("threads", c.threads);
    top("precision", c.precision);
    static const ojson kEmpty = ojson::object();
    auto section = [&](const char* name) -> const ojson& {
      top.used.insert(name);
      if (!doc.root.contains(name)) return kEmpty;
      const ojson& s = doc.root.at(name);
      if (!s.is_object()) throw Error(std::string(name) + ": expected a [" + name + "] section");
      return s;
    };
    Reader m{section("model"), "model", {}};
    m("kind", c.model.kind);  // a decoder-only model starts from GPT's defaults
    if (c.model.kind == nn::ModelKind::decoder) c.model = nn::ModelConfig::decoder_defaults();
    model_fields(m, c.model);
    m.finish();
    Reader d{section("data"), "data", {}};
    data_fields(d, c.data);
    d.finish();
    Reader t{section("train"), "train", {}};
    train_fields(t, c.train);
    t.finish();
    Reader k{section("checkpoint"), "checkpoint", {}};
    checkpoint_fields(k, c.checkpoint);
    k.finish();
    Reader p{section("probe"), "probe", {}};
    probe_fields(p, c.probe);
    p.finish();
    Reader o{section("optim"), "optim", {}};
    optim::optim_fields(o, c.optim);  // the keys are optim/'s, the reading is this Reader's
    o.finish();
    optim::take_lr(c.optim);
    c.optim.validate();
    top.finish();
    if (c.data.seed == 0) c.data.seed = c.seed;
    // A data path is relative to the config file; made absolute so the effective config
    // saved in the run folder finds the same file.
    if (!c.data.path.empty() && !doc.path.empty() && !from_cli.count("data.path")) {
      const std::filesystem::path p(c.data.path);
      if (p.is_relative())
        c.data.path = std::filesystem::absolute(std::filesystem::path(doc.path).parent_path() / p)
                          .lexically_normal()
                          .string();
    }
    c.optim.schedule = optim::fill_schedule(c.optim.schedule, c.model.d_model, 0);
    c.validate();
  } catch (const Error& e) {
    rethrow_located(e, doc, from_cli);
  }
  return c;
}

RunConfig load_config(const std::string& path,
                      const std::vector<std::pair<std::string, std::string>>& overrides) {
  return config_from_toml(read_config_file(path), overrides);
}

std::string effective_toml(const RunConfig& c) {
  ojson root = ojson::object();
  root["seed"] = c.seed;
  root["threads"] = c.threads;
  root["precision"] = std::string(name_of(c.precision));
  Writer m, d, t, o, k, p;
  model_fields(m, c.model);
  data_fields(d, c.data);
  train_fields(t, c.train);
  optim::optim_fields(o, c.optim);
  checkpoint_fields(k, c.checkpoint);
  probe_fields(p, c.probe);
  root["model"] = m.j;
  root["data"] = d.j;
  root["train"] = t.j;
  root["optim"] = o.j;
  root["checkpoint"] = k.j;
  root["probe"] = p.j;
  return write_config(root);
}

int64_t longest_probe_length(const ProbeRoom& r) {
  return r.decode_extra ? (r.positions - *r.decode_extra - 1) / 2 : r.positions / 2;
}

void check_probe_length(int64_t L, const ProbeRoom& r, const std::string& key) {
  if (L <= longest_probe_length(r)) return;
  const std::string twice = "the probe's 2 x " + std::to_string(L) + " = " + std::to_string(2 * L);
  const std::string P = std::to_string(r.positions);
  if (!r.decode_extra)
    throw Error(key + ": " + twice + " tokens are more than the model's context of " + P + " (" +
                r.positions_name + "); at most " + std::to_string(longest_probe_length(r)));
  const int64_t need = 2 * L + *r.decode_extra + 1;
  throw Error(key + ": " + twice + " source tokens decode to up to " + std::to_string(need) +
              " decoder positions (with <bos> and train.max_decode_extra = " +
              std::to_string(*r.decode_extra) + "), more than " + r.positions_name + " = " + P +
              " learned positions");
}

}  // namespace qkv::config
