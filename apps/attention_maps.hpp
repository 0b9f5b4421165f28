// Attention maps of a trained run on one input (the model pass: run/inference.hpp,
// Inference::inspect; the drawing: figures/attention_maps.hpp): what `qkv attention` writes to a
// file and `qkv report` puts on its page. Which attention is an attention site
// (nn/attention_site.hpp): one view of the inspection per site.
#pragma once
#include <string>

#include "figures/attention_maps.hpp"
#include "figures/heatmap.hpp"
#include "run/inference.hpp"

namespace qkv::app {

// The view of the site `kind` names: a site's name ("encoder", "decoder", "cross"; "self" for
// a model of one site), or a spelling `qkv attention --kind` has long accepted -- "self" for an
// encoder-decoder's encoder, "decoder-self" for its decoder (or a model's only site). Otherwise
// qkv::Error naming op and the names this model has.
const run::AttentionView& view_named(const run::Inspection& a, const std::string& kind,
                                     const char* op = "attention");

// One map of a view as a heatmap: layer is 1-based (0: the last); head is "mean" or a 1-based
// head. Bad values throw qkv::Error naming `op` and the valid range. cell: pixels per cell side.
figures::Heatmap attention_heatmap(const run::AttentionView& v, int64_t layer,
                                   const std::string& head, int cell = 32,
                                   const char* op = "attention");

}  // namespace qkv::app
