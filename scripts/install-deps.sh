#!/usr/bin/env bash
# Installs qkv's dependencies from Debian 12 packages, only those missing. Idempotent: a second
# run installs nothing and prints one line.
#
#   install-deps.sh          everything: building qkv, its test suite, fuzzing and profiling
#   install-deps.sh --build  only what building and running the qkv binary needs (`make demo`):
#                            the test-only packages (PyTorch, Chromium, clang, ...) are most of
#                            the download, and a first run does not need them
#   install-deps.sh --python the binary's packages and the Python module's (`make python`)
set -euo pipefail

build_packages=(
  build-essential cmake pkg-config   # toolchain
  libopenblas-openmp-dev             # BLAS kernels, OpenMP build: no second thread pool (see README)
  catch2                             # Catch2 v2 unit tests (CMake looks for it at configure time)
  libcli11-dev                       # the qkv command line
  libspdlog-dev                      # log lines
  nlohmann-json3-dev                 # safetensors headers, metrics.jsonl
  libstb-dev                         # PNG figures
  libxxhash-dev                      # checkpoint checksums (XXH3)
  libopenmpi-dev openmpi-bin         # data-parallel training: `mpirun -np N qkv train` (QKV_MPI)
  zlib1g-dev                         # gzip-compressed corpora (data/text_file.hpp)
  libsentencepiece-dev               # subword tokenization: data.tokenizer = "sentencepiece"
  libdnnl-dev                        # oneDNN: bf16 and fp32 GEMMs (the library PyTorch itself uses)
  libtomlplusplus-dev                # toml++: configs are read as full TOML 1.0
  libcpp-httplib-dev                 # cpp-httplib: the HTTP server behind `qkv serve`
)
python_packages=(
  pybind11-dev python3-dev           # the Python module qkv (python/): pybind11 against Debian's Python
  python3-numpy                      # its arrays: weights, activations and ids as numpy arrays
)
test_packages=(
  libomp-dev                         # OpenMP runtime headers for clang builds (g++ ships libgomp)
  clang libclang-rt-14-dev           # `make fuzz`: clang++ -fsanitize=fuzzer (libFuzzer runtime)
  python3-torch python3-numpy        # test-only: the PyTorch reference oracle (/usr/bin/python3)
  libblas3                           # test-only: the reference BLAS `qkv bench --compare` refuses
  linux-perf                         # scripts/profile-bench.sh: where a bench step's time goes
  chromium                           # test-only: `qkv report` pages loaded in headless Chromium
  python3-nltk                       # test-only: cross-checks qkv's BLEU against NLTK's corpus_bleu
  python3-websocket                  # test-only: drives headless Chromium over its DevTools protocol
  python3-pytest                     # test-only: the Python module's tests (tests/python)
  python3-nbclient python3-ipykernel # test-only: runs examples/notebooks/look-inside.ipynb headless
  python3-matplotlib                 # the notebook's figures
)

case "${1:-}" in
  "") packages=("${build_packages[@]}" "${python_packages[@]}" "${test_packages[@]}") ;;
  --build) packages=("${build_packages[@]}") ;;
  --python) packages=("${build_packages[@]}" "${python_packages[@]}") ;;
  *) echo "install-deps: unknown option '$1' (use --build, --python, or nothing for everything)" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

source "$(dirname "${BASH_SOURCE[0]}")/lib/as-root.sh" install-deps "${missing[*]}"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
