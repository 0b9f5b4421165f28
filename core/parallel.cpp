#include "parallel.hpp"

#include <cblas.h>
#include <omp.h>

namespace qkv {

void set_num_threads(int n) {
  if (n <= 0) n = omp_get_num_procs();
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int get_num_threads() { return omp_get_max_threads(); }

bool in_parallel_region() { return omp_in_parallel(); }

}  // namespace qkv
