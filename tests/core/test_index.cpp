// Joining, splitting, indexing and factories, on contiguous and non-contiguous inputs.
#include "support/tensors.hpp"

using namespace qkv;
using namespace qkv::testing;

namespace {
constexpr DType kFloats[] = {DType::f32, DType::f64};
Tensor ids(std::vector<int64_t> v) { return from_vector(v, {static_cast<int64_t>(v.size())}); }
}  // namespace

TEST_CASE("factories: zeros, ones, full, scalar, arange, from_vector, *_like") {
  for (DType dt : {DType::f32, DType::f64, DType::i64, DType::b8}) {
    INFO(dtype_name(dt));
    const Tensor z = zeros({2, 3}, dt), o = ones({2, 3}, dt), f = full({4}, 7, dt);
    CHECK(z.dtype() == dt);
    CHECK(z.shape() == Shape{2, 3});
    CHECK(z.is_contiguous());
    for_each_index(z.shape(), [&](const Shape& i) {
      CHECK(z.at(i) == 0);
      CHECK(o.at(i) == 1);
    });
    for_each_index(f.shape(), [&](const Shape& i) { CHECK(f.at(i) == (dt == DType::b8 ? 1 : 7)); });
    CHECK(zeros_like(f).shape() == f.shape());
    CHECK(ones_like(f).dtype() == dt);
  }
  CHECK(scalar(2.5).dim() == 0);
  CHECK(scalar(2.5).item() == 2.5);
  CHECK(scalar(2.5).numel() == 1);
  const Tensor a = arange(5);
  CHECK(a.dtype() == DType::i64);
  CHECK(to_vector<int64_t>(a) == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(to_vector<float>(arange(3, DType::f32)) == std::vector<float>{0, 1, 2});
  CHECK(arange(0).numel() == 0);
  const Tensor v = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {3, 2});
  CHECK(v.at({2, 1}) == 6);
  CHECK(zeros({0}).numel() == 0);
  CHECK(zeros({}).dim() == 0);
}

TEST_CASE("concat along any dim, with non-contiguous inputs") {
  for (DType dt : kFloats) {
    const Tensor a = randn_t({2, 3, 4}, 61, dt), b = randn_t({2, 5, 4}, 62, dt);
    for (Layout l : kLayouts) {
      INFO(dtype_name(dt) << " " << layout_name(l));
      const Tensor c = concat({with_layout(a, l), b, with_layout(a, l)}, 1);
      CHECK(c.shape() == Shape{2, 11, 4});
      for_each_index(c.shape(), [&](const Shape& i) {
        const int64_t j = i[1];
        const double want = j < 3   ? a.at(i)
                            : j < 8 ? b.at({i[0], j - 3, i[2]})
                                    : a.at({i[0], j - 8, i[2]});
        CHECK(c.at(i) == want);
      });
      const Tensor c2 = concat({with_layout(a, l), a.narrow(2, 0, 1)}, -1);
      CHECK(c2.shape() == Shape{2, 3, 5});
      CHECK(c2.at({1, 2, 4}) == a.at({1, 2, 0}));
      const Tensor c0 = concat({a, a.expand({2, 3, 4})}, 0);
      CHECK(c0.at({3, 1, 2}) == a.at({1, 1, 2}));
    }
    CHECK(concat({zeros({0, 2}, dt), ones({2, 2}, dt)}, 0).shape() == Shape{2, 2});
  }
}

TEST_CASE("stack adds a dim at any position") {
  const Tensor a = randn_t({2, 3}, 63, DType::f32), b = randn_t({2, 3}, 64, DType::f32);
  for (int64_t d : {0, 1, 2, -1}) {
    INFO("dim " << d);
    const Tensor s = stack({a, b.t().contiguous().t()}, d);
    const int64_t dd = d < 0 ? d + 3 : d;
    Shape want = {2, 3};
    want.insert(want.begin() + dd, 2);
    CHECK(s.shape() == want);
    CHECK(max_abs_diff(s.select(dd, 0), a) == 0);
    CHECK(max_abs_diff(s.select(dd, 1), b) == 0);
  }
  CHECK(stack({scalar(1), scalar(2)}, 0).shape() == Shape{2});
}

TEST_CASE("split and chunk return views that cover the input") {
  const Tensor x = randn_t({4, 7}, 65, DType::f64);
  const auto parts = split(x, {2, 0, 5}, 1);
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].shape() == Shape{4, 2});
  CHECK(parts[1].shape() == Shape{4, 0});
  CHECK(parts[2].shape() == Shape{4, 5});
  for (const Tensor& p : parts) CHECK(shares_storage(p, x));
  CHECK(max_abs_diff(concat(parts, 1), x) == 0);
  CHECK(parts[2].at({3, 4}) == x.at({3, 6}));
  const auto ch = chunk(x.t(), 2, 1);  // transposed input: views of a view
  REQUIRE(ch.size() == 2);
  CHECK(ch[1].shape() == Shape{7, 2});
  CHECK(ch[1].at({5, 0}) == x.at({2, 5}));
}

