// qkv::Error: what every misuse of the library throws. The message names the op and the shapes.
#pragma once
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace qkv {

using Shape = std::vector<int64_t>;

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "(2, 3, 4)"; a scalar is "()".
std::string shape_str(const Shape& s);

namespace detail {
inline void append(std::ostringstream&) {}
template <class A, class... R>
void append(std::ostringstream& os, const A& a, const R&... r) {
  if constexpr (std::is_same_v<A, Shape>)
    os << shape_str(a);
  else
    os << a;
  append(os, r...);
}
}  // namespace detail

// Concatenates its arguments (Shapes print as "(2, 3)") into one message.
template <class... A>
std::string cat(const A&... a) {
  std::ostringstream os;
  detail::append(os, a...);
  return os.str();
}

// QKV_CHECK(cond, "op", "what", shape, ...): throws qkv::Error("op: what (2, 3) ...") when !cond.
#define QKV_CHECK(cond, op, ...)                                        \
  do {                                                                  \
    if (!(cond)) throw ::qkv::Error(::qkv::cat(op, ": ", __VA_ARGS__)); \
  } while (0)

}  // namespace qkv
