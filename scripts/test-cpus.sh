#!/usr/bin/env bash
# The precision-sensitive part of the suite on each kind of x86-64 CPU this host can stand in
# for (`make test-cpus`, docs/testing.md):
#
#   leg           build                        CPU the code sees      oneDNN cap        OpenBLAS    stands in for
#   avx2          native (-march=native)       this one               AVX2              Haswell     an AVX2 CPU, for the libraries
#   avx512        native                       this one               AVX512_CORE       SkylakeX    an AVX-512 server without bf16
#   avx512-bf16   native                       this one               AVX512_CORE_BF16  Cooperlake  an AVX512-BF16 server (AMD EPYC)
#   amx           native                       this one               AVX512_CORE_AMX   its own     an AMX server (Sapphire Rapids)
#   prescott      native                       this one               AVX2              Prescott    a CPU this OpenBLAS does not know
#   v3            -march=x86-64-v3 (portable)  this one               none              its own     the portable binary, here
#   v2-avx2       -march=x86-64-v2 (portable)  this one               AVX2              Haswell     the default portable binary, AVX2 cap
#   v3-qemu       -march=x86-64-v3 (portable)  qemu-x86_64 -cpu max   none              its own     a real AVX2 CPU (Zen 3 laptop)
#   v2-qemu       -march=x86-64-v2 (portable)  qemu -cpu Nehalem      none              its own     a real SSE4.2 CPU (x86-64-v2)
#
# The first six run ctest on the subset below, then a 100-step training of configs/copy.toml in
# fp32, auto and bf16 (refused with one line where bf16 cannot run; auto says what it chose).
# The qemu legs run the same test binaries whole, and the trainings, under user-mode QEMU,
# whose CPU has no AVX-512 (and, for Nehalem, no AVX): cpuid tells qkv, oneDNN and OpenBLAS
# so, and any instruction beyond it dies with SIGILL. They are slow (emulated): correctness
# only. ONEDNN_MAX_CPU_ISA caps qkv's own AVX512_BF16 kernels too (core/bf16.hpp). A leg runs
# only where the host has its instructions. Debian's OpenBLAS 0.3.21 has no Sapphire Rapids
# kernels, and falls back to its generic Prescott kernels on a CPU it does not know (one newer
# than it, or an emulated one).
#
#   scripts/test-cpus.sh [LEG ...]     (default: every leg the host supports)
#   JOBS=N                             parallel tests (default: nproc)
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
PY=/usr/bin/python3
source scripts/lib/suite-subset.sh
native=${BUILD:-build}  # the -march=native build that `make build` makes

# The test binaries of the subset (qkv_test() names) and the qkv binary for the trainings.
subset=(test_core test_core_views test_core_elementwise test_core_reduce test_core_matmul
  test_core_index test_core_random test_core_errors test_core_threads test_core_print
  test_core_storage test_core_fused test_core_lanes test_core_nan test_core_gemm_stats
  test_core_bf16 test_core_attention_bf16 test_core_attention_onednn test_core_cross_entropy
  test_core_linear_cross_entropy
  test_autograd test_autograd_fused
  test_nn test_nn_variants test_nn_fused test_nn_reference test_nn_positions
  test_nn_positions_reference test_nn_gradcheck_layers test_nn_attention_bf16_reference
  test_nn_bf16 test_nn_block_options_reference test_nn_hooks test_nn_linear_cross_entropy
  test_nn_linear_cross_entropy_reference
  test_run_decode_threads test_run_beam_search test_apps_precision test_optim_reference)

flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { for f in "$@"; do [[ "$flags" == *" $f "* ]] || return 1; done; }

# leg -> "build-dir cap coretype qemu-cpu"; - leaves it to the library (or runs natively).
declare -A legs=(
  [avx2]="$native AVX2 Haswell -"
  [avx512]="$native AVX512_CORE SkylakeX -"
  [avx512-bf16]="$native AVX512_CORE_BF16 Cooperlake -"
  [amx]="$native AVX512_CORE_AMX - -"
  [prescott]="$native AVX2 Prescott -"
  [v3]="build-x86-64-v3 - - -"
  [v2-avx2]="build-x86-64-v2 AVX2 Haswell -"
  [v3-qemu]="build-x86-64-v3 - - max"
  [v2-qemu]="build-x86-64-v2 - - Nehalem"
)
order=(avx2 avx512 avx512-bf16 amx prescott v3 v2-avx2 v3-qemu v2-qemu)
supported() {
  case "$1" in
    avx2 | v3 | v2-avx2 | prescott) has avx2 fma ;;
    avx512) has avx512f avx512bw avx512vl avx512dq ;;
    avx512-bf16) has avx512f avx512bw avx512vl avx512dq avx512_bf16 ;;
    amx) has avx512f avx512bw avx512vl avx512dq avx512_bf16 amx_bf16 amx_tile ;;
    v3-qemu | v2-qemu) command -v qemu-x86_64 >/dev/null ;;
    *) return 1 ;;
  esac
}

