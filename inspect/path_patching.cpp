// Path patching (inspect/path_patching.hpp) through hooks: the sender's delta added at a stream
// point in a pass that captures the receivers reading it, then the receivers' captured values put
// into the corrupted run.
#include "inspect/path_patching.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "core/cancel.hpp"
#include "core/error.hpp"
#include "nn/model.hpp"
#include "run/inference.hpp"
#include "run/run.hpp"

namespace qkv::inspect {

namespace {

// What a stack's block l passes, in forward order: resid_pre, then resid_mid and resid_cross
// where the block has them (attention-only and decoder blocks differ).
std::vector<std::string> stream_points(const std::set<std::string>& hooks, const std::string& at) {
  std::vector<std::string> out;
  for (const char* p : {"resid_pre", "resid_mid", "resid_cross"})
    if (hooks.count(at + p)) out.push_back(p);
  return out;
}

void add_heads(Paths& p, const Attention& a, int64_t l, const std::vector<const char*>& inputs) {
  for (int64_t h = 0; h < a.heads; ++h)
    for (const char* in : inputs)
      p.receivers.push_back(
          {a.name, a.head_name(l, h), l, h, in, a.point_of(l, in), p.stages.size() - 1, 0});
}

// The readers of stream point `name` of block l of the stack at prefix P.
void add_readers(Paths& p, const std::vector<Attention>& sites, const std::set<std::string>& hooks,
                 const std::string& P, int64_t l, const std::string& name, bool last) {
  const std::string at = P + std::to_string(l) + ".";
  p.stages.push_back(at + name);
  for (const Attention& a : sites) {
    if (a.prefix != P) continue;
    if (a.point == "attn" && name == "resid_pre") add_heads(p, a, l, {"q", "k", "v"});
    if (a.point == "cross" && name == "resid_mid") add_heads(p, a, l, {"q"});
  }
  if (last && hooks.count(at + "mlp.post"))
    p.receivers.push_back(
        {"mlp", "mlp." + std::to_string(l), l, -1, "mlp", at + "mlp.post", p.stages.size() - 1, 0});
  if (p.receivers.empty() || p.receivers.back().stage != p.stages.size() - 1) p.stages.pop_back();
}

// The end of the sender's stack: the logits, or cross-attention's keys and values.
void add_stack_end(Paths& p, const nn::Model& model, const std::vector<Attention>& sites,
                   const Attention& s) {
  p.stages.push_back(s.prefix + std::to_string(s.layers - 1) + ".resid_post");
  if (model.output_stream().blocks == s.prefix)
    p.receivers.push_back({"logits", "logits", -1, -1, "logits", "logits", p.stages.size() - 1, 0});
  for (const Attention& c : sites)
    if (c.cross() && c.prefix != s.prefix && c.keys == s.queries)
      for (int64_t l = 0; l < c.layers; ++l) add_heads(p, c, l, {"k", "v"});
  if (p.receivers.empty() || p.receivers.back().stage != p.stages.size() - 1) p.stages.pop_back();
}

// Hooks that replace head `head` of a (1, h, n, d_head) point by value's (head < 0: all of it).
void put(nn::Hooks& hooks, const std::string& point, const ag::Var& value, int64_t head) {
  hooks.add(point, [value, head](const ag::Var& x) {
    if (head < 0) return value;
    Tensor pick = zeros({1, x.size(1), 1, 1});
    pick.data<float>()[head] = 1;
    return ag::where(ne(pick, 0.0), value, x);
  });
}

void add_delta(nn::Hooks& hooks, const std::string& point, const ag::Var& delta) {
  hooks.add(point, [delta](const ag::Var& x) {  // x: (1, n, d)
    return ag::add(x, ag::Var(delta.data().to(x.dtype())));
  });
}

// "L1H0" -> "1.0", "cross.L1H0" -> "cross.1.0"; other names unchanged.
std::string head_spelling(const std::string& spec) {
  static const std::regex lh("(^|,)([A-Za-z_]+\\.)?L([0-9]+)H([0-9]+)(?=,|$)");
  return std::regex_replace(spec, lh, "$1$2$3.$4");
}

}  // namespace

Paths direct_paths(const run::Inference& inf, const HeadRef& sender, const char* op) {
  const nn::Model& model = inf.model();
  const Attention& s = sender.attention;
  const std::vector<std::string> listed = nn::hook_points(model);
  const std::set<std::string> hooks(listed.begin(), listed.end());
  Paths p;
  p.sender = sender;
  p.out_point = s.prefix + std::to_string(sender.layer) + "." + s.point + "_out";
  QKV_CHECK(hooks.count(p.out_point), op, "--path ", sender.name(), ": the ", s.title,
            " is not a sublayer of a Transformer block's residual stream, which path patching "
            "follows");
  QKV_CHECK(inf.run().config.model.norm_first, op,
            "--path needs a pre-LN model "
            "(model.norm_first = true): a post-LN block normalises each residual sum, so a "
            "head's output is no term of what later layers read");
  const std::vector<Attention> sites = attentions_of(inf);
  const std::string reads = s.point == "attn" ? "resid_pre" : "resid_mid";
  for (int64_t l = sender.layer; l < s.layers; ++l) {
    const std::string at = s.prefix + std::to_string(l) + ".";
    const std::vector<std::string> pts = stream_points(hooks, at);
    size_t from = 0;
    if (l == sender.layer)
      from = static_cast<size_t>(std::find(pts.begin(), pts.end(), reads) - pts.begin()) + 1;
    for (size_t i = from; i < pts.size(); ++i)
      add_readers(p, sites, hooks, s.prefix, l, pts[i], i + 1 == pts.size());
  }
  add_stack_end(p, model, sites, s);
  QKV_CHECK(!p.receivers.empty(), op, "--path ", sender.name(),
            " has no receivers: nothing after it reads its output");
  return p;
}

PathRuns::PathRuns(const run::Inference& inf, const PatchRuns& runs, Paths paths)
    : inf_(inf), runs_(runs), paths_(std::move(paths)) {
  const HeadRef& s = paths_.sender;
  nn::Hooks corrupt, patched;
  corrupt.capture = patched.capture = nn::names_matching({paths_.out_point});
  inf.logits(runs.corrupt(), runs.tgt_in(), &corrupt);
  put(patched, s.attention.z(s.layer), runs.clean_at(s.attention.z(s.layer)), s.head);
  inf.logits(runs.corrupt(), runs.tgt_in(), &patched);
  // The sublayer's output differs by the sender head's part alone: (z' - z)[head] W_O.
  delta_ = ag::Var(sub(patched.cache.at(paths_.out_point).data().to(DType::f32),
                       corrupt.cache.at(paths_.out_point).data().to(DType::f32)));
}

double PathRuns::restored(const std::vector<size_t>& which) const {
  std::vector<size_t> order(which);
  std::sort(order.begin(), order.end());
  order.erase(std::unique(order.begin(), order.end()), order.end());
  // Values fixed so far: (receiver, value); a stage's receivers read the stream the ones before
  // them made, plus delta.
  std::vector<std::pair<const PathReceiver*, ag::Var>> fixed;
  const auto replacements = [&](nn::Hooks& hooks) {
    for (const auto& [r, v] : fixed) put(hooks, r->point, v, r->head);
  };
  for (size_t i = 0; i < order.size();) {
    cancellation_point();
    const size_t stage = paths_.receivers.at(order[i]).stage;
    size_t end = i;
    std::vector<std::string> points;
    while (end < order.size() && paths_.receivers[order[end]].stage == stage)
      points.push_back(paths_.receivers[order[end++]].point);
    nn::Hooks hooks;
    replacements(hooks);
    add_delta(hooks, paths_.stages[stage], delta_);
    if (points.front() == "logits") return runs_.restored(hooks);  // the last stage
    hooks.capture = nn::names_matching(points);
    inf_.logits(runs_.corrupt(), runs_.tgt_in(), &hooks);
    for (; i < end; ++i) {
      const PathReceiver& r = paths_.receivers[order[i]];
      fixed.emplace_back(&r, hooks.cache.at(r.point));
    }
  }
  nn::Hooks hooks;
  replacements(hooks);
  return runs_.restored(hooks);
}

std::vector<double> PathRuns::each() const {
  std::vector<double> out(paths_.receivers.size());
  for (size_t stage = 0; stage < paths_.stages.size(); ++stage) {
    cancellation_point();
    nn::Hooks hooks;  // the stream at this point plus delta, and what its readers make of it
    add_delta(hooks, paths_.stages[stage], delta_);
    std::vector<std::string> points;
    for (const PathReceiver& r : paths_.receivers)
      if (r.stage == stage) points.push_back(r.point);
    if (points.front() == "logits") {
      for (size_t i = 0; i < out.size(); ++i)
        if (paths_.receivers[i].stage == stage) out[i] = runs_.restored(hooks);
      continue;
    }
    hooks.capture = nn::names_matching(points);
    inf_.logits(runs_.corrupt(), runs_.tgt_in(), &hooks);
    for (size_t i = 0; i < out.size(); ++i) {
      const PathReceiver& r = paths_.receivers[i];
      if (r.stage != stage) continue;
      cancellation_point();
      nn::Hooks one;
      put(one, r.point, hooks.cache.at(r.point), r.head);
      out[i] = runs_.restored(one);
    }
  }
  return out;
}

std::vector<HeadRef> path_senders(const run::Inference& inf, const std::string& spec,
                                  const char* op) {
  QKV_CHECK(!spec.empty(), op, "--path needs a sender head (e.g. ",
            attentions_of(inf).front().head_name(0, 0), ")");
  const std::string where = std::string(op) + " --path";
  return parse_heads(head_spelling(spec), attentions_of(inf), where.c_str());
}

PathPatchingResult path_patching(const run::Inference& inf, const data::Ids& clean,
                                 const data::Ids& corrupt, const std::string& spec) {
  std::vector<Paths> all;
  for (const HeadRef& h : path_senders(inf, spec, "patch"))
    all.push_back(direct_paths(inf, h, "patch"));
  const PatchRuns runs(inf, clean, corrupt);
  PathPatchingResult r;
  r.clean_answer = runs.clean_answer, r.corrupt_answer = runs.corrupt_answer;
  r.clean_diff = runs.clean_diff, r.corrupt_diff = runs.corrupt_diff;
  for (Paths& p : all) {
    const PathRuns pr(inf, runs, std::move(p));
    PathPatching s{pr.paths(), 0, 0};
    const std::vector<double> each = pr.each();
    std::vector<size_t> every;
    for (size_t i = 0; i < each.size(); ++i) {
      s.paths.receivers[i].restored = each[i];
      every.push_back(i);
    }
    s.all_paths = pr.restored(every);
    s.activation = runs.head(s.paths.sender.attention, s.paths.sender.layer, s.paths.sender.head);
    r.senders.push_back(std::move(s));
  }
  return r;
}

Work path_patching_work(const run::Inference& inf, int64_t n, const std::vector<HeadRef>& senders) {
  int64_t passes = 4;  // the inspections and the two runs PatchRuns makes
  for (const HeadRef& h : senders) {
    const Paths p = direct_paths(inf, h, "patch");
    passes +=
        4 + 2 * static_cast<int64_t>(p.stages.size()) + static_cast<int64_t>(p.receivers.size());
  }
  const int64_t tokens = inf.inspection_tokens(n);
  return {static_cast<double>(passes) * static_cast<double>(tokens),
          fmt::format("{} passes of {} tokens", passes, tokens)};
}

nlohmann::json path_patching_json(const PathPatchingResult& r) {
  nlohmann::json senders = nlohmann::json::array();
  for (const PathPatching& s : r.senders) {
    nlohmann::json paths = nlohmann::json::array();
    for (const PathReceiver& p : s.paths.receivers) {
      nlohmann::json j{{"receiver", p.name},
                       {"attention", p.attention},
                       {"layer", p.layer},
                       {"input", p.input},
                       {"restored", p.restored}};
      if (p.head >= 0) j["index"] = p.head;
      if (p.layer < 0) j.erase("layer");
      paths.push_back(std::move(j));
    }
    const HeadRef& h = s.paths.sender;
    senders.push_back({{"sender", h.name()},
                       {"attention", h.attention.name},
                       {"layer", h.layer},
                       {"index", h.head},
                       {"activation", s.activation},
                       {"all_paths", s.all_paths},
                       {"paths", paths}});
  }
  return {{"method", "path patching"},          {"clean_answer", r.clean_answer},
          {"corrupt_answer", r.corrupt_answer}, {"clean_diff", r.clean_diff},
          {"corrupt_diff", r.corrupt_diff},     {"senders", senders}};
}

}  // namespace qkv::inspect
