# Everyday commands; .ci/run is what CI runs.
.PHONY: all fmt lint test test-all bench study quick ci

all: fmt lint test

fmt:
	gofmt -w $$(git ls-files '*.go')

lint:
	go vet ./...
	go tool -modfile=tools/go.mod golangci-lint run ./...

test:
	go test -race ./...

# The slow tests too (live fleets, child processes, quick studies), as CI runs them.
test-all:
	STARGATE_SLOW_TESTS=1 go test -race -timeout 30m ./...

bench:
	go test -run '^$$' -bench . -benchmem ./...

study:
	go run ./cmd/stargate study routing

quick:
	go run ./cmd/stargate study routing --quick

ci:
	.ci/run
