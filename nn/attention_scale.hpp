// The scale on the attention scores q . k, in one form from the config's [model]
// attention_scale through ModelConfig, BlockConfig, MultiHeadAttention and the scorer to
// scaled_dot_product_attention, which resolves it to the number the kernel multiplies by.
//
//   AttentionScale()      the default, 1 / sqrt(d_k) (Vaswani et al.)
//   AttentionScale(1.0)   a fixed number > 0 (1: no scaling)
//
// resolve(d_k) is the one place the default is computed. Only scorers that form q . k take a
// scale (the `scale` column of QKV_ATTENTIONS, nn/kinds.hpp); attention_conflict refuses a fixed
// scale for the others.
#pragma once
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "core/error.hpp"

namespace qkv::nn {

class AttentionScale {
 public:
  constexpr AttentionScale() = default;
  constexpr AttentionScale(std::nullopt_t) {}  // the default, as AttentionScale()
  // A fixed scale: finite and > 0. Implicit, so a call reads sdpa(q, k, v, mask, 1.0).
  AttentionScale(double s) : fixed_(s) {
    QKV_CHECK(std::isfinite(s) && s > 0, "AttentionScale", "must be a finite number > 0, got ", s);
  }
  // [model] attention_scale's spelling: 0 is the default, > 0 that number; anything else is
  // qkv::Error naming key.
  static AttentionScale from_config(double v, const std::string& key = "model.attention_scale") {
    QKV_CHECK(std::isfinite(v) && v >= 0, key, "must be >= 0 (0 means 1/sqrt(d_k)), got ", v);
    return v == 0 ? AttentionScale() : AttentionScale(v);
  }
  double config_value() const { return fixed_.value_or(0.0); }  // from_config's inverse

  bool is_default() const { return !fixed_; }
  // The number q . k is multiplied by, for heads of width d_k.
  double resolve(int64_t d_k) const {
    return fixed_ ? *fixed_ : 1.0 / std::sqrt(static_cast<double>(d_k));
  }
  bool operator==(const AttentionScale&) const = default;

 private:
  std::optional<double> fixed_;  // nullopt: 1 / sqrt(d_k)
};

}  // namespace qkv::nn
