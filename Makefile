# The two commands of README.md: `make demo` and `make test`. Each installs
# what it needs (Debian/Ubuntu: apt-get) when it is missing, then drives
# CMake. Everything else is plain CMake/CTest.

BUILD      ?= build
TEST_BUILD ?= build-test
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all build demo test deps clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD) -j $(JOBS)

# Tests run against a sanitizer build (ASan + UBSan) of the daemon, the CLI
# and the test programs.
test: deps
	cmake -S . -B $(TEST_BUILD) -DNVSHARE_SANITIZE=ON
	cmake --build $(TEST_BUILD) -j $(JOBS)
	cd $(TEST_BUILD) && ctest --output-on-failure -j $(JOBS)

demo: build
	scripts/demo.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(TEST_BUILD) .demo