wanted=("$@")
if [ ${#wanted[@]} -eq 0 ]; then wanted=("${order[@]}"); fi
for leg in "${wanted[@]}"; do
  [ -n "${legs[$leg]:-}" ] || { echo "test-cpus: unknown leg '$leg' (one of: ${order[*]})" >&2; exit 2; }
done

# A portable build of the subset alone: -march=<arch>, qkv's bf16 kernels chosen at run time.
build_portable() {
  local dir=$1 arch=${1#build-}
  [ -f "$dir/CMakeCache.txt" ] ||
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DQKV_UNITY=ON -DQKV_NATIVE=OFF -DQKV_PYTHON=OFF \
      -DQKV_PORTABLE_ARCH="$arch" ${CMAKE_FLAGS:-} >/dev/null
  cmake --build "$dir" -j"$JOBS" --target qkv "${subset[@]}"
}

# $3 (100) steps of copy.toml in each precision with the qkv command "$1" (a binary, or qemu
# and a binary): the loss falls; bf16 where it cannot run ($2 = no) stops with one line before
# making the run folder, and auto says what it chose.
train_copy() {
  local qkv=$1 bf16_ok=$2 steps=${3:-100} tmp p out status first last want
  tmp=$(mktemp -d)
  for p in fp32 auto bf16; do
    set +e
    out=$($qkv train configs/copy.toml --run-dir "$tmp/$p" --precision $p --threads 2 \
      --train.max_steps "$steps" --optim.warmup 20 --data.train_size 3200 --data.valid_size 100 \
      --data.test_size 100 --quiet 2>&1)
    status=$?
    set -e
    if [ "$p" = bf16 ] && [ "$bf16_ok" = no ]; then
      if ! refused_in_one_line $status "$out" "$tmp/$p"; then
        echo "  FAIL copy bf16: expected one line, exit 1 and no run folder; got exit $status: $out"
        rm -rf "$tmp"
        return 1
      fi
      echo "  copy bf16: refused: $out"
      continue
    fi
    if [ $status -ne 0 ]; then
      echo "  FAIL copy $p (exit $status): $out"
      rm -rf "$tmp"
      return 1
    fi
    read -r first last < <(run_losses "$tmp/$p")
    if ! loss_fell "$first" "$last"; then
      echo "  FAIL copy $p: the loss did not fall ($first -> $last)"
      rm -rf "$tmp"
      return 1
    fi
    if [ "$p" = auto ]; then
      want=fp32
      [ "$bf16_ok" = yes ] && want=bf16
      if [[ "$out" != *"precision = auto: $want"* ]]; then
        echo "  FAIL copy auto: expected 'precision = auto: $want' in: $out"
        rm -rf "$tmp"
        return 1
      fi
      echo "  copy auto: $(printf '%s\n' "$out" | grep -m1 'precision = auto'), loss $first -> $last"
    else
      echo "  copy $p: loss $first -> $last"
    fi
  done
  rm -rf "$tmp"
}

# The subset through ctest in build folder $1, in the environment the caller set.
run_ctest() {
  local dir=$1 log=$2 numbers
  numbers=$(subset_numbers "$dir" "${subset[@]}")
  (cd "$dir" && ctest --output-on-failure -j"$JOBS" -I "0,0,0,$numbers") >"$log" 2>&1
}

# Test cases that cannot hold under user-mode QEMU, by binary: a Catch2 exclusion, and why.
# QEMU runs a thread of its own in the emulated process, which this test counts.
declare -A qemu_excluded=(
  [test_core_threads]="~matmul inside an OpenMP parallel region starts no threads of its own"
)

# The subset's binaries whole (every test case in one process) under qemu-x86_64 -cpu $3.
run_qemu() {
  local dir=$1 log=$2 cpu=$3 t bin rc pass=0 fail=0 skip=0
  : >"$log"
  for t in "${subset[@]}"; do
    bin=$(find "$dir/tests" -name "$t" -type f -executable | head -1)
    rc=0
    qemu-x86_64 -cpu "$cpu" "$bin" ${qemu_excluded[$t]:+"${qemu_excluded[$t]}"} >>"$log" 2>&1 || rc=$?
    case $rc in
      0) pass=$((pass + 1)) ;;
      77) skip=$((skip + 1)) ;;
      *) fail=$((fail + 1)); echo "  FAIL $t under qemu -cpu $cpu (exit $rc)" ;;
    esac
  done
  echo "binaries under qemu: $pass passed, $fail failed, $skip skipped" | tee -a "$log"
  [ $fail -eq 0 ]
}

