# iowarden: `make demo` shows the noisy-neighbour scenario live; `make test` runs every test.
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
CARGO ?= cargo
BIN := target/release/iowarden

.PHONY: all deps build test unit-test integration-test lint vmtest demo bench clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	$(CARGO) build --release --locked

lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --release --locked --all-targets -- -D warnings

# Unit tests (pure logic) and integration tests against the real kernel:
# BPF loading, loop devices, cgroups, fio, promtool. Needs root.
test: build lint
	$(CARGO) test --release --locked --workspace -- --test-threads=1

demo: build
	examples/noisy-neighbour/run.sh

bench: build
	bench/run.sh

clean:
	$(CARGO) clean
