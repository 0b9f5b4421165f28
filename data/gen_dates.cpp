// qkv_gen_dates OUT.tsv [LINES] [SEED]: writes the dates corpus (date_corpus) as TSV.
// Without LINES and SEED it writes exactly the shipped configs/data/dates.tsv.
#include <cstdio>
#include <exception>
#include <string>

#include "data/corpus.hpp"
#include "data/dates.hpp"

int main(int argc, char** argv) {
  using namespace qkv::data;
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: %s OUT.tsv [LINES=%lld] [SEED=%llu]\n", argv[0],
                 static_cast<long long>(kShippedDateLines),
                 static_cast<unsigned long long>(kShippedDateSeed));
    return 2;
  }
  try {
    const int64_t lines = argc > 2 ? std::stoll(argv[2]) : kShippedDateLines;
    const uint64_t seed = argc > 3 ? std::stoull(argv[3]) : kShippedDateSeed;
    write_tsv(argv[1], date_corpus(lines, seed));
    std::printf("wrote %lld pairs to %s\n", static_cast<long long>(lines), argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qkv_gen_dates: %s\n", e.what());
    return 1;
  }
  return 0;
}
