# The test target is what CI runs (.ci/run) and what the README names.
GO ?= go
RACE_PKGS := ./internal/...

.PHONY: test check fmt-check vet unit race fuzz bench build compat bench-kafka image

# unit and race run side by side: the suite mostly waits (for sessions,
# processes, timeouts), and used a third of the machine's two cores when
# they ran one after the other.
test: fmt-check vet
	@$(MAKE) --no-print-directory -j2 unit race

# The inner loop, in under two minutes: the packages' own tests, none of
# which needs a real client (Java, librdkafka, Python), root or a network
# namespace; -short leaves out the long modes. `make test` stays what CI
# runs, complete.
check: fmt-check vet
	$(GO) test -count=1 -short ./internal/... ./cmd/...

# ./strand, which `strand version` says was built from which commit (Go
# stamps it from git; not in a linked worktree or with -buildvcs=false).
build:
	$(GO) build -o strand ./cmd/strand

# The container image (deploy/container/Containerfile): the binary built
# static (no cgo), alone on an empty image. IMAGE_BUILD is the builder:
# buildah bud, podman build or docker build.
IMAGE ?= strand
IMAGE_BUILD ?= $(shell command -v buildah >/dev/null 2>&1 && echo buildah bud || (command -v podman >/dev/null 2>&1 && echo podman build) || echo docker build)
image:
	CGO_ENABLED=0 $(GO) build -trimpath -o deploy/container/strand ./cmd/strand
	$(IMAGE_BUILD) -t $(IMAGE) -f deploy/container/Containerfile deploy/container
	rm -f deploy/container/strand

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# The lock-order checker's own build is vetted too (make test runs it).
vet:
	$(GO) vet ./...
	$(GO) vet -tags lockrank ./internal/lockrank/

# Includes test/compat: real clients (kcat, kafka-python, the Java client,
# franz-go) against the real binary. .ci/run installs those clients; outside
# CI a test whose client is missing skips, under CI=true it fails.
unit:
	$(GO) test -count=1 ./...

# The compatibility suite alone, verbosely (RUN=regexp to pick tests).
RUN ?= .
compat:
	$(GO) test -count=1 -v -run='$(RUN)' ./test/compat/

# The concurrent packages again under the race detector, with the lock
# order of LOCKS.md checked (internal/lockrank: a lock taken out of order
# panics, naming both).
race:
	$(GO) test -count=1 -short -race -tags lockrank $(RACE_PKGS)

# Each fuzz target for FUZZTIME (go test runs one -fuzz target at a time).
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzValidateBatch$$' -fuzztime=$(FUZZTIME) ./internal/log/
	$(GO) test -run='^$$' -fuzz='^FuzzForEachRecord$$' -fuzztime=$(FUZZTIME) ./internal/log/
	$(GO) test -run='^$$' -fuzz='^FuzzRecover$$' -fuzztime=$(FUZZTIME) ./internal/log/
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeRequest$$' -fuzztime=$(FUZZTIME) ./internal/server/
	$(GO) test -run='^$$' -fuzz='^FuzzParsePlain$$' -fuzztime=$(FUZZTIME) ./internal/server/
	$(GO) test -run='^$$' -fuzz='^FuzzServer$$' -fuzztime=$(FUZZTIME) ./internal/scram/
	$(GO) test -run='^$$' -fuzz='^FuzzParseMessage$$' -fuzztime=$(FUZZTIME) ./internal/oauth/

BENCH ?= .
bench:
	$(GO) test -run='^$$' -bench='$(BENCH)' -benchmem ./internal/log/

# Strand against Apache Kafka 4.x (and kfake) on this machine: fetches Kafka
# from Maven Central once (cached in ~/.cache/strand-bench), ~25 minutes in
# full mode. BENCH_MODE=quick for a few minutes; BENCH_ARGS for more flags
# of `strand-bench suite` (see bench/README.md).
BENCH_MODE ?= full
BENCH_ARGS ?=
bench-kafka:
	bash bench/run.sh $(BENCH_MODE) $(BENCH_ARGS)
