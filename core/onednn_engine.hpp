// The one oneDNN CPU engine of the process and each thread's stream on it, shared by the GEMM
// backend (onednn.cpp) and attention's matmul primitives (onednn_matmul.cpp). Internal to core/.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

namespace qkv::kernel {

dnnl::engine& onednn_engine();         // created on first use
dnnl::stream& onednn_thread_stream();  // the calling thread's, created on its first use

}  // namespace qkv::kernel
