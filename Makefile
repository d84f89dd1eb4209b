# The test command the README gives: it installs what the end-to-end tests
# need, then runs every test, end-to-end ones included (build tag e2e).
# Plain `go test ./...` runs only the hermetic tests.
GO ?= go

.PHONY: test test-deps hermetic example fuzz bench

test: test-deps
	$(GO) mod tidy -diff
	$(GO) vet -tags e2e ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) test -tags e2e -count=1 -timeout 30m ./...

test-deps:
	./scripts/test-deps.sh

hermetic:
	$(GO) test ./...

example:
	$(GO) run ./cmd/keyhole check examples/github-acme

# Binaries stamped as every build outside `go install` is
# (scripts/version-ldflags.sh; docs/action.md#versions).
.PHONY: build
build:
	$(GO) build -ldflags "$$(scripts/version-ldflags.sh)" -o bin/ ./cmd/keyhole ./cmd/keyhole-proxy
