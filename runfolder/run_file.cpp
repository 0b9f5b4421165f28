// The run folder's reader (see run_file.hpp), on core/input_file's non-blocking open.
#include "runfolder/run_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "core/input_file.hpp"

namespace qkv::run {

RunFile::RunFile(const std::string& path, const std::string& what) : path_(path), what_(what) {
  InputRules rules;
  rules.what = what;  // regular files only: no FIFO, device, socket or directory
  fd_ = open_input(path, rules);
  struct stat sb {};
  if (::fstat(fd_, &sb) != 0) {
    const int err = errno;
    ::close(fd_);
    throw Error(path + ": cannot read the " + what + " (" + std::strerror(err) + ")");
  }
  size_ = static_cast<uint64_t>(sb.st_size);
}

RunFile::~RunFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::string RunFile::read(uint64_t offset, uint64_t max_bytes) const {
  if (offset >= size_) return "";
  std::string out(static_cast<size_t>(std::min(size_ - offset, max_bytes)), '\0');
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n =
        ::pread(fd_, out.data() + got, out.size() - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      throw Error(path_ + ": cannot read the " + what_ + " (" + std::strerror(errno) + ")");
    if (n == 0) break;  // the file got shorter since it was opened
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

std::string RunFile::read_all(uint64_t max_bytes) const {
  if (size_ > max_bytes)
    throw Error(path_ + ": " + bytes_text(size_) + ", more than the " + bytes_text(max_bytes) +
                " a " + what_ + " may hold (is it the file qkv wrote?)");
  return read(0, size_);
}

std::string read_run_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  return RunFile(path, what).read_all(max_bytes);
}

}  // namespace qkv::run
