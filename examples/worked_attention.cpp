// The lesson's worked example, written against the installed qkv package only:
// scaled dot-product attention on three tokens, then why the 1/sqrt(d_k) scale is there.
//
//   cmake -S examples -B build-examples -DCMAKE_PREFIX_PATH=/your/prefix && cmake --build
//   build-examples build-examples/worked_attention
#include <cmath>
#include <cstdio>
#include <qkv/core/random.hpp>
#include <qkv/core/tensor.hpp>
#include <qkv/nn/attention.hpp>

using qkv::Tensor;
using qkv::ag::Var;

namespace {

void print_matrix(const char* name, const Tensor& t) {  // t: (rows, cols), float32
  const std::vector<float> v = qkv::to_vector<float>(t.contiguous());
  const int64_t rows = t.shape()[0], cols = t.shape()[1];
  std::printf("%s =\n", name);
  for (int64_t i = 0; i < rows; ++i) {
    std::printf("  [");
    for (int64_t j = 0; j < cols; ++j) std::printf(" %6.3f", v[static_cast<size_t>(i * cols + j)]);
    std::printf(" ]\n");
  }
}

// The largest attention weight of each row of softmax(q k^T * scale), averaged over rows, for
// random q, k of width d_k: near 1/n when the softmax is spread, near 1 when it saturates.
double mean_max_weight(int64_t d_k, double scale, qkv::Generator& g) {
  const int64_t n = 64;
  const Tensor q = qkv::randn({n, d_k}, g), k = qkv::randn({n, d_k}, g);
  const Tensor w = qkv::softmax(qkv::mul(qkv::matmul(q, k.t()), scale), -1);
  return qkv::mean(qkv::max(w, {1})).item();
}

}  // namespace

int main() {
  // Three tokens with d_k = 2; the keys are the queries (self-attention), V holds one value each.
  const Var Q(qkv::tensor({1, 0, 0, 1, 1, 1}, {3, 2}));
  const Var V(qkv::tensor({1, 0, 0, 1, 0.5, 0.5}, {3, 2}));
  Var A;  // the attention weights, returned on request
  const Var O = qkv::nn::scaled_dot_product_attention(Q, Q, V, Tensor(), std::nullopt, &A);
  print_matrix("scores Q K^T / sqrt(2)",
               qkv::mul(qkv::matmul(Q.data(), Q.data().t()), 1 / std::sqrt(2.0)));
  print_matrix("A = softmax(scores)", A.data());
  print_matrix("O = A V", O.data());
  // The lesson's numbers, to three decimals; an example that disagrees with them says so.
  const Tensor A_lesson =
      qkv::tensor({0.401, 0.198, 0.401, 0.198, 0.401, 0.401, 0.248, 0.248, 0.503}, {3, 3});
  const double off = qkv::max(qkv::abs(qkv::sub(A.data(), A_lesson))).item();
  std::printf("largest difference from the lesson's A: %.4f\n\n", off);
  if (off > 5e-4) return 1;

  // Why 1/sqrt(d_k): a dot product of two random unit-variance vectors has variance d_k, so
  // unscaled scores grow with the width and the softmax saturates on one key.
  qkv::Generator g(1);
  std::printf("%6s  %22s  %22s\n", "d_k", "max weight, unscaled", "max weight, 1/sqrt(d_k)");
  for (const int64_t d_k : {4, 16, 64, 256, 1024}) {
    const double unscaled = mean_max_weight(d_k, 1.0, g);
    const double scaled = mean_max_weight(d_k, 1 / std::sqrt(static_cast<double>(d_k)), g);
    std::printf("%6lld  %22.3f  %22.3f\n", static_cast<long long>(d_k), unscaled, scaled);
  }
  return 0;
}
