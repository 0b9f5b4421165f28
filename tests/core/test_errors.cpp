// Misuse throws qkv::Error, and the message names the op and the shapes involved.
#include "core/random.hpp"
#include "support/tensors.hpp"

using namespace qkv;
using namespace qkv::testing;

TEST_CASE("shape mismatch in broadcasting ops names both shapes") {
  const Tensor a = zeros({2, 3}), b = zeros({4});
  CHECK_ERROR_MENTIONS(add(a, b), "add", "(2, 3)", "(4)");
  CHECK_ERROR_MENTIONS(sub(a, b), "sub", "(2, 3)", "(4)");
  CHECK_ERROR_MENTIONS(mul(a.t(), zeros({2, 2})), "mul", "(3, 2)", "(2, 2)");
  CHECK_ERROR_MENTIONS(div(a, b), "div", "(2, 3)", "(4)");
  CHECK_ERROR_MENTIONS(pow(a, b), "pow", "(2, 3)", "(4)");
  CHECK_ERROR_MENTIONS(maximum(a, b), "maximum", "(2, 3)", "(4)");
  CHECK_ERROR_MENTIONS(lt(a, b), "lt", "(2, 3)", "(4)");
  CHECK_ERROR_MENTIONS(where(gt(a, 0.0), a, b), "where", "(2, 3)", "(4)");
  CHECK_ERROR_MENTIONS(masked_fill(zeros({3}), gt(a, 0.0), 1), "masked_fill", "(3)", "(2, 3)");
  CHECK_ERROR_MENTIONS(a + b, "(2, 3)", "(4)");
}

TEST_CASE("matmul errors name both shapes") {
  CHECK_ERROR_MENTIONS(matmul(zeros({2, 3}), zeros({4, 5})), "matmul", "(2, 3)", "(4, 5)");
  CHECK_ERROR_MENTIONS(matmul(zeros({3}), zeros({3, 5})), "matmul", "(3)", "(3, 5)");
  CHECK_ERROR_MENTIONS(matmul(zeros({2, 2, 3}), zeros({3, 3, 4})), "matmul", "(2)", "(3)");
  CHECK_ERROR_MENTIONS(matmul(zeros({2, 3}), zeros({3, 4}, DType::f64)), "matmul", "float32",
                       "float64", "(2, 3)", "(3, 4)");
  CHECK_ERROR_MENTIONS(matmul(arange(4).view({2, 2}), arange(4).view({2, 2})), "matmul", "int64",
                       "(2, 2)");
}

TEST_CASE("dtype mismatch names dtypes and shapes") {
  const Tensor f = zeros({2, 3}), d = zeros({2, 3}, DType::f64), i = arange(3);
  CHECK_ERROR_MENTIONS(add(f, d), "add", "float32", "float64", "(2, 3)");
  CHECK_ERROR_MENTIONS(eq(f, d), "eq", "float32", "float64");
  CHECK_ERROR_MENTIONS(where(gt(f, 0.0), f, d), "where", "float32", "float64");
  CHECK_ERROR_MENTIONS(where(f, f, f), "where", "bool", "float32", "(2, 3)");
  CHECK_ERROR_MENTIONS(masked_fill(f, f, 0), "masked_fill", "float32", "(2, 3)");
  CHECK_ERROR_MENTIONS(exp(i), "exp", "int64", "(3)");
  CHECK_ERROR_MENTIONS(softmax(i, 0), "softmax", "int64", "(3)");
  CHECK_ERROR_MENTIONS(mean(i), "mean", "int64", "(3)");
  CHECK_ERROR_MENTIONS(var(i), "var", "int64", "(3)");
  CHECK_ERROR_MENTIONS(add(gt(f, 0.0), gt(f, 0.0)), "add", "bool", "(2, 3)");
  CHECK_ERROR_MENTIONS(logical_and(f, gt(f, 0.0)), "logical_and", "float32", "(2, 3)");
  CHECK_ERROR_MENTIONS(concat({f, d}, 0), "concat", "float32", "float64", "(2, 3)");
  CHECK_ERROR_MENTIONS(f.data<double>(), "float32", "float64", "(2, 3)");
  Generator g(1);
  CHECK_ERROR_MENTIONS(randn({2, 3}, g, DType::i64), "randn", "int64", "(2, 3)");
  CHECK_ERROR_MENTIONS(rand({2, 3}, g, DType::b8), "bool", "(2, 3)");
  CHECK_ERROR_MENTIONS(
      scatter_add(zeros({2, 3}), 1, zeros({2, 3}, DType::i64), zeros({2, 3}, DType::f64)),
      "scatter_add", "float32", "float64", "(2, 3)");
}

