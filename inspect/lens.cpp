// The logit lens (inspect/lens.hpp), through hooks: the last block's output replaced by an
// earlier residual stream, so the final norm and output layer are the model's own code.
#include "inspect/lens.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.hpp"
#include "inspect/attribution.hpp"
#include "nn/model.hpp"
#include "run/inference.hpp"

namespace qkv::inspect {

namespace {

// softmax of one row (V) in float64.
std::vector<double> probabilities(const Tensor& row) {
  std::vector<double> p = to_vector<double>(row.to(DType::f64));
  const double top = *std::max_element(p.begin(), p.end());
  double z = 0;
  for (double& x : p) z += (x = std::exp(x - top));
  for (double& x : p) x /= z;
  return p;
}

}  // namespace

Lens logit_lens(const run::Inference& inf, const data::Ids& input, int64_t k, int64_t position) {
  // The stream the output layer reads (a language model's blocks, a decoder's, a classifier's).
  const nn::Model::Stream out = inf.model().output_stream();
  QKV_CHECK(out.layers > 0, "lens",
            "the logit lens reads the residual stream between blocks, and this model's output "
            "layer reads none (a recurrent decoder's read-out of its state)");
  const run::Inspection in = inf.inspect(input);
  std::vector<std::pair<std::string, std::string>> points{{"embed", out.blocks + "0.resid_pre"}};
  for (int64_t l = 0; l < out.layers; ++l)
    points.emplace_back(std::to_string(l), out.blocks + std::to_string(l) + ".resid_post");
  nn::Hooks capture;  // a layer inside the caller's, as `read` below (an ablation stays)
  std::vector<std::string> names;
  for (const auto& p : points) names.push_back(p.second);
  capture.capture = nn::names_matching(names);
  Lens lens;
  lens.logits = inf.logits(input, in.tgt_in, &capture);
  const int64_t T = lens.logits.size(0);
  QKV_CHECK(position >= -1 && position < T, "lens", "--position ", position, " is past the ", T,
            " positions of this input's pass (0..", T - 1, ")");
  const int64_t last = position < 0 ? T - 1 : position;  // the row read
  lens.index = last;
  const std::vector<double> final_p = probabilities(lens.logits.select(0, last));
  lens.prediction_id = std::max_element(final_p.begin(), final_p.end()) - final_p.begin();
  lens.prediction = inf.output_labels({lens.prediction_id})[0];
  lens.position = inf.output_labels({in.tgt_in[static_cast<size_t>(last)]})[0];
  const std::string last_block = points.back().second;
  for (const auto& [name, point] : points) {
    nn::Hooks read;  // the last block's output replaced by this residual stream
    const ag::Var resid = capture.cache.at(point);
    read.add(last_block, [resid](const ag::Var&) { return resid; });
    LensLayer row;
    row.name = name;
    row.hook = point;
    row.logits = inf.logits(input, in.tgt_in, &read);
    const std::vector<double> p = probabilities(row.logits.select(0, last));
    std::vector<int64_t> order(p.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    for (int64_t i = 0; i < std::min<int64_t>(k, static_cast<int64_t>(order.size())); ++i)
      row.top.emplace_back(inf.output_labels({order[i]})[0], p[order[i]]);
    row.rank = std::find(order.begin(), order.end(), lens.prediction_id) - order.begin();
    row.probability = p[lens.prediction_id];
    lens.layers.push_back(std::move(row));
  }
  return lens;
}

nlohmann::json lens_json(const Lens& lens, const Attribution* parts) {
  nlohmann::json layers = nlohmann::json::array();
  for (const LensLayer& l : lens.layers) {
    nlohmann::json top = nlohmann::json::array();
    for (const auto& [t, p] : l.top) top.push_back({{"token", t}, {"probability", p}});
    layers.push_back({{"layer", l.name},
                      {"hook", l.hook},
                      {"rank", l.rank},
                      {"probability", l.probability},
                      {"top", top}});
  }
  nlohmann::json out{{"position", lens.position},
                     {"index", lens.index},
                     {"prediction", lens.prediction},
                     {"layers", layers}};
  if (parts) {
    nlohmann::json list = nlohmann::json::array();
    for (const LogitPart& p : parts->parts) list.push_back({{"part", p.name}, {"logit", p.logit}});
    out["attribution"] = {{"target", parts->target}, {"logit", parts->logit}, {"parts", list}};
  }
  return out;
}

}  // namespace qkv::inspect
