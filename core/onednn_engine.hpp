// The one oneDNN CPU engine of the process, each thread's stream on it, and a planned matmul
// with its memories: shared by the GEMM backend (onednn.cpp) and attention's matmul primitives
// (onednn_matmul.cpp). Internal to core/.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace qkv::kernel {

dnnl::engine& onednn_engine();         // created on first use
dnnl::stream& onednn_thread_stream();  // the calling thread's, created on its first use

// One planned matmul primitive: its memories bound to no data (the caller sets src, wei, dst and
// bias's handles before each run) and a scratchpad of its own (pd made with
// scratchpad_mode::user), so a steady run allocates nothing.
struct MatmulProduct {
  dnnl::matmul prim;
  dnnl::memory src, wei, bias, dst, scratch;
  std::vector<uint8_t> scratch_buf;
  std::unordered_map<int, dnnl::memory> args;

  // with_bias: pd has a bias, bound to `bias`.
  static std::unique_ptr<MatmulProduct> make(const dnnl::matmul::primitive_desc& pd,
                                             bool with_bias);
  void run();  // on the calling thread's stream, waited for
};

}  // namespace qkv::kernel
