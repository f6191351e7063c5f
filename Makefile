# iowarden: `make demo` shows the noisy-neighbour scenario live; `make test` runs every test.
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
CARGO ?= cargo
BIN := target/release/iowarden

.PHONY: all deps test-deps bench-deps build test lint vmtest vmtest-iolatency vmtest-model demo bench bench-nvme clean dashboards docs deb image fuzz-build fuzz fuzz-check

all: build

# What building and the demo need; test-deps and bench-deps add the rest.
deps:
	@scripts/install-deps.sh

test-deps:
	@scripts/install-deps.sh --test

bench-deps:
	@scripts/install-deps.sh --bench

build: deps
	$(CARGO) build --release --locked

lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --release --locked --all-targets -- -D warnings

# Unit tests (pure logic) and integration tests against the real kernel:
# BPF loading, loop devices, cgroups, fio, promtool; then the guest kernels.
# Needs root. Ends with the time each stage took.
test:
	@scripts/stages.sh 'deps=$(MAKE) -s test-deps' 'build=$(MAKE) build' 'lint=$(MAKE) lint' \
	  'fuzz=$(MAKE) fuzz-check' 'host tests=CARGO=$(CARGO) scripts/host-tests.sh' \
	  'guest tests=$(MAKE) vmtest'

# Guest kernels under QEMU (emulated multi-queue NVMe, pure cgroup v2): the
# tests that this host's cgroup v1 / no-NVMe setup cannot run, on Debian's
# 5.10, 6.1 and 6.12 kernels (KERNELS='5.10 6.12' picks lines; fetched by
# tests/vmtest/kernel.sh). KERNEL=/path/to/bzImage to test your own kernel.
vmtest: build
	IOWARDEN_BIN=$(CURDIR)/$(BIN) KERNEL=$(KERNEL) KERNELS="$(KERNELS)" tests/vmtest/run.sh

# io.latency, which Debian's kernels are built without: a 6.1 kernel built
# from Debian's linux-source-6.1 with tests/vmtest/iolatency.config
# (tests/vmtest/build-kernel.sh: about 25 minutes on 2 cores the first
# time, cached under /var/lib/iowarden-vmtest/kernels/6.1-iolatency), and
# the guest scripts that name that line (t-23: io.latency and wbt against
# the kernel's own account). Not in make test: the first build alone would
# take it past its 45 minutes. Run it on every change to the throttle stage.
vmtest-iolatency: bench-deps build
	IOWARDEN_BIN=$(CURDIR)/$(BIN) KERNELS=6.1-iolatency tests/vmtest/run.sh

# tune --model from iocost off at three device points 4x apart (issue 56):
# tests/vmtest/model-points.sh, about 5 minutes a point (M47=m-47-model: the
# whole of m-47, 15-20).
vmtest-model: bench-deps build
	IOWARDEN_BIN=$(CURDIR)/$(BIN) tests/vmtest/model-points.sh

# Fuzz targets for the knob parsers (fuzz/, own workspace; nightly + cargo-fuzz).
FUZZ_TARGETS := cost_qos cost_model weight max latency stat pressure devnum web_config accept journal duration cost_model_arg slo
FUZZ_SECS ?= 60
# No sanitizer by default: what the targets compile has no unsafe code (an
# out-of-bounds access panics, which libFuzzer reports like a crash), and
# AddressSanitizer made each execution ~5x slower. FUZZ_SANITIZER=address
# for a campaign that wants it anyway.
FUZZ_SANITIZER ?= none
fuzz-build: test-deps
	cd fuzz && $(CARGO) +nightly fuzz build -O --sanitizer $(FUZZ_SANITIZER)

# Each target for FUZZ_SECS seconds (or FUZZ_RUNS executions, e.g. the
# campaign FUZZ_RUNS=10000000) from the seeds in fuzz/corpus; a finding lands
# in fuzz/artifacts/<target>/ and fails the run.
FUZZ_RUNS ?=
FUZZ_LIMIT = $(if $(FUZZ_RUNS),-runs=$(FUZZ_RUNS),-max_total_time=$(FUZZ_SECS))
fuzz: fuzz-build
	set -o pipefail; cd fuzz && for t in $(FUZZ_TARGETS); do \
	  echo "fuzz $$t: $(FUZZ_LIMIT)"; \
	  $(CARGO) +nightly fuzz run -O --sanitizer $(FUZZ_SANITIZER) $$t -- $(FUZZ_LIMIT) 2>&1 | grep -E '^(Done|==|SUMMARY)|panicked' || exit 1; \
	done

# The bounded run make test does: every target to 300,000 executions (as
# much work on any machine, unlike a time bound): 24 s for all 14 here on
# 2026-11-28 without a sanitizer (150,000 with AddressSanitizer: 62 s).
fuzz-check:
	$(MAKE) fuzz FUZZ_RUNS=300000

demo: build
	examples/noisy-neighbour/run.sh

bench: bench-deps build
	overhead/run.sh

# What tracing costs on the guest's emulated NVMe, dispatch included
# (tests/vmtest/guest/m-36-nvme-cost.sh), on 6.1 and 6.12: 9-12 minutes.
bench-nvme: bench-deps build
	IOWARDEN_BIN=$(CURDIR)/$(BIN) VMTEST_ONLY=m-36-nvme-cost KERNELS="6.1 6.12" tests/vmtest/run.sh

# Regenerate dashboards/*.json from dashboards/generate.py (make test checks they match),
# with the pinned Grafana SDK in the tools venv (install-deps.sh --dashboards).
TOOLS ?= $(or $(IOWARDEN_TOOLS),/opt/iowarden-tools)
dashboards:
	@IOWARDEN_TOOLS=$(TOOLS) scripts/install-deps.sh --dashboards
	$(TOOLS)/bin/python dashboards/generate.py

# The Debian package: target/debian/iowarden_VERSION_ARCH.deb (scripts/deb.sh;
# loader/tests/deb.rs installs, starts and purges it).
deb: build
	scripts/deb.sh $(BIN) target/debian

# The OCI image, from scratch around the binary and its libraries (buildah:
# install-deps.sh --test): localhost/iowarden:VERSION and
# target/image/iowarden_VERSION.oci.tar (scripts/image.sh; loader/tests/image.rs
# runs it as the DaemonSet does).
image: build
	@scripts/install-deps.sh --test
	scripts/image.sh $(BIN) target/image

# Regenerate docs/metrics.md, the metrics reference (`iowarden metrics`;
# cargo test fails when it is stale).
docs: build
	$(BIN) metrics > docs/metrics.md

clean:
	$(CARGO) clean
