// operator<<: values, shape and dtype; long tensors abbreviated with "...".
#include <sstream>

#include "support/tensors.hpp"

using namespace qkv;
using namespace qkv::testing;

namespace {
std::string str(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}
}  // namespace

TEST_CASE("operator<< prints values, shape and dtype") {
  const Tensor x = tensor({1, 2.5, -3, 4}, {2, 2});
  const std::string s = str(x);
  INFO(s);
  CHECK(s.find("shape=(2, 2)") != std::string::npos);
  CHECK(s.find("float32") != std::string::npos);
  CHECK(s.find("[[1, 2.5],\n [-3, 4]]") != std::string::npos);
  CHECK(s.find("...") == std::string::npos);
  // a transposed view prints its logical order
  CHECK(str(x.t()).find("[[1, -3],\n [2.5, 4]]") != std::string::npos);
  CHECK(str(arange(3)) == "tensor([0, 1, 2], shape=(3), dtype=int64)");
  CHECK(str(gt(arange(3), 0.0)) == "tensor([0, 1, 1], shape=(3), dtype=bool)");
  CHECK(str(scalar(0.5, DType::f64)) == "tensor(0.5, shape=(), dtype=float64)");
  CHECK(str(zeros({2, 0})).find("shape=(2, 0)") != std::string::npos);
  CHECK(str(Tensor()) == "tensor(undefined)");
}

TEST_CASE("operator<< abbreviates large tensors and leaves the stream's format alone") {
  const Tensor big = arange(100000, DType::f64).view({100, 1000});
  const std::string s = str(big);
  INFO(s.substr(0, 400));
  CHECK(s.size() < 1000);
  CHECK(s.find("...") != std::string::npos);
  CHECK(s.find("[0, 1, 2, ..., 997, 998, 999]") != std::string::npos);
  CHECK(s.find("[9.9e+04, 9.9e+04, 9.9e+04, ..., 1e+05, 1e+05, 1e+05]") != std::string::npos);
  CHECK(s.find("shape=(100, 1000)") != std::string::npos);
  CHECK(s.find("float64") != std::string::npos);
  // small long rows are printed whole
  const std::string whole = str(arange(20));
  CHECK(whole.find("...") == std::string::npos);
  CHECK(whole.find("19]") != std::string::npos);
  // printing does not change how the caller's stream formats numbers
  std::ostringstream os;
  os << big.select(0, 0).narrow(0, 0, 2);
  os << ' ' << 3.14159265;
  CHECK(os.str().find(" 3.14159") != std::string::npos);
}
