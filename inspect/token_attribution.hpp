// Token attribution (`qkv attribute`): for each output token, how much each input token and
// each earlier output token contributed to it, by one of five methods. Works on every family
// through the model's attention sites and hook points (no family is asked for):
//
//   family           input side (columns first)        output side (columns after)     rows
//   encoder-decoder  the source, at encoder.embed      the decoder's input <bos> y_1 ..  y_1 .. y_k
//                                                       y_{k-1}, at decoder.embed
//   language model   the prompt, at embed              the continuation c_1 .. c_{k-1}  c_1 .. c_k
//   encoder classif. <cls> + the symbols, at embed     (none)                           the class
//
// Output row r is scored on the logit the model gives its token at the position that predicts
// it (the decoder's r-th position; the language model's position n - 1 + r for a prompt of n;
// the classifier's pooled read-out). f_r = logit(y_r), or with a contrast token c the logit
// difference logit(y_r) - logit(c) (Yin and Neubig 2022, "Interpreting Language Models with
// Contrastive Explanations"). A row reads only the output-side positions up to its own (causal):
// later ones score exactly 0 (`visible`).
//
// Methods (e_i: the activation at the embedding hook point of token i, (d); g_i = df_r/de_i):
//   saliency             |g_i|_2                                    (Simonyan et al. 2014)
//   input-x-gradient     sum_d e_i,d g_i,d                          (Shrikumar et al. 2016)
//   integrated-gradients sum_d (e_i,d - b_i,d) * mean_k g_i,d(b + a_k (e - b)),
//                        a_k = (k + 1/2) / m, k = 0..m-1 (the midpoint Riemann sum, Captum's
//                        "riemann_middle"), baseline b (IgBaseline): zero (every embedding of
//                        both sides 0) or pad (every token's embedding the padding token's,
//                        Captum's and Inseq's usual choice for text), the positions still added
//                                                                  (Sundararajan et al. 2017)
//                        completeness: sum_i IG_i = f(e) - f(b) up to the sum's error, reported
//                        per row (value, baseline_value, the sum).
//   attention-rollout    per self-attention layer A = mean over heads of the pattern,
//                        A' = 0.5 A + 0.5 I, rolled out R = A'_L ... A'_1 (Abnar and Zuidema
//                        2020). Encoder-decoder: the encoder's rollout R_enc (S x S) first; the
//                        decoder tracks D (T x (S + T)) over [source | decoder input], from
//                        [0 | I]; each decoder layer applies its self-attention D <- A'_self D and
//                        then its cross-attention D <- 0.5 D + 0.5 [C R_enc | 0], C the mean
//                        cross pattern (T x S): half the residual stream stays, half comes from
//                        the encoder's output positions, each already a mix of source tokens.
//                        Rows sum to 1. Independent of the output token (no contrast).
//   value-zeroing        per attention layer and key position j: the layer's block output
//                        (resid_post) with j's value vector zeroed in every head, against the
//                        block output as it is: C_ij = cosine distance at query i, each row
//                        divided by its sum (Mohebbi et al. 2023, "Quantifying Context Mixing
//                        in Transformers"); composed over layers as the rollout is, without
//                        the 0.5 I (the block output already holds the residual). An
//                        encoder-decoder's decoder layer zeroes its self-attention's values
//                        (T keys) and its cross-attention's (the S encoder outputs), normalizes
//                        each row over both, and D <- C_self D + C_cross [R_enc | 0]. One pass of
//                        m + 1 copies per layer (m keys). Independent of the output token.
// Rollout and value zeroing apply where attention is what mixes positions: a model with a side
// that has no self-attention (a recurrent or convolutional encoder, a recurrent decoder) is a
// qkv::Error naming the side's embedding; the gradient methods apply to every model.
// All gradients are taken in one recorded pass per batch of interpolated inputs (IG: `batch`
// inputs per pass, each a copy of the input with its embeddings scaled), then one backward per
// output row through ag::grad, which writes no weight's .grad(): concurrent calls share nothing.
// Passes run under the calling thread's hooks (an ablation around the call stays in place).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "inspect/work.hpp"

namespace qkv::run {
class Inference;
}

