// matmul against a naive float64 triple loop: 2-D and batched with broadcast batch dims,
// transposed views, non-contiguous batch strides, sliced-with-step and expanded operands.
#include "core/fused.hpp"
#include "support/tensors.hpp"

using namespace qkv;
using namespace qkv::testing;

namespace {

constexpr DType kFloats[] = {DType::f32, DType::f64};

// Row-major float64 copy of t's logical values, read one element at a time.
std::vector<double> values(const Tensor& t) {
  std::vector<double> v;
  v.reserve(t.numel());
  for_each_index(t.shape(), [&](const Shape& i) { v.push_back(t.at(i)); });
  return v;
}

// out[..., i, j] = sum_p a[..., i, p] * b[..., p, j], batch dims broadcast: a float64
// triple loop per batch entry.
Tensor naive_matmul(const Tensor& a, const Tensor& b) {
  const Shape ab(a.shape().begin(), a.shape().end() - 2),
      bb(b.shape().begin(), b.shape().end() - 2);
  const Shape batch = broadcast_shapes(ab, bb, "naive");
  const int64_t n = a.size(-2), k = a.size(-1), m = b.size(-1);
  const std::vector<double> va = values(a), vb = values(b);
  Shape out_shape = batch;
  out_shape.push_back(n);
  out_shape.push_back(m);
  Tensor out = zeros(out_shape, DType::f64);
  double* po = out.data<double>();
  int64_t e = 0;
  for_each_index(batch, [&](const Shape& bi) {
    // row-major index of this batch entry inside a's and b's own (unbroadcast) batch shapes
    int64_t ia = 0, ib = 0;
    for (size_t d = 0; d < ab.size(); ++d)
      ia = ia * ab[d] + (ab[d] == 1 ? 0 : bi[d + batch.size() - ab.size()]);
    for (size_t d = 0; d < bb.size(); ++d)
      ib = ib * bb[d] + (bb[d] == 1 ? 0 : bi[d + batch.size() - bb.size()]);
    const double* A = va.data() + ia * n * k;
    const double* B = vb.data() + ib * k * m;
    double* C = po + e++ * n * m;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += A[i * k + p] * B[p * m + j];
        C[i * m + j] = s;
      }
  });
  return out;
}

void check_matmul(const Tensor& a, const Tensor& b) {
  const Tensor got = matmul(a, b);
  const Tensor want = naive_matmul(a, b);
  INFO("a " << shape_str(a.shape()) << " strides " << shape_str(a.strides()) << ", b "
            << shape_str(b.shape()) << " strides " << shape_str(b.strides()) << " "
            << dtype_name(a.dtype()));
  CHECK(got.shape() == want.shape());
  CHECK(got.dtype() == a.dtype());
  const double tol = a.dtype() == DType::f32 ? 2e-5 : 1e-12;
  CHECK(close_ref(got, want, tol, tol * std::sqrt(static_cast<double>(a.size(-1)))));
}

}  // namespace

TEST_CASE("2-d matmul on every pair of layouts, small and large") {
  for (DType dt : kFloats)
    for (Shape nkm : {Shape{5, 7, 3}, Shape{1, 9, 4}, Shape{6, 1, 1}, Shape{70, 80, 90}}) {
      const Tensor a = randn_t({nkm[0], nkm[1]}, 31, dt);
      const Tensor b = randn_t({nkm[1], nkm[2]}, 32, dt);
      for (Layout la : kLayouts)
        for (Layout lb : kLayouts) {
          INFO(layout_name(la) << " @ " << layout_name(lb));
          check_matmul(with_layout(a, la), with_layout(b, lb));
        }
    }
}

TEST_CASE("matmul of transposed views (q @ k^T) reads them without copying") {
  for (DType dt : kFloats) {
    const Tensor q = randn_t({6, 4}, 33, dt), k = randn_t({8, 4}, 34, dt);
    check_matmul(q, k.t());          // (6, 4) @ (4, 8)
    check_matmul(k.t().t(), q.t());  // (8, 4) @ (4, 6)
    check_matmul(q.t().contiguous().t(), k.t());
    const Tensor big_q = randn_t({100, 64}, 35, dt), big_k = randn_t({90, 64}, 36, dt);
    check_matmul(big_q, big_k.t());
    check_matmul(big_k.t().t(), big_q.t());
  }
}

TEST_CASE("batched matmul with broadcast batch dims") {
  for (DType dt : kFloats) {
    struct Case {
      Shape a, b;
    };
    const Case cases[] = {
        {{2, 3, 4, 5}, {2, 3, 5, 6}},   // same batch
        {{2, 3, 4, 5}, {5, 6}},         // b broadcast over all batch dims
        {{4, 5}, {3, 5, 2}},            // a broadcast
        {{2, 1, 4, 5}, {1, 3, 5, 2}},   // both broadcast
        {{3, 1, 4, 5}, {2, 5, 6}},      // rank differs and broadcasts
        {{2, 2, 70, 64}, {2, 64, 70}},  // large matrices: the one-big-GEMM-at-a-time path
    };
    for (const Case& c : cases) {
      const Tensor a = randn_t(c.a, 37, dt), b = randn_t(c.b, 38, dt);
      for (Layout la : kLayouts) {
        INFO(shape_str(c.a) << " @ " << shape_str(c.b) << " a " << layout_name(la));
        check_matmul(with_layout(a, la), b);
        check_matmul(a, with_layout(b, la));
      }
    }
  }
}

