// Direct logit attribution (Elhage et al. 2021, "A Mathematical Framework for Transformer
// Circuits"; TransformerLens's decompose_resid / stack_head_results and apply_ln_to_stack): the
// last block's output at the last position is a sum of parts -- the embedding (with
// positions), each head's output z_h through its slice of W_O, each attention's W_O bias, each
// MLP's output (none when model.attn_only; and an encoder-decoder's cross-attention heads) --
// and each part's share of one
// token's logit is that part through the final norm with its scale frozen at the value the
// whole stream gave it, times the token's row of the output layer:
//
//   LayerNorm: part -> (part - mean(part)) / s * g . u,   s = sqrt(var(x) + eps) of the stream x
//   RMSNorm:   part -> part / s * g . u,                  s = sqrt(mean(x^2) + eps)
//
// and the norm's bias b . u is its own term, so the parts plus the bias terms sum to the logit.
// The scale is frozen per position and the normed parts pooled as the model pools them
// (nn::Model::pool: an encoder classifier's class logit is read at its pooled position; a
// language model's and a decoder's at the last position). Heads, W_O and the norm are the
// model's typed read-outs (nn::Model::attention_sites, W_O, output_stream, output_layer).
// The parts are computed in float64 from the float32 weights and the captured activations: in
// fp32 they sum to the logit to float32 rounding; in bf16, where the model's products round
// their inputs to 8 bits of mantissa, to about 2^-8 of the parts' size.
// Only for pre-LN models (model.norm_first = true, the GPTs): in a post-LN block a norm follows
// each residual add, so the stream is no sum of the parts; such a model (and a soft-capped
// output) is refused with a message saying why.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.hpp"

namespace qkv::run {
class Inference;
}
namespace qkv::nn {
class Model;
}

namespace qkv::inspect {

struct LogitPart {
  std::string name;  // "embed", "0.1" (a head), "cross.0.1", "attn_bias.0", "mlp.0", "norm_bias"
  double logit = 0;  // its share of the target's logit
};

struct Attribution {
  std::string target;
  double logit = 0;              // the model's logit of the target at the last position
  std::vector<LogitPart> parts;  // the bias terms last
};

// The id of token in the model's output vocabulary, spelt as the vocabulary spells it or as the
// axes' labels show it (a space as _); qkv::Error naming op otherwise.
int64_t output_token_id(const run::Inference& inf, const std::string& token, const char* op);

// The weights over the n positions with which the output layer's row t reads the stream:
// nn::Model::pool applied to the identity (a pooling is linear: a position, or a mean). A
// language model's and a decoder's: 1 at t; an encoder classifier's: its pooled positions.
std::vector<double> read_weights(const nn::Model& model, int64_t n, int64_t t);

Attribution direct_logit_attribution(const run::Inference& inf, const data::Ids& input,
                                     int64_t target);

}  // namespace qkv::inspect
