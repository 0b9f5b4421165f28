// operator<< for Tensor, in the spirit of PyTorch's repr: values, then shape and dtype.
#include <iomanip>
#include <ostream>

#include "tensor.hpp"

namespace qkv {
namespace {

constexpr int64_t kEdge = 3;  // elements shown at each end of a long dim

void print_value(std::ostream& os, const Tensor& t, const Shape& index) {
  if (t.dtype() == DType::i64) {  // read directly: a double holds only 53 bits
    int64_t off = 0;
    for (int64_t d = 0; d < t.dim(); ++d) off += index[d] * t.stride(d);
    os << t.data<int64_t>()[off];
  } else if (t.dtype() == DType::b8) {
    os << static_cast<int64_t>(t.at(index));
  } else {
    os << std::setprecision(4) << t.at(index);
  }
}

void print_rec(std::ostream& os, const Tensor& t, Shape& index, int64_t d, bool abbreviate) {
  const int64_t n = t.size(d);
  os << '[';
  for (int64_t i = 0; i < n; ++i) {
    if (abbreviate && n > 2 * kEdge && i == kEdge) {
      os << "..., ";
      i = n - kEdge;
    }
    index[d] = i;
    if (d + 1 == t.dim()) {
      print_value(os, t, index);
    } else {
      print_rec(os, t, index, d + 1, abbreviate);
    }
    if (i + 1 < n) os << (d + 1 == t.dim() ? ", " : ",\n ");
  }
  os << ']';
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  // Restore the caller's number format afterwards: printing a tensor must not change it.
  const std::streamsize precision = os.precision();
  os << "tensor(";
  if (t.dim() == 0) {
    print_value(os, t, {});
  } else {
    Shape index(t.dim(), 0);
    print_rec(os, t, index, 0, t.numel() > 1000);
  }
  os << ", shape=" << shape_str(t.shape()) << ", dtype=" << dtype_name(t.dtype()) << ')';
  os.precision(precision);
  return os;
}

}  // namespace qkv