namespace qkv::inspect {

enum class AttributionMethod {
  saliency,
  input_x_gradient,
  integrated_gradients,
  attention_rollout,
  value_zeroing
};

// "saliency", "input-x-gradient", "integrated-gradients", "attention-rollout", "value-zeroing".
const char* name_of(AttributionMethod m);
// The method named; qkv::Error naming op, the nearest name and every name otherwise.
AttributionMethod attribution_method(const std::string& name, const char* op);

// Integrated gradients' baseline b, at every embedding hook point of the pass (both sides):
//   zero  every position's embedding 0
//   pad   every position's embedding that of the side's <pad> token (as the model embeds it,
//         times sqrt(d) when scale_embedding); a vocabulary without <pad> is an error
enum class IgBaseline { zero, pad };
const char* name_of(IgBaseline b);   // "zero", "pad"
const char* describe(IgBaseline b);  // one line, as the table prints it
// The baseline named; qkv::Error naming op, the nearest name and every name otherwise.
IgBaseline ig_baseline(const std::string& name, const char* op);

inline constexpr int64_t kMaxAttributionSteps = 512;  // IG's --steps bound
inline constexpr int64_t kMaxAttributionTokens = 64;  // a language model's --tokens bound
// qkv attribute --max-work, in token passes (inspect/work.hpp): integrated gradients' 64 steps
// on a Multi30k sentence of 7 + 9 tokens are 20k and take 2 s on 2 loaded cores.
inline constexpr int64_t kMaxAttributionWork = 1'000'000;

struct AttributionQuery {
  data::Ids input;        // as Inference::encode gives it
  data::Ids outputs;      // the output tokens scored, one row each (no <bos>/<eos>; a class id)
  int64_t contrast = -1;  // >= 0: score logit(output) - logit(contrast) instead of the logit
  AttributionMethod method = AttributionMethod::saliency;
  int64_t steps = 64;  // integrated gradients: 1..kMaxAttributionSteps
  int64_t batch = 16;  // integrated gradients: interpolated inputs per recorded pass, >= 1
  IgBaseline baseline = IgBaseline::zero;  // integrated gradients' b
  int64_t max_work = kMaxAttributionWork;  // refused before any pass past it (check_work)
};

struct TokenAttribution {
  std::string method;                // name_of(method)
  std::vector<std::string> inputs;   // input-side column labels
  std::vector<std::string> context;  // output-side column labels (none for a classifier)
  std::vector<std::string> outputs;  // row labels: the scored tokens
  std::string contrast;              // its label; empty: none
  // rows x (inputs + context); a row's context columns past visible[r] are 0
  std::vector<std::vector<double>> scores;
  std::vector<int64_t> visible;  // per row: the context columns it reads
  // Integrated gradients (else empty): f at the input and at the baseline, per row.
  std::vector<double> value, baseline_value;
  int64_t steps = 0;     // integrated gradients' m; 0 otherwise
  std::string baseline;  // integrated gradients: name_of(its IgBaseline); empty otherwise
  // The row's sum of scores against value - baseline_value, relative to |value - baseline|.
  double completeness_error(size_t row) const;
};

// The outputs scored by default: a translator's greedy output, a language model's `tokens`
// greedy next tokens (1..kMaxAttributionTokens, within its context), a classifier's class.
data::Ids default_outputs(const run::Inference& inf, const data::Ids& input, int64_t tokens);
// Text as output ids: a translator's target (tokenized as its data's targets), a language
// model's continuation, a classifier's class name. qkv::Error naming op for a token the
// output vocabulary lacks.
data::Ids output_ids(const run::Inference& inf, const std::string& text, const char* op);

// The work of q: each pass's tokens (both sides) times its copies, times 1 + 2 x the output rows
// (a forward, and a backward per row), plus the plain passes (the embeddings, IG's f(input) and
// f(baseline), the pad baseline's embeddings; the rollout's one pass).
Work attribution_work(const run::Inference& inf, const AttributionQuery& q);

// The attribution of q (see above). qkv::Error naming "attribute" for outputs past the model's
// positions, an empty output, steps or batch out of range, a contrast with attention-rollout,
// work past q.max_work, a pad baseline for a vocabulary without <pad>.
TokenAttribution attribute_tokens(const run::Inference& inf, const AttributionQuery& q);

// {"method", "contrast" (null or a token), "baseline" ("zero" or "pad", IG), "steps" (IG),
//  "inputs": [labels], "context": [labels],
//  "outputs": [{"token", "inputs": [scores], "context": [scores of the visible context],
//               IG: "value", "baseline_value", "sum", "completeness_error"}]}
nlohmann::json token_attribution_json(const TokenAttribution& a);

}  // namespace qkv::inspect
