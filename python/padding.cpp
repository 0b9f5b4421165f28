#include "python/padding.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace qkv::python {

namespace {

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// The name's last component and the one before it ("blocks.0.attn.q" -> "attn", "q").
std::pair<std::string, std::string> tail(const std::string& name) {
  const size_t last = name.rfind('.');
  if (last == std::string::npos) return {"", name};
  const size_t before = name.rfind('.', last - 1);
  const size_t from = before == std::string::npos ? 0 : before + 1;
  return {name.substr(from, last - from), name.substr(last + 1)};
}

// Each axis of positions of the point, with the batch whose padding lies along it.
std::vector<std::pair<int, const Batch*>> padded_axes(const std::string& name, const Batch& input,
                                                      const Batch& decoder) {
  const bool two_sides = decoder.ids.defined();
  const Batch* own = two_sides && !starts_with(name, "encoder.") ? &decoder : &input;
  const auto [sub, last] = tail(name);
  if (name == "pooled" || (name.find("rnn.") != std::string::npos && (last == "h" || last == "c")))
    return {};  // (B, 1, d), (2, B, d / 2): no positions
  if (sub == "attn" || sub == "cross") {
    const Batch* keys = sub == "cross" ? &input : own;
    if (last == "q" || last == "z") return {{2, own}};
    if (last == "k" || last == "v") return {{2, keys}};
    if (last == "pattern") return {{2, own}, {3, keys}};
  }
  return {{1, own}};
}

// a[b, ..., p, ...] = 0 for every padded position p of row b along axis.
void zero_along(py::array_t<float, py::array::c_style>& a, int axis, const Batch& batch) {
  const int64_t B = batch.ids.size(0), n = batch.ids.size(1);
  if (a.ndim() <= axis || a.shape(0) != B || a.shape(axis) != n) return;
  int64_t outer = 1, inner = 1;  // the dims between the batch and the axis, and after it
  for (int d = 1; d < axis; ++d) outer *= a.shape(d);
  for (py::ssize_t d = axis + 1; d < a.ndim(); ++d) inner *= a.shape(d);
  float* p = a.mutable_data();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t real = batch.lengths[static_cast<size_t>(b)];
    if (real == n) continue;
    for (int64_t o = 0; o < outer; ++o) {
      float* row = p + ((b * outer + o) * n + real) * inner;
      std::fill(row, row + (n - real) * inner, 0.0f);
    }
  }
}

}  // namespace

void zero_padding(py::array& a, const std::string& name, const Batch& input, const Batch& decoder) {
  auto f = py::array_t<float, py::array::c_style>::ensure(a);
  if (!f || f.ptr() != a.ptr()) return;  // not the float32 row-major array the cache holds
  for (const auto& [axis, batch] : padded_axes(name, input, decoder))
    if (batch->padded()) zero_along(f, axis, *batch);
}

}  // namespace qkv::python