TEST_CASE("batched matmul with non-contiguous batch strides (attention head split)") {
  for (DType dt : kFloats) {
    // x: (B, n, H * d) -> heads (B, H, n, d) by view + permute: batch strides are not packed
    const int64_t B = 2, n = 5, H = 3, d = 4;
    const Tensor x = randn_t({B, n, H * d}, 39, dt);
    const Tensor q = x.view({B, n, H, d}).permute({0, 2, 1, 3});  // (B, H, n, d)
    const Tensor k = randn_t({B, n, H * d}, 40, dt).view({B, n, H, d}).permute({0, 2, 3, 1});
    CHECK_FALSE(q.is_contiguous());
    check_matmul(q, k);  // (B, H, n, d) @ (B, H, d, n): k is a transposed view per head
    // the batch dim sliced with step: every other matrix of a stack
    const Tensor stack6 = randn_t({6, 4, 3}, 41, dt);
    const Tensor every_other = stack6.slice(0, 1, 6, 2);  // (3, 4, 3), batch stride 24
    check_matmul(every_other, randn_t({3, 3, 2}, 42, dt));
    check_matmul(randn_t({3, 2, 4}, 43, dt), every_other);
    // rows sliced with step inside each matrix, and a stepped batch
    const Tensor rows =
        randn_t({3, 9, 5}, 44, dt).slice(1, 0, 9, 3).slice(0, 0, 3, 2);  // (2, 3, 5)
    check_matmul(rows, randn_t({5, 4}, 45, dt).slice(0, 0, 5, 1));
    check_matmul(rows, with_layout(randn_t({2, 5, 4}, 46, dt), Layout::stepped));
    // expanded batch (stride 0) and expanded rows (stride 0 inside a matrix)
    const Tensor one = randn_t({1, 4, 5}, 47, dt).expand({3, 4, 5});
    check_matmul(one, randn_t({3, 5, 2}, 48, dt));
    const Tensor row = randn_t({1, 5}, 49, dt).expand({4, 5});
    check_matmul(row, randn_t({5, 3}, 50, dt));
    check_matmul(randn_t({3, 4}, 51, dt), randn_t({4, 1}, 52, dt).expand({4, 6}));
  }
}

TEST_CASE("large products split into per-thread bands: tall, wide, transposed, ragged") {
  // Above 2 x 64^3 multiply-adds each thread computes its own band of rows (tall C) or columns
  // (wide C), 16 at a time; sizes here leave a ragged last band. 3 threads: uneven bands.
  for (int threads : {1, 2, 3}) {
    ScopedThreads scoped(threads);
    for (Shape nkm :
         {Shape{210, 80, 37}, Shape{37, 80, 210}, Shape{16, 2100, 17}, Shape{2100, 17, 16}}) {
      INFO(threads << " threads, n k m " << shape_str(nkm));
      const Tensor a = randn_t({nkm[0], nkm[1]}, 57, DType::f64);
      const Tensor b = randn_t({nkm[1], nkm[2]}, 58, DType::f64);
      check_matmul(a, b);
      check_matmul(a.t().contiguous().t(), b);  // op(A) transposed
      check_matmul(a, b.t().contiguous().t());  // op(B) transposed
      // linear: the bias is written first and every band accumulates onto its own part
      const Tensor w = b.t().contiguous(), bias = randn_t({nkm[2]}, 59, DType::f64);
      const Tensor want = add(naive_matmul(a, b), bias);
      CHECK(max_abs_diff(linear_forward(a, w, bias), want) < 1e-11);
    }
    // batches that do not go round the threads evenly split each matrix instead
    check_matmul(randn_t({3, 100, 80}, 60, DType::f64), randn_t({3, 80, 70}, 61, DType::f64));
  }
}

TEST_CASE("matmul degenerate sizes") {
  const Tensor a = zeros({3, 0}), b = zeros({0, 4});
  const Tensor c = matmul(a, b);
  CHECK(c.shape() == Shape{3, 4});
  CHECK(max(abs(c)).item() == 0);  // k = 0 is a sum of nothing
  CHECK(matmul(zeros({0, 5}), zeros({5, 2})).shape() == Shape{0, 2});
  CHECK(matmul(zeros({2, 0, 5}), zeros({5, 2})).shape() == Shape{2, 0, 2});
  check_matmul(randn_t({1, 1}, 53, DType::f64), randn_t({1, 1}, 54, DType::f64));
}

TEST_CASE("matmul does not write into its inputs") {
  const Tensor a = randn_t({4, 4}, 55, DType::f32), b = randn_t({4, 4}, 56, DType::f32);
  const std::vector<float> a0 = to_vector<float>(a), b0 = to_vector<float>(b);
  (void)matmul(a.t(), b);
  CHECK(to_vector<float>(a) == a0);
  CHECK(to_vector<float>(b) == b0);
}
