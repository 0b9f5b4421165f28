// AttentionSite: one attention of a model, every layer of it -- the single vocabulary of "which
// attention" that heads, the lens, patching, attribution, figures, `qkv attention` and the page
// read. A model lists its sites from its structure (nn::Model::attention_sites, no forward
// pass); a consumer prints whatever sites it is given and never asks which family it holds.
//
// clang-format off
//   model               name     title                    queries  keys    causal  hook (.z, .pattern)
//   encoder-decoder     encoder  encoder self-attention   input    input   no      encoder.blocks.{l}.attn
//                       decoder  decoder self-attention   output   output  yes     decoder.blocks.{l}.attn
//                       cross    cross-attention          output   input   no      decoder.blocks.{l}.cross
//   decoder-only LM     self     causal self-attention    output   output  yes     blocks.{l}.attn
//   encoder classifier  self     self-attention           input    input   no      blocks.{l}.attn
// clang-format on
//
// Heads are named as TransformerLens counts them (from 0): "cross.1.0" is layer 1, head 0 of the
// site "cross". A model whose attention is one site names it "self" and its heads "L.H" with no
// prefix ("1.0"). A head's output is its slice of the hook point z (B, h, n, d_head) before W_O.
#pragma once
#include <cstdint>
#include <string>

namespace qkv::nn {

// Which side of a pass a position is on: the input (a source, a classifier's text) or the output
// (a decoder's input and labels, a language model's text).
enum class Side { input, output };

struct AttentionSite {
  std::string name;   // "encoder", "decoder", "cross"; "self": a model's only attention
  std::string title;  // "cross-attention": a figure's or a page's words for it
  std::string
      prefix;         // hook prefix of the blocks that hold it, before the layer: "decoder.blocks."
  std::string point;  // its sublayer in a block: "attn" (self-attention) or "cross"
  Side queries = Side::output, keys = Side::output;
  bool causal = false;  // a query sees the keys up to its own position only
  int64_t layers = 0, heads = 0;
  // What a map's axes show: "query (source)", "output token"; "key (the text so far)".
  std::string query_axis, key_axis;
  // Its key where pages and scripts have long named it (serve's attention JSON "kind", the
  // page's data-kind): encoder_self, decoder_self, cross; causal (a language model's).
  std::string key;

  // The hook prefix of layer l's attention, with {l} for the layer: "decoder.blocks.{l}.cross".
  std::string hook() const { return prefix + "{l}." + point; }
  // Hook points of layer l: "decoder.blocks.1.cross.z", "... .pattern".
  std::string point_of(int64_t layer, const char* what) const {
    return prefix + std::to_string(layer) + "." + point + "." + what;
  }
  std::string z(int64_t layer) const { return point_of(layer, "z"); }
  std::string pattern(int64_t layer) const { return point_of(layer, "pattern"); }
  // Its key in training metrics (attention_entropy.<key>): the stack its queries are read by
  // ("encoder": the input side, "decoder": the output side), then "self" or "cross" --
  // encoder_self, decoder_self, decoder_cross.
  std::string metric_key() const {
    return std::string(queries == Side::input ? "encoder" : "decoder") +
           (cross() ? "_cross" : "_self");
  }
  // Keys on the other side than the queries: a decoder reading the source.
  bool cross() const { return queries != keys; }
  // "" for a model's only site ("self"), else name + ".": what a head name starts with.
  std::string head_prefix() const { return name == "self" ? "" : name + "."; }
  std::string head_name(int64_t layer, int64_t head) const {
    return head_prefix() + std::to_string(layer) + "." + std::to_string(head);
  }
};

}  // namespace qkv::nn
