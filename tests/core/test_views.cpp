// Views share storage and never copy; reshape copies only when no strides can express the
// new shape; contiguous() packs.
#include "support/tensors.hpp"

using namespace qkv;
using namespace qkv::testing;

namespace {
// x = [0, 1, ..., n-1] as float64 of shape s.
Tensor iota(const Shape& s) { return arange(numel_of(s), DType::f64).view(s); }
}  // namespace

TEST_CASE("view of a contiguous tensor shares storage and keeps row-major order") {
  const Tensor x = iota({2, 3, 4});
  const Tensor v = x.view({4, -1});
  CHECK(v.shape() == Shape{4, 6});
  CHECK(shares_storage(v, x));
  CHECK(v.is_contiguous());
  CHECK(v.at({2, 5}) == 17);
  CHECK(x.view({24}).at({23}) == 23);
  CHECK(x.view({1, 24, 1}).at({0, 7, 0}) == 7);
  CHECK(x.flatten().dim() == 1);
}

TEST_CASE("view of non-contiguous tensors: allowed where strides can express it") {
  const Tensor x = iota({2, 3, 4});
  SECTION("permuted: splitting a dim and merging contiguous dims") {
    const Tensor p = x.permute({1, 0, 2});  // (3, 2, 4), strides (4, 12, 1)
    const Tensor v = p.view({3, 2, 2, 2});
    CHECK(shares_storage(v, x));
    for_each_index(v.shape(), [&](const Shape& i) {
      CHECK(v.at(i) == p.at({i[0], i[1], i[2] * 2 + i[3]}));
    });
    CHECK_THROWS_AS(p.view({3, 8}), Error);  // dims 1 and 2 of p are not adjacent in memory
    CHECK_THROWS_AS(p.view({6, 4}), Error);
  }
  SECTION("sliced with step: a strided 1-d run splits into rows") {
    const Tensor s = iota({12}).slice(0, 0, 12, 2);  // 0, 2, ..., 10
    const Tensor v = s.view({2, 3});
    CHECK(shares_storage(v, s));
    CHECK(v.strides() == Shape{6, 2});
    CHECK(v.at({1, 2}) == 10);
  }
  SECTION("size-1 dims take any stride") {
    const Tensor t = x.transpose(0, 2);  // (4, 3, 2)
    const Tensor v = t.view({4, 1, 3, 1, 2});
    CHECK(shares_storage(v, x));
    CHECK(v.at({3, 0, 2, 0, 1}) == t.at({3, 2, 1}));
    CHECK(t.unsqueeze(1).view({4, 3, 2}).at({1, 2, 1}) == t.at({1, 2, 1}));
  }
  SECTION("expanded: a broadcast dim cannot merge with a real one") {
    const Tensor e = iota({1, 4}).expand({3, 4});
    CHECK_THROWS_AS(e.view({12}), Error);
    const Tensor v = e.view({3, 2, 2});
    CHECK(v.stride(0) == 0);
    CHECK(v.at({2, 1, 1}) == 3);
  }
  SECTION("empty tensors view as any shape with zero elements") {
    const Tensor z = zeros({0, 3}).t();
    CHECK(z.view({3, 0, 1}).shape() == Shape{3, 0, 1});
  }
}

TEST_CASE("reshape is a view when strides allow, a copy only otherwise") {
  const Tensor x = iota({2, 3, 4});
  const Tensor r1 = x.reshape({6, 4});
  CHECK(shares_storage(r1, x));
  const Tensor p = x.permute({1, 0, 2});
  const Tensor r2 = p.reshape({3, 2, 2, 2});  // expressible: still a view
  CHECK(shares_storage(r2, x));
  const Tensor r3 = p.reshape({3, 8});  // not expressible: a packed copy
  CHECK_FALSE(shares_storage(r3, x));
  CHECK(r3.is_contiguous());
  for_each_index(r3.shape(), [&](const Shape& i) {
    CHECK(r3.at(i) == p.at({i[0], i[1] / 4, i[1] % 4}));
  });
  const Tensor t = x.transpose(1, 2).reshape({-1});
  CHECK_FALSE(shares_storage(t, x));
  CHECK(t.at({1}) == 4);  // x[0][1][0]
  const Tensor s = iota({12}).slice(0, 1, 12, 2).reshape({3, 2});
  CHECK(s.strides() == Shape{4, 2});
  CHECK(s.at({2, 1}) == 11);
}

TEST_CASE("writes through a view are seen by its base") {
  Tensor x = zeros({3, 4}, DType::f64);
  x.t().select(0, 2).fill_(5);                   // column 2
  x.slice(0, 0, 3, 2).narrow(1, 0, 1).fill_(7);  // rows 0 and 2, column 0
  CHECK(x.at({1, 2}) == 5);
  CHECK(x.at({0, 2}) == 5);
  CHECK(x.at({0, 0}) == 7);
  CHECK(x.at({2, 0}) == 7);
  CHECK(x.at({1, 0}) == 0);
  CHECK(sum(x).item() == 15 + 14);
}

TEST_CASE("transpose and permute swap shapes and strides") {
  const Tensor x = iota({2, 3, 4});
  const Tensor t = x.transpose(0, -1);
  CHECK(t.shape() == Shape{4, 3, 2});
  CHECK(t.strides() == Shape{1, 4, 12});
  CHECK_FALSE(t.is_contiguous());
  CHECK(t.at({3, 1, 1}) == x.at({1, 1, 3}));
  const Tensor p = x.permute({2, 0, 1});
  CHECK(p.shape() == Shape{4, 2, 3});
  for_each_index(p.shape(), [&](const Shape& i) { CHECK(p.at(i) == x.at({i[1], i[2], i[0]})); });
  CHECK(x.permute({0, 1, 2}).is_contiguous());
  CHECK(iota({3, 4}).t().t().is_contiguous());
  CHECK(scalar(2).transpose(0, -1).item() == 2);
}