TEST_CASE("index_select along any dim, repeated indices, non-contiguous input") {
  for (DType dt : kFloats) {
    const Tensor x = randn_t({5, 4, 3}, 66, dt);
    for (int64_t d = 0; d < 3; ++d)
      for (Layout l : kLayouts) {
        INFO(dtype_name(dt) << " dim " << d << " " << layout_name(l));
        // the last index, the first twice, then one in the middle
        const Tensor sel = ids({x.size(d) - 1, 0, 0, 1});
        const Tensor got = index_select(with_layout(x, l), d, sel);
        Shape want_shape = x.shape();
        want_shape[d] = sel.numel();
        CHECK(got.shape() == want_shape);
        for_each_index(got.shape(), [&](const Shape& i) {
          Shape j = i;
          j[d] = static_cast<int64_t>(sel.at({i[d]}));
          CHECK(got.at(i) == x.at(j));
        });
      }
    // embedding lookup: a large table, indices from a strided view
    const Tensor table = randn_t({100, 16}, 67, dt);
    const Tensor tok = arange(40).slice(0, 3, 40, 7);  // 3, 10, 17, 24, 31, 38
    const Tensor emb = index_select(table, 0, tok);
    CHECK(max_abs_diff(emb.select(0, 5), table.select(0, 38)) == 0);
  }
  const Tensor i64 = arange(6).view({2, 3});
  CHECK(to_vector<int64_t>(index_select(i64, 1, ids({2, 1}))) == std::vector<int64_t>{2, 1, 5, 4});
}

TEST_CASE("index_add accumulates repeated indices in order") {
  const Tensor base = zeros({4, 2}, DType::f64);
  const Tensor src = tensor({1, 2, 3, 4, 5, 6}, {3, 2}, DType::f64);
  const Tensor out = index_add(base, 0, ids({3, 1, 3}), src);
  CHECK(to_vector<double>(out) == std::vector<double>{0, 0, 3, 4, 0, 0, 6, 8});
  CHECK(max(abs(base)).item() == 0);  // base untouched
  const Tensor out1 = index_add(ones({2, 3}, DType::f64), 1, ids({0, 0}), src.t().narrow(1, 0, 2));
  CHECK(to_vector<double>(out1) == std::vector<double>{1 + 1 + 3, 1, 1, 1 + 2 + 4, 1, 1});
}

TEST_CASE("gather and scatter_add along any dim") {
  for (DType dt : kFloats) {
    const Tensor x = randn_t({3, 4, 5}, 68, dt);
    Generator g(69);
    for (int64_t d = 0; d < 3; ++d) {
      Shape is = {2, 3, 4};
      is[d] = 6;  // more indices than x.size(d) along d: allowed
      const Tensor idx = randint(is, 0, x.size(d), g);
      for (Layout l : kLayouts) {
        INFO(dtype_name(dt) << " dim " << d << " " << layout_name(l));
        const Tensor got = gather(with_layout(x, l), d, with_layout(idx, l));
        CHECK(got.shape() == is);
        for_each_index(is, [&](const Shape& i) {
          Shape j = i;
          j[d] = static_cast<int64_t>(idx.at(i));
          CHECK(got.at(i) == x.at(j));
        });
        // scatter_add is gather's adjoint: <gather(x), s> == <x, scatter_add(0, s)>
        const Tensor s = randn_t(is, 70, DType::f64);
        const Tensor back =
            scatter_add(zeros(x.shape(), DType::f64), d, with_layout(idx, l), with_layout(s, l));
        const double lhs = sum(mul(gather(x.to(DType::f64), d, idx), s)).item();
        const double rhs = sum(mul(x.to(DType::f64), back)).item();
        CHECK(lhs == Approx(rhs).epsilon(1e-12));
      }
    }
  }
  // scatter_add with repeated indices accumulates
  const Tensor out =
      scatter_add(zeros({1, 3}), 1, from_vector(std::vector<int64_t>{2, 2, 0}, {1, 3}),
                  tensor({1, 2, 4}, {1, 3}));
  CHECK(to_vector<float>(out) == std::vector<float>{4, 0, 3});
}

TEST_CASE("one_hot of any shape of indices") {
  const Tensor idx = from_vector(std::vector<int64_t>{2, 0, 1, 2}, {2, 2});
  const Tensor oh = one_hot(idx, 3);
  CHECK(oh.shape() == Shape{2, 2, 3});
  CHECK(oh.dtype() == DType::f32);
  CHECK(to_vector<float>(oh) == std::vector<float>{0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1});
  const Tensor t = one_hot(idx.t(), 4, DType::f64);  // non-contiguous indices
  CHECK(t.at({0, 1, 1}) == 1);                       // idx.t()[0][1] = idx[1][0] = 1
  CHECK(sum(t).item() == 4);
  CHECK(argmax(one_hot(ids({3, 1}), 5), -1).at({0}) == 3);
}
