// Element types a Tensor can hold, and a visitor that turns a runtime DType into a C++ type.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "error.hpp"
#include "names.hpp"

namespace qkv {

// f32: activations and weights; f64: gradcheck; i64: token ids and indices;
// b8: boolean masks (one byte per element, 0 or 1). Named as PyTorch names them, in one table
// (core/names.hpp): errors and printed tensors say "float32", never "f32".
enum class DType : uint8_t { f32, f64, i64, b8 };
inline constexpr EnumName<DType> kDTypeNames[] = {
    {"float32", DType::f32}, {"float64", DType::f64}, {"int64", DType::i64}, {"bool", DType::b8}};
constexpr std::span<const EnumName<DType>> names_of(DType) { return kDTypeNames; }

size_t dtype_size(DType dt);
// name_of(dt) as a C string: "float32", "float64", "int64", "bool"
const char* dtype_name(DType dt);
inline bool is_floating(DType dt) { return dt == DType::f32 || dt == DType::f64; }

template <class T>
struct TypeTag {
  using type = T;
};

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::b8;
}

// visit_float(dt, op, [&](auto tag) { using T = typename decltype(tag)::type; ... });
// Calls f with the tag of float or double; any other dtype is an error naming op.
template <class F>
decltype(auto) visit_float(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::f32:
      return f(TypeTag<float>{});
    case DType::f64:
      return f(TypeTag<double>{});
    default:
      throw Error(cat(op, ": expected a float32 or float64 tensor, got ", dtype_name(dt)));
  }
}

// As visit_float, for every dtype.
template <class F>
decltype(auto) visit_all(DType dt, F&& f) {
  switch (dt) {
    case DType::f32:
      return f(TypeTag<float>{});
    case DType::f64:
      return f(TypeTag<double>{});
    case DType::i64:
      return f(TypeTag<int64_t>{});
    default:
      return f(TypeTag<uint8_t>{});
  }
}

}  // namespace qkv
