#include "core/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.hpp"

namespace qkv {

namespace {

const char* kind_of(mode_t m) {
  return S_ISDIR(m)                 ? "a directory"
         : S_ISFIFO(m)              ? "a FIFO"
         : S_ISCHR(m) || S_ISBLK(m) ? "a device"
         : S_ISSOCK(m)              ? "a socket"
                                    : "not a regular file";
}

}  // namespace

std::string bytes_text(uint64_t b) {
  const char* unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[48];
  std::snprintf(buf, sizeof buf,
                u == 0 || v == static_cast<double>(static_cast<int64_t>(v)) ? "%.0f %s" : "%.1f %s",
                v, unit[u]);
  return buf;
}

int open_input(const std::string& path, const InputRules& rules) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever. The kind
  // is checked on the descriptor itself, so the file cannot be swapped between check and open.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    throw Error(path + ": cannot read the " + rules.what + " (" + std::strerror(errno) + ")");
  struct stat sb {};
  if (::fstat(fd, &sb) != 0) {
    const int err = errno;
    ::close(fd);
    throw Error(path + ": cannot read the " + rules.what + " (" + std::strerror(err) + ")");
  }
  const bool ok = S_ISREG(sb.st_mode) || (rules.allow_pipes && S_ISFIFO(sb.st_mode));
  if (!ok) {
    ::close(fd);
    throw Error(path + ": not a " + rules.what + " (it is " + kind_of(sb.st_mode) + ")");
  }
  // Reads block again: a pipe whose writer is still producing is waited for; one nobody holds
  // open reads as empty.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

void InputBounds::add(const char* data, size_t n) {
  bytes_ += n;
  if (bytes_ > rules_.max_bytes)
    throw Error(path_ + ": more than " + bytes_text(rules_.max_bytes) + ", too large for a " +
                rules_.what + " (is it the file you meant?)");
  if (rules_.max_line == 0) return;
  for (size_t i = 0; i < n; ++i) {
    if (data[i] == '\n') {
      line_ = 0;
      ++lines_;
    } else if (++line_ > rules_.max_line) {
      throw Error(path_ + ":" + std::to_string(lines_) + ": a line longer than " +
                  bytes_text(rules_.max_line) + " (is it the " + rules_.what + " you meant?)");
    }
  }
}

std::string read_input(const std::string& path, const InputRules& rules) {
  const int fd = open_input(path, rules);
  InputBounds bounds(path, rules);
  std::string out;
  char buf[1 << 16];
  try {
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        throw Error(path + ": cannot read the " + rules.what + " (" + std::strerror(errno) + ")");
      if (n == 0) break;
      bounds.add(buf, static_cast<size_t>(n));
      out.append(buf, static_cast<size_t>(n));
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return out;
}

}  // namespace qkv
