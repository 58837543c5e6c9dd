# The two commands of README.md: `make demo` and `make test`. Each installs
# what it needs (Debian/Ubuntu: apt-get) when it is missing, then drives
# CMake. Everything else is plain CMake/CTest.

BUILD      ?= build
TEST_BUILD ?= build-test
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)

# Quiet builds: no make directory lines, no per-file progress, CMake's
# status lines only where a component is left out. Errors and warnings go to
# stderr and stay visible; pipefail keeps a failing step failing.
SHELL       := /bin/bash
.SHELLFLAGS := -o pipefail -c
MAKEFLAGS   += --no-print-directory
CONFIGURE_FILTER := | { grep -E '^-- .* not |^[^-]' || true; }
BUILD_FILTER     := | { grep -v 'Built target' || true; }

.PHONY: all build demo test install clean

all: build

build:
	@scripts/install-deps.sh build
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_RULE_MESSAGES=OFF $(CONFIGURE_FILTER)
	@echo "building into $(BUILD)/ (about a minute the first time)"
	@cmake --build $(BUILD) -j $(JOBS) $(BUILD_FILTER)

# Tests run against a sanitizer build (ASan + UBSan) of the daemon, the CLI
# and the test programs. CI adds TEST_CMAKE_FLAGS=-DNVSHARE_REQUIRE_ALL_TESTS=ON
# so that a missing cmocka fails instead of skipping the unit tests. ctest
# runs under tests/no_leftovers.sh, which fails if a test left a process.
test:
	@scripts/install-deps.sh test
	@cmake -S . -B $(TEST_BUILD) -DNVSHARE_SANITIZE=ON -DCMAKE_RULE_MESSAGES=OFF $(TEST_CMAKE_FLAGS) $(CONFIGURE_FILTER)
	@echo "building the sanitizer build into $(TEST_BUILD)/ (a few minutes the first time)"
	@cmake --build $(TEST_BUILD) -j $(JOBS) $(BUILD_FILTER)
	cd $(TEST_BUILD) && $(CURDIR)/tests/no_leftovers.sh ctest --output-on-failure -j $(JOBS)

# PREFIX=/usr for another prefix, DESTDIR=... to stage (docs/operations.md).
PREFIX ?= /usr/local
install: build
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

demo: build
	scripts/demo.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(TEST_BUILD) .demo
