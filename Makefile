# The test target is what CI runs (.ci/run) and what the README names.
GO ?= go
RACE_PKGS := ./internal/log/...

.PHONY: test fmt-check vet unit race fuzz bench build

test: fmt-check vet unit race

build:
	$(GO) build ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

unit:
	$(GO) test -count=1 ./...

# The concurrent packages again under the race detector.
race:
	$(GO) test -count=1 -race $(RACE_PKGS)

# Each fuzz target for FUZZTIME (go test runs one -fuzz target at a time).
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzValidateBatch$$' -fuzztime=$(FUZZTIME) ./internal/log/
	$(GO) test -run='^$$' -fuzz='^FuzzForEachRecord$$' -fuzztime=$(FUZZTIME) ./internal/log/
	$(GO) test -run='^$$' -fuzz='^FuzzRecover$$' -fuzztime=$(FUZZTIME) ./internal/log/

BENCH ?= .
bench:
	$(GO) test -run='^$$' -bench='$(BENCH)' -benchmem ./internal/log/