TEST_CASE("slice with step, negative bounds and clamping, then narrow and select") {
  const Tensor x = iota({10});
  const Tensor s = x.slice(0, 1, 8, 3);  // 1, 4, 7
  CHECK(s.shape() == Shape{3});
  CHECK(s.stride(0) == 3);
  CHECK(s.offset() == 1);
  CHECK(to_vector<double>(s) == std::vector<double>{1, 4, 7});
  CHECK(to_vector<double>(x.slice(0, -3, 10)) == std::vector<double>{7, 8, 9});
  CHECK(to_vector<double>(x.slice(0, 8, 100, 4)) == std::vector<double>{8});
  CHECK(x.slice(0, 5, 2).numel() == 0);
  // step on a step: strides multiply
  CHECK(to_vector<double>(x.slice(0, 0, 10, 2).slice(0, 1, 5, 2)) == std::vector<double>{2, 6});

  const Tensor m = iota({4, 5});
  const Tensor n = m.narrow(1, 1, 3);
  CHECK(n.shape() == Shape{4, 3});
  CHECK(n.at({2, 0}) == 11);
  CHECK_FALSE(n.is_contiguous());
  const Tensor r = m.select(0, -1);
  CHECK(r.shape() == Shape{5});
  CHECK(r.at({0}) == 15);
  const Tensor c = m.select(1, 2);
  CHECK(c.stride(0) == 5);
  CHECK(to_vector<double>(c) == std::vector<double>{2, 7, 12, 17});
  CHECK(m.select(0, 1).select(0, 1).dim() == 0);
  CHECK(m.select(0, 1).select(0, 1).item() == 6);
}

TEST_CASE("expand broadcasts with stride 0 and adds leading dims") {
  const Tensor x = iota({3, 1});
  const Tensor e = x.expand({2, 3, 4});
  CHECK(e.strides() == Shape{0, 1, 0});
  CHECK(shares_storage(e, x));
  CHECK_FALSE(e.is_contiguous());
  for_each_index(e.shape(), [&](const Shape& i) { CHECK(e.at(i) == i[1]); });
  const Tensor c = e.contiguous();
  CHECK(c.is_contiguous());
  CHECK_FALSE(shares_storage(c, x));
  CHECK(sum(c).item() == 8 * (0 + 1 + 2));
  CHECK(scalar(3).expand({2, 2}).at({1, 1}) == 3);
}

TEST_CASE("unsqueeze and squeeze") {
  const Tensor x = iota({2, 3});
  CHECK(x.unsqueeze(0).shape() == Shape{1, 2, 3});
  CHECK(x.unsqueeze(-1).shape() == Shape{2, 3, 1});
  CHECK(x.unsqueeze(1).shape() == Shape{2, 1, 3});
  CHECK(x.unsqueeze(1).is_contiguous());
  CHECK(x.t().unsqueeze(1).at({2, 0, 1}) == x.at({1, 2}));
  const Tensor y = iota({1, 3, 1, 2});
  CHECK(y.squeeze().shape() == Shape{3, 2});
  CHECK(y.squeeze(2).shape() == Shape{1, 3, 2});
  CHECK(y.squeeze(-4).shape() == Shape{3, 1, 2});
  CHECK(shares_storage(y.squeeze(), y));
  CHECK(iota({1, 1}).squeeze().dim() == 0);
}

TEST_CASE("is_contiguous and contiguous()") {
  const Tensor x = iota({3, 4});
  CHECK(x.is_contiguous());
  CHECK(x.contiguous().storage() == x.storage());  // no copy when already packed
  CHECK(x.narrow(0, 1, 2).is_contiguous());        // leading-dim narrow keeps rows packed
  CHECK_FALSE(x.narrow(1, 1, 2).is_contiguous());
  CHECK_FALSE(x.slice(0, 0, 3, 2).is_contiguous());
  CHECK(x.select(1, 0).is_contiguous() == false);
  CHECK(x.select(0, 2).is_contiguous());
  CHECK(iota({3, 1}).expand({3, 1}).is_contiguous());
  for (Layout l : kLayouts) {
    INFO(layout_name(l));
    const Tensor v = with_layout(x, l);
    const Tensor c = v.contiguous();
    CHECK(c.is_contiguous());
    CHECK((c.offset() == 0 || l == Layout::contiguous));
    CHECK(to_vector<double>(c) == to_vector<double>(x));
  }
  const Tensor cl = x.clone();
  CHECK_FALSE(shares_storage(cl, x));
  CHECK(to_vector<double>(cl) == to_vector<double>(x));
}

TEST_CASE("copy_ broadcasts and converts dtype, and to() converts") {
  Tensor dst = zeros({2, 3}, DType::f32);
  dst.t().copy_(tensor({1, 2, 3}, {3, 1}, DType::f64));
  CHECK(to_vector<float>(dst) == std::vector<float>{1, 2, 3, 1, 2, 3});
  const Tensor i = tensor({1.7, -2.2}, {2}).to(DType::i64);
  CHECK(to_vector<int64_t>(i) == std::vector<int64_t>{1, -2});
  const Tensor b = tensor({0, 3}, {2}).to(DType::b8);
  CHECK(to_vector<uint8_t>(b) == std::vector<uint8_t>{0, 1});
  const Tensor x = iota({2});
  CHECK(x.to(DType::f64).storage() == x.storage());
}
