// Opening a file a user named (a config, a corpus, a reference text) so that no path can hang
// or exhaust memory: a FIFO is opened without blocking (nobody writing it is an empty input, not
// a wait), devices, directories and sockets are refused up front, and what is read is bounded
// by counting the bytes read, never by trusting the size stat reports (/proc files say 0, a
// gzip stream inflates to any size, a pipe has none).
#pragma once
#include <cstdint>
#include <string>

namespace qkv {

struct InputRules {
  std::string what = "file";               // in errors: "PATH: not a config file (it is a FIFO)"
  bool allow_pipes = false;                // FIFOs and pipes (`qkv score <(zcat ref.gz) hyp.txt`)
  uint64_t max_bytes = uint64_t{1} << 31;  // at most this many bytes are read
  uint64_t max_line = 0;                   // > 0: no line may be longer (bytes, newline excluded)
};

// A descriptor for reading path (blocking reads, O_CLOEXEC); throws qkv::Error naming the path
// when it is missing, unreadable or of a kind the rules refuse. The caller closes it.
int open_input(const std::string& path, const InputRules& rules);

// Counts bytes and line lengths as chunks of path arrive; throws qkv::Error past a bound.
class InputBounds {
 public:
  InputBounds(std::string path, const InputRules& rules) : path_(std::move(path)), rules_(rules) {}
  void add(const char* data, size_t n);

 private:
  std::string path_;
  InputRules rules_;
  uint64_t bytes_ = 0, line_ = 0, lines_ = 1;
};

// The whole of path (no decompression), within rules.
std::string read_input(const std::string& path, const InputRules& rules);

// "16 MiB", "1.5 GiB": a bound in an error message.
std::string bytes_text(uint64_t bytes);

}  // namespace qkv
