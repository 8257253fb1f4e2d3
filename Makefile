# Tessera's two commands: `make demo` and `make test`. Everything installs what it needs first.
#   make demo    installs what the `tessera` command and the demo need, builds that command only,
#                and runs the main job: Fashion-MNIST on a local cluster, with the result
#   make test    deps + build + every test (unit and integration, real etcd, real processes)
#   make deps    install every Debian package the build, tests and benchmarks need (as root)
#   make build   configure (CMake + Ninja, ccache when present) and build everything
#   make install build, then install into PREFIX (default /usr/local; DESTDIR works too)
#   make package build, then build/tessera_<version>_<arch>.deb (apt install ./build/tessera_*.deb)
#   make bench   benchmarks (not part of `make test`)
#   make chaos   long fault-injection runs (not part of `make test`)
#   make image   the container image (deploy/Dockerfile), where an engine and debian:12 are at hand
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= 2

PREFIX ?= /usr/local

.PHONY: deps configure build test demo install package bench chaos image clean format

deps:
	scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DTESSERA_TESTS=ON -DTESSERA_PYTHON=ON -DTESSERA_WEB=ON

build: configure
	ninja -C $(BUILD_DIR) -j$(JOBS)

test: build
	cd $(BUILD_DIR) && ctest -j$(JOBS) --output-on-failure --timeout 600

# The demo needs neither the tests nor the Python module nor the web console: a build directory
# made here is configured without them (`make test` turns them on later, in the same directory).
demo:
	scripts/install-deps.sh demo
	[ -f $(BUILD_DIR)/CMakeCache.txt ] || cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DTESSERA_TESTS=OFF -DTESSERA_PYTHON=OFF -DTESSERA_WEB=OFF
	ninja -C $(BUILD_DIR) -j$(JOBS) tessera
	scripts/demo.sh

install: build
	cmake --install $(BUILD_DIR) --prefix $(PREFIX)

package: build
	cd $(BUILD_DIR) && cpack -G DEB

bench: build
	TESSERA_BUILD_DIR=$(abspath $(BUILD_DIR)) $(BUILD_DIR)/bench/ps_bench
	$(BUILD_DIR)/bench/apply_bench
	$(BUILD_DIR)/bench/pull_bench
	$(BUILD_DIR)/bench/sparse_store_bench
	$(BUILD_DIR)/bench/checkpoint_bench
	bench/ctr_quality.sh $(BUILD_DIR)
	$(BUILD_DIR)/bench/auth_bench
	$(BUILD_DIR)/bench/codec_bench
	TESSERA_BUILD_DIR=$(abspath $(BUILD_DIR)) $(BUILD_DIR)/bench/master_bench
	TESSERA_BUILD_DIR=$(abspath $(BUILD_DIR)) $(BUILD_DIR)/bench/mlp_bench
	TESSERA_BUILD_DIR=$(abspath $(BUILD_DIR)) $(BUILD_DIR)/bench/step_timeline
	TESSERA_BUILD_DIR=$(abspath $(BUILD_DIR)) $(BUILD_DIR)/bench/api_bench
	TESSERA_BUILD_DIR=$(abspath $(BUILD_DIR)) $(BUILD_DIR)/bench/replica_bench
	TESSERA_BUILD_DIR=$(abspath $(BUILD_DIR)) $(BUILD_DIR)/bench/sandbox_bench
	TESSERA_BUILD_DIR=$(abspath $(BUILD_DIR)) $(BUILD_DIR)/bench/link_bench

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
