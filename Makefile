# Tessera's two commands: `make demo` and `make test`. Everything installs what it needs first.
#   make deps    install the Debian packages the build, tests and demo need (apt-get, as root)
#   make build   configure (CMake + Ninja, ccache when present) and build everything
#   make test    deps + build + every test (unit and integration, real etcd, real processes)
#   make demo    deps + build + the main job: Fashion-MNIST on a local cluster, with the result
#   make bench   benchmarks (not part of `make test`)
#   make chaos   long fault-injection runs (not part of `make test`)
#   make image   the container image (deploy/Dockerfile), where an engine and debian:12 are at hand
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= 2
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps configure build test demo bench chaos image clean format

deps:
	$(SUDO) scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

build: configure
	ninja -C $(BUILD_DIR) -j$(JOBS)

test: build
	cd $(BUILD_DIR) && ctest -j$(JOBS) --output-on-failure --timeout 600

demo: build
	scripts/demo.sh

bench: build
	TESSERA_BUILD_DIR=$(abspath $(BUILD_DIR)) $(BUILD_DIR)/bench/ps_bench
	$(BUILD_DIR)/bench/apply_bench
	$(BUILD_DIR)/bench/pull_bench
	$(BUILD_DIR)/bench/sparse_store_bench
	$(BUILD_DIR)/bench/checkpoint_bench
	bench/ctr_quality.sh $(BUILD_DIR)
	$(BUILD_DIR)/bench/auth_bench
	TESSERA_BUILD_DIR=$(abspath $(BUILD_DIR)) $(BUILD_DIR)/bench/master_bench
	TESSERA_BUILD_DIR=$(abspath $(BUILD_DIR)) $(BUILD_DIR)/bench/mlp_bench
	TESSERA_BUILD_DIR=$(abspath $(BUILD_DIR)) $(BUILD_DIR)/bench/step_timeline
	TESSERA_BUILD_DIR=$(abspath $(BUILD_DIR)) $(BUILD_DIR)/bench/api_bench
	TESSERA_BUILD_DIR=$(abspath $(BUILD_DIR)) $(BUILD_DIR)/bench/replica_bench
	TESSERA_BUILD_DIR=$(abspath $(BUILD_DIR)) $(BUILD_DIR)/bench/sandbox_bench

chaos: build
	TESSERA_BUILD_DIR=$(abspath $(BUILD_DIR)) $(BUILD_DIR)/bench/chaos
	TESSERA_BUILD_DIR=$(abspath $(BUILD_DIR)) $(BUILD_DIR)/bench/chaos --checkpoint-steps 100
	TESSERA_BUILD_DIR=$(abspath $(BUILD_DIR)) $(BUILD_DIR)/bench/chaos --checkpoint-steps 100 --replicas 2

image:
	scripts/build-image.sh

clean:
	rm -rf $(BUILD_DIR)

format:
	git ls-files '*.cc' '*.h' | xargs clang-format -i
