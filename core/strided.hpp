// Internal: loops over K strided operands that share one shape (already broadcast).
//
// Dimensions that are contiguous in every operand are merged first, so a packed tensor is
// walked as one flat row. The loop body sees one row at a time: base offsets of the row in
// each operand, its length, and each operand's stride along it.
#pragma once
#include <array>
#include <cstdint>

#include "parallel.hpp"
#include "tensor.hpp"

namespace qkv::detail {

template <size_t K>
struct Rows {
  Shape shape;                   // merged shape, at least 1-D
  std::array<Shape, K> strides;  // per operand, same rank as shape
};

template <size_t K>
Rows<K> merge_dims(const Shape& shape, const std::array<const Shape*, K>& strides) {
  Rows<K> r;
  const int64_t nd = static_cast<int64_t>(shape.size());
  for (int64_t d = 0; d < nd; ++d) {
    if (shape[d] == 1) continue;  // size-1 dims never move an offset
    bool merge = !r.shape.empty();
    for (size_t k = 0; k < K && merge; ++k)
      merge = r.strides[k].back() == (*strides[k])[d] * shape[d];
    if (merge) {
      r.shape.back() *= shape[d];
      for (size_t k = 0; k < K; ++k) r.strides[k].back() = (*strides[k])[d];
    } else {
      r.shape.push_back(shape[d]);
      for (size_t k = 0; k < K; ++k) r.strides[k].push_back((*strides[k])[d]);
    }
  }
  if (r.shape.empty()) {
    r.shape.push_back(1);
    for (size_t k = 0; k < K; ++k) r.strides[k].push_back(0);
  }
  return r;
}

// fn(std::array<int64_t, K> base, int64_t n, std::array<int64_t, K> step) for every row.
// Rows run in parallel when the total is large; each row is visited exactly once.
template <size_t K, class F>
void for_each_row(const Shape& shape, const std::array<const Shape*, K>& strides, F&& fn) {
  const Rows<K> r = merge_dims<K>(shape, strides);
  const int64_t nd = static_cast<int64_t>(r.shape.size());
  const int64_t inner = r.shape.back();
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < nd; ++d) rows *= r.shape[d];
  std::array<int64_t, K> step;
  for (size_t k = 0; k < K; ++k) step[k] = r.strides[k].back();

  if (rows == 1) {
    // One long row: split it into chunks so it still runs in parallel.
    parallel_for(inner, 1, [&](int64_t lo, int64_t hi) {
      std::array<int64_t, K> base;
      for (size_t k = 0; k < K; ++k) base[k] = lo * step[k];
      fn(base, hi - lo, step);
    });
    return;
  }
  parallel_for(rows, inner, [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      std::array<int64_t, K> base{};
      int64_t rem = row;
      for (int64_t d = nd - 2; d >= 0; --d) {
        const int64_t i = rem % r.shape[d];
        rem /= r.shape[d];
        for (size_t k = 0; k < K; ++k) base[k] += i * r.strides[k][d];
      }
      fn(base, inner, step);
    }
  });
}

// fn(std::array<int64_t, K> base, int64_t len, std::array<int64_t, K> step) for every lane:
// the 1-D line of elements along dim d, one per index of the other dims. Lanes run in parallel
// when there are many; each lane is handled whole by one thread, in order.
template <size_t K, class F>
void for_each_lane(const Shape& shape, int64_t d, const std::array<const Shape*, K>& strides,
                   F&& fn) {
  Shape rest;
  std::array<Shape, K> rest_strides;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    if (i == d) continue;
    rest.push_back(shape[i]);
    for (size_t k = 0; k < K; ++k) rest_strides[k].push_back((*strides[k])[i]);
  }
  std::array<const Shape*, K> rs;
  for (size_t k = 0; k < K; ++k) rs[k] = &rest_strides[k];
  const Rows<K> r = merge_dims<K>(rest, rs);
  const int64_t len = shape[d];
  std::array<int64_t, K> step;
  for (size_t k = 0; k < K; ++k) step[k] = (*strides[k])[d];
  const int64_t nd = static_cast<int64_t>(r.shape.size());
  const int64_t lanes = numel_of(r.shape);
  parallel_for(lanes, len, [&](int64_t lo, int64_t hi) {
    for (int64_t lane = lo; lane < hi; ++lane) {
      std::array<int64_t, K> base{};
      int64_t rem = lane;
      for (int64_t i = nd - 1; i >= 0; --i) {
        const int64_t idx = rem % r.shape[i];
        rem /= r.shape[i];
        for (size_t k = 0; k < K; ++k) base[k] += idx * r.strides[k][i];
      }
      fn(base, len, step);
    }
  });
}

}  // namespace qkv::detail
