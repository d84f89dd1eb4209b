# The test command the README gives: it installs what the end-to-end tests
# need, then runs every test, end-to-end ones included (build tag e2e).
# Plain `go test ./...` runs only the hermetic tests. The real-cluster test
# (e2e/cluster) is part of `test`; `make e2e-cluster` runs it alone.
GO ?= go

# The images a release publishes (scripts/images.sh): render's default
# proxy image is $(IMAGE_REGISTRY)/keyhole-proxy:$(IMAGE_TAG).
IMAGE_REGISTRY ?= ghcr.io/keyhole-dev
IMAGE_TAG ?= v0.1.0

.PHONY: test test-deps hermetic race example fuzz bench images e2e-cluster

test: test-deps
	$(GO) mod tidy -diff
	$(GO) vet -tags e2e ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) tool -modfile=tools/staticcheck/go.mod staticcheck ./...
	$(GO) tool -modfile=tools/staticcheck/go.mod staticcheck -tags e2e ./...
	$(GO) test -tags e2e -count=1 -timeout 30m ./...
	$(MAKE) race

# The packages whose work runs on several goroutines at once (the proxy,
# the loader's parallel builds and reads, a diff's two sides sharing what
# they compute), again under the race detector. Three tests are left out of
# this pass, and run in the one above: TestServerStalledReaderPipelined
# waits 10 s for socket buffers to fill, which takes the instrumented proxy
# 15, TestLoadTooLarge bounds the bytes a refusal allocates (8 MiB),
# which the detector's own allocations pass by a few KiB, and
# TestHelmRenderMemoryBounded and TestAppSetTemplateBounded bound the
# child process's address space (a chart renderer, an ApplicationSet's
# template) to 256 MiB more than it holds, in which the detector's runtime
# cannot map its shadow memory. TestKustomizeBudget bounds a build the
# byte limit stops at 20 s, a bound the detector's slowdown passes on a
# loaded 2-core machine.
race:
	$(GO) test -race -count=1 -timeout 20m -skip 'TestServerStalledReaderPipelined|TestLoadTooLarge|TestHelmRenderMemoryBounded|TestAppSetTemplateBounded|TestKustomizeBudget' \
		./proxy/... ./source ./render ./internal/kustbuild ./internal/gitfs ./internal/parallel
	$(GO) test -race -count=1 -timeout 20m -run 'TestDiffReuseRepos|TestDiffReuseExamples|TestDiffExitCodes' ./cli

test-deps:
	./scripts/test-deps.sh

hermetic:
	$(GO) test ./...

example:
	$(GO) run ./cmd/keyhole check examples/github-acme

# keyhole-proxy and keyhole images, built without a container engine, as
# image tarballs in .cache/images/ (ctr images import, docker load).
images:
	IMAGE_REGISTRY=$(IMAGE_REGISTRY) IMAGE_TAG=$(IMAGE_TAG) ./scripts/images.sh

# The real single-node cluster: installs containerd and friends, builds
# the cluster binaries and images (cached), and runs what render writes.
# docs/e2e.md says how long it takes and what it proves.
e2e-cluster:
	./scripts/cluster-deps.sh
	$(GO) test -tags e2e -count=1 -timeout 60m -v ./e2e/cluster/

# Binaries stamped as every build outside `go install` is
# (scripts/version-ldflags.sh; docs/action.md#versions), and static as the
# release builds them (docs/benchmarks.md, "The binary as released").
.PHONY: build
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$$(scripts/version-ldflags.sh)" -o bin/ ./cmd/keyhole ./cmd/keyhole-proxy