TEST_CASE("bad dims name the dim and the shape") {
  const Tensor x = zeros({2, 3});
  CHECK_ERROR_MENTIONS(sum(x, {2}), "sum", "dim 2", "(2, 3)");
  CHECK_ERROR_MENTIONS(sum(x, {0, 0}), "sum", "(2, 3)");
  CHECK_ERROR_MENTIONS(mean(x, {-3}), "mean", "-3", "(2, 3)");
  CHECK_ERROR_MENTIONS(max(x, {5}), "max", "(2, 3)");
  CHECK_ERROR_MENTIONS(argmax(x, 2), "argmax", "(2, 3)");
  CHECK_ERROR_MENTIONS(var(x, {7}), "var", "(2, 3)");
  CHECK_ERROR_MENTIONS(softmax(x, 2), "softmax", "(2, 3)");
  CHECK_ERROR_MENTIONS(log_softmax(x, -3), "log_softmax", "(2, 3)");
  CHECK_ERROR_MENTIONS(x.transpose(0, 2), "transpose", "(2, 3)");
  CHECK_ERROR_MENTIONS(x.permute({0, 0}), "permute", "(2, 3)");
  CHECK_ERROR_MENTIONS(x.permute({0}), "permute", "(2, 3)");
  CHECK_ERROR_MENTIONS(x.slice(2, 0, 1), "slice", "(2, 3)");
  CHECK_ERROR_MENTIONS(x.slice(0, 0, 2, 0), "slice", "step", "(2, 3)");
  CHECK_ERROR_MENTIONS(x.select(-3, 0), "select", "(2, 3)");
  CHECK_ERROR_MENTIONS(x.unsqueeze(4), "unsqueeze", "(2, 3)");
  CHECK_ERROR_MENTIONS(x.squeeze(0), "squeeze", "(2, 3)");
  CHECK_ERROR_MENTIONS(x.size(2), "(2, 3)");
  CHECK_ERROR_MENTIONS(concat({x, x}, 2), "concat", "(2, 3)");
  CHECK_ERROR_MENTIONS(concat({x, zeros({3, 3})}, 1), "concat", "(2, 3)", "(3, 3)");
  CHECK_ERROR_MENTIONS(concat({x, zeros({2, 3, 1})}, 0), "concat", "(2, 3)", "(2, 3, 1)");
  CHECK_ERROR_MENTIONS(stack({x, x.t()}, 0), "stack", "(2, 3)", "(3, 2)");
  CHECK_ERROR_MENTIONS(stack({x, x}, 3), "stack", "(2, 3)");
  CHECK_ERROR_MENTIONS(split(x, {1, 1}, 1), "split", "(2, 3)");
  CHECK_ERROR_MENTIONS(chunk(x, 2, 1), "chunk", "(2, 3)");
  CHECK_ERROR_MENTIONS(gather(x, 2, zeros({2, 3}, DType::i64)), "gather", "(2, 3)");
  CHECK_ERROR_MENTIONS(index_select(x, -3, arange(1)), "index_select", "(2, 3)");
  CHECK_ERROR_MENTIONS(scalar(1).select(0, 0), "select", "()");
  CHECK_ERROR_MENTIONS(scalar(1).slice(0, 0, 1), "slice", "()");
  CHECK_ERROR_MENTIONS(scalar(1).size(0), "()");
  CHECK_ERROR_MENTIONS(concat({scalar(1), scalar(2)}, 0), "concat", "()");
}

