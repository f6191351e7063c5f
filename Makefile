# iowarden: `make demo` shows the noisy-neighbour scenario live; `make test` runs every test.
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
CARGO ?= cargo
BIN := target/release/iowarden

.PHONY: all deps build test lint vmtest demo bench clean dashboards

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
	$(MAKE) vmtest

# Guest kernel under QEMU (emulated multi-queue NVMe, pure cgroup v2): the
# tests that this host's cgroup v1 / no-NVMe setup cannot run.
# KERNEL=/path/to/bzImage to test your own kernel.
vmtest: build
	IOWARDEN_BIN=$(CURDIR)/$(BIN) KERNEL=$(KERNEL) tests/vmtest/run.sh

demo: build
	examples/noisy-neighbour/run.sh

bench: build
	bench/run.sh

# Regenerate dashboards/*.json from dashboards/generate.py (make test checks they match).
dashboards:
	python3 dashboards/generate.py

clean:
	$(CARGO) clean
