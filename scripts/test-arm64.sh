#!/usr/bin/env bash
# qkv cross-built for arm64 and its portable subset run under qemu-aarch64 (`make test-arm64`,
# docs/building.md). Correctness only: an emulated CPU says nothing about speed.
#
# Subset: every test of core and autograd, and nn's tests without the PyTorch reference ones
# (those run /usr/bin/python3 with torch): the layers' gradchecks, the attention variants
# against their dense forms, the fused paths, positions, hooks, the fused output layer; then
# 100 steps of configs/copy.toml whose loss must fall, `auto` precision choosing fp32, and
# bf16 refused with one line (qkv's bf16 kernels are x86's AVX512_BF16).
#
#   scripts/test-arm64.sh          (after scripts/install-arm64-deps.sh)
#   JOBS=N                         parallel builds and tests (default: nproc)
#   BUILD_ARM64=DIR                the build folder (default: build-arm64)
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
dir=${BUILD_ARM64:-build-arm64}
PY=/usr/bin/python3
source scripts/lib/suite-subset.sh
# How the test binaries run here; cmake/toolchain-aarch64.cmake gives ctest the same.
emu=(qemu-aarch64 -L /)

subset=(test_core test_core_views test_core_elementwise test_core_reduce test_core_matmul
  test_core_index test_core_random test_core_errors test_core_threads test_core_print
  test_core_storage test_core_fused test_core_lanes test_core_nan test_core_atomic_file
  test_core_gemm_stats test_core_bf16 test_core_attention_bf16 test_core_cross_entropy
  test_core_linear_cross_entropy
  test_autograd test_autograd_fused
  test_nn test_nn_variants test_nn_fused test_nn_positions test_nn_gradcheck_layers test_nn_bf16
  test_nn_hooks test_nn_linear_cross_entropy)

start=$(date +%s)
# No -march: QKV_NATIVE=OFF adds no instruction-set flag on aarch64 (CMakeLists.txt).
[ -f "$dir/CMakeCache.txt" ] ||
  cmake -S . -B "$dir" --toolchain cmake/toolchain-aarch64.cmake -DCMAKE_BUILD_TYPE=Release \
    -DQKV_UNITY=ON -DQKV_MPI=OFF -DQKV_NATIVE=OFF -DQKV_PYTHON=OFF ${CMAKE_FLAGS:-}
# Building a test binary also lists its test cases under qemu (catch_discover_tests).
cmake --build "$dir" -j"$JOBS" --target qkv "${subset[@]}"
built=$(date +%s)

# Not under user-mode QEMU: it counts the process's threads, and QEMU runs one of its own.
EXCLUDED="matmul inside an OpenMP parallel region starts no threads of its own"
# Only the subset's binaries are built: ctest would count each other test as failed.
numbers=$(subset_numbers "$dir" "${subset[@]}")
[ -n "$numbers" ] || { echo "test-arm64: no test of the subset registered in $dir" >&2; exit 1; }

log=$dir/test-arm64.log
status=0
(cd "$dir" && ctest --output-on-failure -j"$JOBS" -I "0,0,0,$numbers") >"$log" 2>&1 || status=$?
grep -E "tests passed|Total Test time" "$log" || true
if [ $status -ne 0 ]; then
  grep -E "\(Failed\)|\(SEGFAULT\)|\(ILLEGAL\)|\(Subprocess aborted\)|\(Timeout\)|Not Run" "$log" || true
  echo "test-arm64: the whole ctest output is in $log"
fi
tested=$(date +%s)

# 100 steps of the default config: the loss falls (first and last logged training loss).
# Batches of 16 and small evaluation splits: emulated floating point is some 200 times slower
# than this host's own, and 100 steps of 64 would take minutes.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
qkv=("${emu[@]}" "$dir/apps/qkv")
train() {
  "${qkv[@]}" train configs/copy.toml --run-dir "$tmp/$1" --precision "$1" --threads 2 \
    --train.max_steps 100 --optim.warmup 20 --data.batch_size 16 --data.train_size 3200 \
    --data.valid_size 100 --data.test_size 100 --train.eval_examples 50 --quiet 2>&1
}
if out=$(train auto); then
  read -r first last < <(run_losses "$tmp/auto")
  if ! loss_fell "$first" "$last"; then
    echo "FAIL copy: the loss did not fall ($first -> $last)"
    status=1
  elif [[ "$out" != *"precision = auto: fp32"* ]]; then
    echo "FAIL copy: expected 'precision = auto: fp32' in: $out"
    status=1
  else
    echo "copy, 100 steps, precision auto (fp32 here): loss $first -> $last"
  fi
else
  echo "FAIL copy (exit $?): $out"
  status=1
fi
# bf16: one line and exit 1, before any run folder is made.
bf16_status=0
out=$(train bf16) || bf16_status=$?
if refused_in_one_line $bf16_status "$out" "$tmp/bf16"; then
  echo "copy, bf16: refused: $out"
else
  echo "FAIL copy bf16: expected one line and exit 1 without a run folder, got $bf16_status: $out"
  status=1
fi
done_at=$(date +%s)

echo "test-arm64: build $((built - start)) s, ctest $((tested - built)) s," \
  "copy trainings $((done_at - tested)) s, total $((done_at - start)) s"
exit $status