TEST_CASE("index out of range names the index and the shapes") {
  const Tensor x = zeros({2, 3});
  CHECK_ERROR_MENTIONS(x.select(1, 3), "select", "3", "(2, 3)");
  CHECK_ERROR_MENTIONS(x.select(0, -3), "select", "-3", "(2, 3)");
  CHECK_ERROR_MENTIONS(x.narrow(1, 2, 2), "narrow", "(2, 3)");
  CHECK_ERROR_MENTIONS(x.at({1, 3}), "at", "(1, 3)", "(2, 3)");
  CHECK_ERROR_MENTIONS(x.at({1}), "at", "(1)", "(2, 3)");
  CHECK_ERROR_MENTIONS(x.item(), "item", "(2, 3)");
  const Tensor bad = from_vector(std::vector<int64_t>{0, 5}, {2});
  CHECK_ERROR_MENTIONS(index_select(x, 1, bad), "index_select", "index 5", "(2)", "(2, 3)");
  CHECK_ERROR_MENTIONS(index_select(x, 1, from_vector(std::vector<int64_t>{-1}, {1})),
                       "index_select", "-1", "(2, 3)");
  CHECK_ERROR_MENTIONS(index_select(x, 0, zeros({1, 1}, DType::i64)), "index_select", "(1, 1)");
  CHECK_ERROR_MENTIONS(index_select(x, 0, zeros({1})), "index_select", "float32", "(1)");
  CHECK_ERROR_MENTIONS(index_add(x, 1, bad, zeros({2, 2})), "index_add", "index 5", "(2, 3)");
  CHECK_ERROR_MENTIONS(index_add(x, 1, arange(2), zeros({3, 2})), "index_add", "(2, 3)", "(3, 2)");
  CHECK_ERROR_MENTIONS(gather(x, 1, from_vector(std::vector<int64_t>{0, 3}, {1, 2})), "gather",
                       "index 3", "(1, 2)", "(2, 3)");
  CHECK_ERROR_MENTIONS(gather(x, 1, zeros({3, 1}, DType::i64)), "gather", "(3, 1)", "(2, 3)");
  CHECK_ERROR_MENTIONS(gather(x, 1, zeros({2}, DType::i64)), "gather", "(2)", "(2, 3)");
  CHECK_ERROR_MENTIONS(scatter_add(x, 1, zeros({3, 1}, DType::i64), zeros({3, 1})), "scatter_add",
                       "(3, 1)", "(2, 3)");
  CHECK_ERROR_MENTIONS(
      scatter_add(x, 1, from_vector(std::vector<int64_t>{4}, {1, 1}), zeros({1, 1})), "scatter_add",
      "index 4", "(1, 1)");
  CHECK_ERROR_MENTIONS(one_hot(from_vector(std::vector<int64_t>{0, 3}, {2}), 3), "one_hot",
                       "index 3", "(2)");
}

TEST_CASE("views that strides cannot express, and bad view or expand shapes") {
  const Tensor x = zeros({2, 3, 4});
  const Tensor p = x.permute({1, 0, 2});  // (3, 2, 4)
  CHECK_ERROR_MENTIONS(p.view({3, 8}), "view", "(3, 2, 4)", "(3, 8)", "reshape");
  CHECK_ERROR_MENTIONS(x.transpose(0, 1).view({-1}), "view", "(3, 2, 4)", "(-1)");
  CHECK_ERROR_MENTIONS(zeros({1, 4}).expand({3, 4}).view({12}), "view", "(3, 4)", "(12)");
  CHECK_ERROR_MENTIONS(x.view({5, 5}), "view", "(2, 3, 4)", "(5, 5)");
  CHECK_ERROR_MENTIONS(x.view({-1, -1}), "view", "(-1, -1)");
  CHECK_ERROR_MENTIONS(x.view({5, -1}), "view", "(2, 3, 4)", "(5, -1)");
  CHECK_ERROR_MENTIONS(x.reshape({7}), "reshape", "(2, 3, 4)", "(7)");
  CHECK_ERROR_MENTIONS(p.reshape({5, -1}), "reshape", "(3, 2, 4)", "(5, -1)");
  CHECK_ERROR_MENTIONS(x.expand({2, 5, 4}), "expand", "(2, 3, 4)", "(2, 5, 4)");
  CHECK_ERROR_MENTIONS(x.expand({3, 4}), "expand", "(2, 3, 4)", "(3, 4)");
  CHECK_ERROR_MENTIONS(zeros({-1}), "(-1)");
  CHECK_ERROR_MENTIONS(from_vector(std::vector<float>{1, 2, 3}, {2, 2}), "from_vector", "(2, 2)");
  CHECK_ERROR_MENTIONS(zeros({2}).copy_(zeros({3})), "(3)", "(2)");
  CHECK_ERROR_MENTIONS(max_abs_diff(zeros({2}), zeros({3})), "(2)", "(3)");
  CHECK_ERROR_MENTIONS(sum_to(zeros({2, 3}), {4}), "sum_to", "(2, 3)", "(4)");
  CHECK_ERROR_MENTIONS(softmax_backward(zeros({2, 3}), zeros({3, 2}), 0), "softmax_backward",
                       "(2, 3)", "(3, 2)");
}

TEST_CASE("undefined tensors are reported, not dereferenced") {
  const Tensor u;
  CHECK_FALSE(u.defined());
  CHECK_THROWS_AS(add(u, zeros({1})), Error);
  CHECK_THROWS_AS(u.raw_data(), Error);
  CHECK_THROWS_AS(u.data<float>(), Error);
  CHECK_THROWS_AS(exp(u), Error);
  CHECK_THROWS_AS(sum(u), Error);
  CHECK_THROWS_AS(matmul(u, u), Error);
  CHECK_THROWS_AS(softmax(u, 0), Error);
  CHECK_THROWS_AS(u.contiguous(), Error);
  CHECK_THROWS_AS(u.clone(), Error);
}
