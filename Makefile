# qkv: the two commands a newcomer needs are `make demo` and `make test`.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
ifdef CI
  CMAKE_FLAGS += -DQKV_WERROR=ON
endif

.PHONY: install install-build install-python build binary python test test-unit test-asan test-arm64 test-cpus fuzz demo clean

install:
	@bash scripts/install-deps.sh

# Only the packages that building and running the binary needs (no PyTorch, Chromium, clang).
install-build:
	@bash scripts/install-deps.sh --build

# The binary's packages and the Python module's (pybind11, Python's headers, numpy).
install-python:
	@bash scripts/install-deps.sh --python

# A unity build: a fresh clone's first build is the one a newcomer waits for.
$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DQKV_UNITY=ON $(CMAKE_FLAGS)

# Everything: the qkv binary, the tests, the benchmarks and the examples' libraries.
build: install $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

# Only the qkv binary and the libraries it links: what `make demo` runs.
binary: install-build $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS) --target qkv

# The Python module `qkv` (docs/python.md): build/python/qkv, used with
# PYTHONPATH=build/python /usr/bin/python3; `cmake --install` puts it in the prefix's site-packages.
python: install-python $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS) --target qkv_python qkv

# The whole suite: unit, end-to-end and PyTorch reference tests.
test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

# Only the fast unit tests.
test-unit: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) -L unit

# The suite under AddressSanitizer + UndefinedBehaviorSanitizer (ASAN_LABELS=unit: the fast part).
# -O1 keeps asserts and stack traces but runs the e2e trainings several times faster than -O0.
ASAN_LABELS ?=
test-asan: install
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" -DQKV_UNITY=ON \
	  -DQKV_SANITIZE=ON -DQKV_NATIVE=OFF $(CMAKE_FLAGS)
	cmake --build build-asan -j$(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j$(JOBS) $(if $(ASAN_LABELS),-L $(ASAN_LABELS))

# Cross-built for arm64 into build-arm64/, the portable subset run under qemu-aarch64
# (correctness, not speed): scripts/test-arm64.sh, docs/building.md.
test-arm64:
	@bash scripts/install-arm64-deps.sh
	JOBS=$(JOBS) CMAKE_FLAGS="$(CMAKE_FLAGS)" bash scripts/test-arm64.sh

# libFuzzer (clang): each target runs FUZZ_SECONDS from the committed seeds in tests/fuzz/corpus;
# new inputs go to build-fuzz/corpus, crashes to build-fuzz/artifacts (then: a regression test).
FUZZ_SECONDS ?= 600
FUZZ_TARGETS ?= config overrides tsv vocab safetensors
fuzz: install
	CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Release -DQKV_FUZZ=ON \
	  -DQKV_NATIVE=OFF -DBUILD_TESTING=OFF
	cmake --build build-fuzz -j$(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))
	mkdir -p build-fuzz/artifacts
	set -e; for t in $(FUZZ_TARGETS); do \
	  mkdir -p build-fuzz/corpus/$$t; \
	  echo "--- fuzz_$$t for $(FUZZ_SECONDS) s"; \
	  build-fuzz/tests/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    -artifact_prefix=build-fuzz/artifacts/$$t- build-fuzz/corpus/$$t tests/fuzz/corpus/$$t; \
	done

# The precision-sensitive part of the suite under each instruction set the host can stand in for
# (oneDNN and OpenBLAS capped, and portable x86-64-v3 / x86-64-v2 builds of qkv's own code):
# scripts/test-cpus.sh, docs/testing.md. TEST_CPUS_LEGS=avx2 v2 ... runs only those.
TEST_CPUS_LEGS ?=
test-cpus: build
	JOBS=$(JOBS) bash scripts/test-cpus.sh $(TEST_CPUS_LEGS)

# Train the default config (copy.toml) into runs/demo, then decode a few new sequences. Builds
# the binary alone (the suite is `make test`'s).
demo: binary
	rm -rf runs/demo
	$(BUILD)/apps/qkv train configs/copy.toml --run-dir runs/demo
	@echo "--- qkv translate runs/demo: each line should come back unchanged"
	$(BUILD)/apps/qkv translate runs/demo "3 1 4 1 5 9 2 6" "7 7 2" "10 9 8 7 6 5 4 3 2 1" "8"
	$(BUILD)/apps/qkv eval runs/demo --split test

clean:
	rm -rf $(BUILD) build-asan build-fuzz build-x86-64-v3 build-x86-64-v2 build-arm64
