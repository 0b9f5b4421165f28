// operator<< for Tensor, in the spirit of PyTorch's repr: values, then shape and dtype.
#include <iomanip>
#include <ostream>

#include "tensor.hpp"

namespace qkv {
namespace {

constexpr int64_t kEdge = 3;  // elements shown at each end of a long dim

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
      const double v = t.at(index);
      if (t.dtype() == DType::i64 || t.dtype() == DType::b8)
        os << static_cast<int64_t>(v);
      else
        os << std::setprecision(4) << v;
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
  os << "tensor(";
  if (t.dim() == 0) {
    os << t.item();
  } else {
    Shape index(t.dim(), 0);
    print_rec(os, t, index, 0, t.numel() > 1000);
  }
  return os << ", shape=" << shape_str(t.shape()) << ", dtype=" << dtype_name(t.dtype()) << ')';
}

}  // namespace qkv
