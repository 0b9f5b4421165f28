# qkv: the two commands a newcomer needs are `make demo` and `make test`.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
ifdef CI
  CMAKE_FLAGS += -DQKV_WERROR=ON
endif

.PHONY: install build test test-unit test-asan demo clean

install:
	@bash scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: install $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

# The whole suite: unit, end-to-end and PyTorch reference tests.
test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

# Only the fast unit tests.
test-unit: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) -L unit

test-asan: install
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DQKV_SANITIZE=ON -DQKV_NATIVE=OFF $(CMAKE_FLAGS)
	cmake --build build-asan -j$(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j$(JOBS) -L unit

# Train the default config (copy.toml) into runs/demo, then decode a few new sequences.
demo: build
	rm -rf runs/demo
	$(BUILD)/apps/qkv train configs/copy.toml --run-dir runs/demo
	@echo "--- qkv translate runs/demo: each line should come back unchanged"
	$(BUILD)/apps/qkv translate runs/demo "3 1 4 1 5 9 2 6" "7 7 2" "10 9 8 7 6 5 4 3 2 1" "8"
	$(BUILD)/apps/qkv eval runs/demo --split test

clean:
	rm -rf $(BUILD) build-asan
