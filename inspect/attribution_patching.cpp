// Attribution patching (inspect/attribution_patching.hpp): the corrupted run recorded with a zero
// leaf added at every z and resid_pre hook point (its gradient is the gradient at the point),
// one backward of the logit difference, and the clean run's activations PatchRuns captured.
#include "inspect/attribution_patching.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "core/cancel.hpp"
#include "core/error.hpp"
#include "inspect/heads.hpp"
#include "inspect/recorded_pass.hpp"
#include "nn/inference_scope.hpp"
#include "nn/model.hpp"
#include "run/inference.hpp"

namespace qkv::inspect {

namespace {

using Vec = std::vector<double>;

Vec flat_f64(const Tensor& t) { return to_vector<double>(t.to(DType::f64).contiguous()); }

// The corrupted run's activation at each hook point and the gradient of d there, flat.
struct Taped {
  std::map<std::string, Vec> act, grad;
};

Taped corrupted_gradients(const run::Inference& inf, const PatchRuns& runs,
                          const std::vector<std::string>& points) {
  cancellation_point();
  nn::Hooks hooks;
  hooks.capture = nn::names_matching(points);
  std::map<std::string, ag::Var> leaves;  // the zero each point's activation flows on plus
  for (const std::string& p : points)
    hooks.add(p, [&leaves, p](const ag::Var& x) {
      const ag::Var zero(zeros_like(x.data()), true);
      leaves[p] = zero;
      return ag::add(x, zero);  // x + 0: the same values, and d(.)/d(zero) = d(.)/dx
    });
  const nn::InferenceScope scope(inf.model(), inf.precision(), &hooks, true);
  const ag::Var logits =
      forward_copies(inf.model(), pass_ids(inf.model(), runs.corrupt(), runs.tgt_in()), 1);
  const Tensor seed = logit_seed(logits, logits.size(1) - 1, runs.clean_id(), runs.corrupt_id());
  std::vector<ag::Var> wrt;
  for (const std::string& p : points) wrt.push_back(leaves.at(p));
  const std::vector<Tensor> grads = ag::grad({logits}, {seed}, wrt);
  Taped t;
  for (size_t i = 0; i < points.size(); ++i) {
    t.act[points[i]] = flat_f64(hooks.cache.at(points[i]).data());
    t.grad[points[i]] = flat_f64(grads[i]);
  }
  return t;
}

// (clean - corrupted) . gradient over each of `rows` consecutive runs of `width` values
// starting at `from`, divided by the difference's denominator.
Vec estimates(const Vec& clean, const Vec& corrupt, const Vec& grad, size_t from, size_t rows,
              size_t width, double denominator) {
  Vec out;
  for (size_t r = 0; r < rows; ++r) {
    double s = 0;
    for (size_t j = from + r * width; j < from + (r + 1) * width; ++j)
      s += (clean[j] - corrupt[j]) * grad[j];
    out.push_back(s / denominator);
  }
  return out;
}

// The labels of an attention's query positions (the clean run's).
std::vector<std::string> query_labels(const run::Inference& inf, const PatchRuns& runs,
                                      const Attention& att) {
  const PassIds ids = pass_ids(inf.model(), runs.clean(), runs.tgt_in());
  if (att.queries == nn::Side::output && ids.pair()) return inf.output_labels(runs.tgt_in());
  return inf.input_labels(runs.clean());
}

double pearson(const std::vector<CheckedCell>& cells) {
  const auto n = static_cast<double>(cells.size());
  double mx = 0, my = 0;
  for (const CheckedCell& c : cells) mx += c.estimate / n, my += c.exact / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (const CheckedCell& c : cells) {
    sxy += (c.estimate - mx) * (c.exact - my);
    sxx += (c.estimate - mx) * (c.estimate - mx);
    syy += (c.exact - my) * (c.exact - my);
  }
  if (cells.size() < 2 || sxx <= 0 || syy <= 0) return std::numeric_limits<double>::quiet_NaN();
  return sxy / std::sqrt(sxx * syy);
}

// Every cell with its estimate, in the order of the table (heads, then the residual).
std::vector<CheckedCell> cells_of(const AttributionPatching& r,
                                  const std::vector<Attention>& atts) {
  std::vector<CheckedCell> cells;
  for (size_t i = 0; i < r.heads.size(); ++i) {
    const PatchedHead& h = r.estimate.heads[i];
    for (size_t p = 0; p < r.heads[i].by_position.size(); ++p)
      cells.push_back({"head", h.name, h.layer, h.head, static_cast<int64_t>(p),
                       r.heads[i].positions[p], r.heads[i].by_position[p], 0});
  }
  const Attention& in = atts.front();
  for (size_t l = 0; l < r.estimate.residual.size(); ++l)
    for (size_t p = 0; p < r.estimate.residual[l].size(); ++p)
      cells.push_back({"residual", in.prefix + std::to_string(l) + ".resid_pre",
                       static_cast<int64_t>(l), -1, static_cast<int64_t>(p),
                       r.estimate.positions[p], r.estimate.residual[l][p], 0});
  return cells;
}

// The `check` cells of largest |estimate| (the table's order among equals), patched exactly.
void check_cells(const PatchRuns& runs, const std::vector<Attention>& atts, int64_t check,
                 AttributionPatching& r) {
  std::vector<CheckedCell> cells = cells_of(r, atts);
  std::stable_sort(cells.begin(), cells.end(), [](const CheckedCell& a, const CheckedCell& b) {
    return std::abs(a.estimate) > std::abs(b.estimate);
  });
  cells.resize(static_cast<size_t>(check));
  for (CheckedCell& c : cells) {
    cancellation_point();
    if (c.kind == "residual") {
      c.exact = runs.residual(c.name, c.position);
      continue;
    }
    for (const Attention& att : atts)
      if (c.name == att.head_name(c.layer, c.head))
        c.exact = runs.head(att, c.layer, c.head, {c.position});
  }
  r.correlation = pearson(cells);
  r.checked = std::move(cells);
}

}  // namespace

int64_t attribution_cells(const run::Inference& inf, const PatchRuns& runs) {
  const std::vector<Attention> atts = attentions_of(inf);
  int64_t cells = atts.front().layers * static_cast<int64_t>(runs.clean().size());
  for (const Attention& att : atts)
    cells += att.layers * att.heads * static_cast<int64_t>(query_labels(inf, runs, att).size());
  return cells;
}

AttributionPatching attribution_patching(const run::Inference& inf, const data::Ids& clean,
                                         const data::Ids& corrupt, int64_t check) {
  QKV_CHECK(check >= 0 && check <= kMaxPatchCheck, "patch", "--check must be 1..", kMaxPatchCheck,
            ", got ", check);
  const PatchRuns runs(inf, clean, corrupt);
  const int64_t cells = attribution_cells(inf, runs);
  QKV_CHECK(check <= cells, "patch", "--check ", check, " is more than the ", cells,
            " cells (heads x positions and residual positions) of these inputs");
  const std::vector<Attention> atts = attentions_of(inf);
  const Attention& in = atts.front();  // the input side: the encoder, or the LM's blocks
  std::vector<std::string> points;
  for (const Attention& att : atts)
    for (int64_t l = 0; l < att.layers; ++l) points.push_back(att.z(l));
  for (int64_t l = 0; l < in.layers; ++l)
    points.push_back(in.prefix + std::to_string(l) + ".resid_pre");
  const Taped taped = corrupted_gradients(inf, runs, points);
  const double denominator = runs.clean_diff - runs.corrupt_diff;
  const auto estimate = [&](const std::string& point, size_t from, size_t rows, size_t width) {
    return estimates(flat_f64(runs.clean_at(point).data()), taped.act.at(point),
                     taped.grad.at(point), from, rows, width, denominator);
  };
  AttributionPatching r;
  Patching& e = r.estimate;
  e.clean_answer = runs.clean_answer, e.corrupt_answer = runs.corrupt_answer;
  e.clean_diff = runs.clean_diff, e.corrupt_diff = runs.corrupt_diff;
  for (const Attention& att : atts) {
    const std::vector<std::string> labels = query_labels(inf, runs, att);
    for (int64_t l = 0; l < att.layers; ++l) {
      const Tensor z = runs.clean_at(att.z(l)).data();  // (1, h, n, d_head)
      const auto n = static_cast<size_t>(z.size(2)), width = static_cast<size_t>(z.size(3));
      for (int64_t h = 0; h < att.heads; ++h) {
        HeadEstimate he{labels, estimate(att.z(l), static_cast<size_t>(h) * n * width, n, width)};
        double sum = 0;
        for (const double v : he.by_position) sum += v;
        e.heads.push_back({att.name, att.head_name(l, h), l, h, sum});
        r.heads.push_back(std::move(he));
      }
    }
  }
  e.stream = in.prefix + "{L}.resid_pre";
  e.positions = inf.input_labels(clean);
  for (int64_t l = 0; l < in.layers; ++l) {
    const std::string point = in.prefix + std::to_string(l) + ".resid_pre";
    const Tensor x = runs.clean_at(point).data();  // (1, n, d)
    e.residual.push_back(
        estimate(point, 0, static_cast<size_t>(x.size(1)), static_cast<size_t>(x.size(2))));
  }
  r.correlation = std::numeric_limits<double>::quiet_NaN();
  if (check > 0) check_cells(runs, atts, check, r);
  return r;
}

Work attribution_patching_work(const run::Inference& inf, int64_t n, int64_t check) {
  const int64_t tokens = inf.inspection_tokens(n);
  const int64_t passes = 7 + check;
  return {static_cast<double>(passes) * static_cast<double>(tokens),
          fmt::format("{} passes of {} tokens", passes, tokens)};
}

nlohmann::json attribution_patching_json(const AttributionPatching& r) {
  nlohmann::json j = patch_json(r.estimate);
  j["method"] = "attribution patching";
  for (size_t i = 0; i < r.heads.size(); ++i) {
    j["heads"][i]["positions"] = r.heads[i].positions;
    j["heads"][i]["by_position"] = r.heads[i].by_position;
  }
  if (r.checked.empty()) return j;
  nlohmann::json cells = nlohmann::json::array();
  for (const CheckedCell& c : r.checked) {
    nlohmann::json cell{{"kind", c.kind},         {"name", c.name},   {"layer", c.layer},
                        {"position", c.position}, {"label", c.label}, {"estimate", c.estimate},
                        {"exact", c.exact}};
    if (c.head >= 0) cell["index"] = c.head;
    cells.push_back(std::move(cell));
  }
  j["check"] = {
      {"k", r.checked.size()},
      {"correlation", std::isnan(r.correlation) ? nlohmann::json() : nlohmann::json(r.correlation)},
      {"cells", cells}};
  return j;
}

}  // namespace qkv::inspect
