// An attention site (nn/attention_site.hpp) as JSON: what the page, `qkv heads --json` and the
// training probe's records say of "which attention", so a reader titles and orders the sites as
// the model lists them instead of knowing the families' names.
#pragma once
#include <nlohmann/json.hpp>
#include <vector>

#include "nn/attention_site.hpp"

namespace qkv::inspect {

// {"name", "title", "head_prefix" (what its heads' names start with: "cross.", or "" for a
// model's only site), "queries", "keys" ("input" or "output"), "causal", "layers", "heads"}.
nlohmann::json site_json(const nn::AttentionSite& s);
// Each site's site_json, in the order given (a model's: forward order).
nlohmann::json sites_json(const std::vector<nn::AttentionSite>& sites);

}  // namespace qkv::inspect
