#include "inspect/site_json.hpp"

namespace qkv::inspect {

nlohmann::json site_json(const nn::AttentionSite& s) {
  const auto side = [](nn::Side x) { return x == nn::Side::input ? "input" : "output"; };
  return {{"name", s.name},
          {"title", s.title},
          {"head_prefix", s.head_prefix()},
          {"queries", side(s.queries)},
          {"keys", side(s.keys)},
          {"causal", s.causal},
          {"layers", s.layers},
          {"heads", s.heads}};
}

nlohmann::json sites_json(const std::vector<nn::AttentionSite>& sites) {
  nlohmann::json out = nlohmann::json::array();
  for (const nn::AttentionSite& s : sites) out.push_back(site_json(s));
  return out;
}

}  // namespace qkv::inspect