# The first $1 lines a command prints (stdout and stderr), waiting at most $2 seconds; the
# command is stopped then, or as soon as it printed them.
first_lines() {
  local n=$1 secs=$2 out pid waited=0
  shift 2
  out=$(mktemp)
  "$@" >"$out" 2>&1 &
  pid=$!
  while kill -0 $pid 2>/dev/null && [ "$(wc -l <"$out")" -lt "$n" ] && [ $waited -lt "$secs" ]; do
    sleep 1
    waited=$((waited + 1))
  done
  kill $pid 2>/dev/null || true
  wait $pid 2>/dev/null || true
  head -n "$n" "$out"
  rm -f "$out"
}

summary=()
failed=0
for leg in "${wanted[@]}"; do
  read -r dir cap core qcpu <<<"${legs[$leg]}"
  if ! supported "$leg"; then
    summary+=("$leg: not run (this CPU lacks its instructions, or no qemu-x86_64)")
    continue
  fi
  where="natively"
  [ "$qcpu" != - ] && where="under qemu-x86_64 -cpu $qcpu"
  echo "=== $leg: $dir, ONEDNN_MAX_CPU_ISA=${cap/#-/(unset)}, OPENBLAS_CORETYPE=${core/#-/(unset)}, $where"
  mkdir -p "$dir"
  build_log=$dir/test-cpus-build.log
  if ! { if [ "$dir" = "$native" ]; then
    cmake --build "$dir" -j"$JOBS" --target qkv "${subset[@]}"
  else
    build_portable "$dir"
  fi; } >"$build_log" 2>&1; then
    tail -20 "$build_log"
    summary+=("$leg: the build failed ($build_log)")
    failed=1
    continue
  fi
  # Unset, then the leg's caps: nothing of the caller's shell decides what the leg runs on.
  unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE ONEDNN_MAX_CPU_ISA
  [ "$cap" != - ] && export ONEDNN_MAX_CPU_ISA="$cap"
  [ "$core" != - ] && export OPENBLAS_CORETYPE="$core"
  bf16_ok=no
  if [ "$qcpu" = - ] && [[ "$cap" == - || "$cap" == *BF16* || "$cap" == *AMX* ]] && has avx512_bf16; then
    bf16_ok=yes
  fi
  start=$(date +%s)
  log=$dir/test-cpus-$leg.log
  status=0
  qkv=$dir/apps/qkv
  if [ "$qcpu" = - ]; then
    run_ctest "$dir" "$log" || status=$?
    grep -E "tests passed|Total Test time" "$log" | sed 's/^/  /'
    [ $status -eq 0 ] || grep -E "\*\*\*Failed|SEGFAULT|ILLEGAL|Subprocess aborted|\*\*\*Timeout|Exception" "$log" | sed 's/^/  /' || true
    result=$(grep -oE "[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+" "$log" || echo "no ctest summary")
    result="$result, $(grep -c '\*\*\*Skipped' "$log" || true) skipped"
  else
    run_qemu "$dir" "$log" "$qcpu" || status=1
    result=$(tail -1 "$log")
    qkv="qemu-x86_64 -cpu $qcpu $qkv"
    # What a user of this CPU sees first when training the shipped translator: its first
    # lines, up to the first step's (then it is stopped: an emulated step is slow).
    if [ -d configs/data/multi30k ]; then
      echo "  qkv train configs/multi30k.toml, first lines on this CPU:"
      tmp=$(mktemp -d)
      first_lines 3 900 $qkv train configs/multi30k.toml --run-dir "$tmp/m" --train.log_every 1 |
        sed 's/^/    /'
      rm -rf "$tmp"
    fi
  fi
  steps=100
  [ "$qcpu" = - ] || steps=40  # emulated: slower, and 40 steps show the loss falling
  copy=ok
  train_copy "$qkv" $bf16_ok $steps || copy=FAILED
  secs=$(($(date +%s) - start))
  summary+=("$leg: $result, copy trainings $copy, ${secs} s")
  [ $status -eq 0 ] && [ $copy = ok ] || failed=1
done
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE ONEDNN_MAX_CPU_ISA

echo "=== test-cpus on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "flags: $(grep -oE 'avx2|avx512f|avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | xargs)"
printf '  %s\n' "${summary[@]}"
exit $failed
