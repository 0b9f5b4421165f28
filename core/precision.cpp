#include "precision.hpp"

#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "bf16_cache.hpp"
#include "error.hpp"
#include "onednn.hpp"
#include "storage.hpp"

namespace qkv {
namespace {

struct WeightCopy {
  std::vector<bf16_t> bits;
  uint64_t generation = 0;  // the outermost scope that converted it
  Tensor keep;              // holds the storage (so its address is not reused) while in a scope
};

using WeightKey = std::tuple<const void*, int64_t, int64_t, int64_t, int64_t>;

// One per thread: the precision in force, the scope depth and the weight copies.
struct PrecisionState {
  Precision precision = Precision::fp32;
  int depth = 0;
  uint64_t generation = 0;
  std::map<WeightKey, WeightCopy> weights;
  std::vector<bf16_t> scratch[2];
};

PrecisionState& state() {
  thread_local PrecisionState s;
  return s;
}

const float* first_element(const detail::StoredMatrix& m) { return m.t.data<float>(); }

}  // namespace

const char* precision_name(Precision p) {
  return name_of(p).data();  // the table's names are string literals, NUL-terminated
}

Precision parse_precision(const std::string& name, const std::string& key) {
  return parse_name<Precision>(name, key);
}

std::string bf16_unsupported_reason() {
  if (!cpu_has_avx512_bf16())
    return "this CPU lacks AVX512_BF16 (the bf16 dot-product instructions, vdpbf16ps)";
  if (!onednn_isa_has_bf16())
    return "oneDNN is capped at " + onednn_isa() +
           " (ONEDNN_MAX_CPU_ISA), below avx512_core_bf16, the ISA with AVX512_BF16";
  return "";
}

Precision resolve_precision(Precision p, const std::string& what) {
  if (p == Precision::fp32) return p;
  const std::string why = bf16_unsupported_reason();
  if (p == Precision::auto_) return why.empty() ? Precision::bf16 : Precision::fp32;
  if (!why.empty()) throw Error(what + ": bf16 cannot run here: " + why + "; use fp32 or auto");
  return p;
}

Precision current_precision() { return state().precision; }

PrecisionScope::PrecisionScope(Precision p) {
  QKV_CHECK(p != Precision::auto_, "PrecisionScope", "resolve \"auto\" first (resolve_precision)");
  if (p == Precision::bf16) resolve_precision(p);
  PrecisionState& s = state();
  saved_ = s.precision;
  s.precision = p;
  ++s.depth;
  ++s.generation;  // copies made before this scope are not reused inside it
}

PrecisionScope::~PrecisionScope() {
  PrecisionState& s = state();
  s.precision = saved_;
  --s.depth;
  // The weights may change now (the optimizer's update follows a step's scope): every copy is
  // stale. Copies the ending scope did not use are dropped; the others keep their buffers for
  // the next conversion of the same matrix, but not their tensors.
  for (auto it = s.weights.begin(); it != s.weights.end();) {
    if (it->second.generation != s.generation) {
      it = s.weights.erase(it);
    } else {
      it->second.keep = Tensor();
      ++it;
    }
  }
  ++s.generation;
}

namespace detail {

const bf16_t* bf16_weight(const StoredMatrix& w) {
  PrecisionState& s = state();
  if (s.depth == 0) return bf16_activation(w, 1);  // no scope: nothing may be reused
  const WeightKey key{first_element(w), w.rows, w.cols, w.ld, w.t.storage()->nbytes()};
  WeightCopy& c = s.weights[key];
  if (c.generation != s.generation) {
    c.bits.resize(static_cast<size_t>(w.rows * w.cols));
    to_bf16_rows(first_element(w), w.rows, w.cols, w.ld, c.bits.data());
    c.generation = s.generation;
    c.keep = w.t;
  }
  return c.bits.data();
}

const bf16_t* bf16_activation(const StoredMatrix& x, int slot) {
  std::vector<bf16_t>& buf = state().scratch[slot];
  if (buf.size() < static_cast<size_t>(x.rows * x.cols)) buf.resize(x.rows * x.cols);
  to_bf16_rows(first_element(x), x.rows, x.cols, x.ld, buf.data());
  return buf.data();
}

}  // namespace detail
}  // namespace qkv
