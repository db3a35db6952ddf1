# hermeskilld — build, test, demo, bench, lint. See README.md.
GO      ?= go
PYTHON  ?= python3
NODE    ?= node
BIN     := bin/hermeskilld
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS := -X main.version=$(VERSION)
DEMO    := $(or $(TMPDIR),/tmp)/hermeskilld-demo
# A static binary by default: it starts faster (no dynamic loader; start-up
# is on every agent's path) and runs on any Linux. Users and groups are then
# resolved from /etc/passwd and /etc/group only; for NSS (LDAP, sssd) build
# with `make build CGO=1`. (Tests keep cgo: the race detector needs it.)
CGO     ?= 0
# The Debian package (make deb): packaging/nfpm.yaml, nfpm pinned here and
# run from the Go module proxy. DEB_VERSION is git's (packaging/version.sh).
NFPM         := github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.48.0
DIST         ?= dist
STAGE         = $(DIST)/stage
DEB_VERSION  ?= $(shell packaging/version.sh)
DEB_REVISION ?= 1
DEB_ARCH     ?= $(shell $(GO) env GOARCH)
DEB           = $(DIST)/hermeskilld_$(DEB_VERSION)-$(DEB_REVISION)_$(DEB_ARCH).deb
# Dates in the package and the man pages: the last commit's, so that a
# rebuild of the same commit gives the same files.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || date +%s)

.PHONY: build test test-go test-python test-node test-install test-fuzz soak demo bench bench-compare bench-gateway lint install deb clean

build:
	CGO_ENABLED=$(CGO) $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/hermeskilld

# The whole suite: Go (race detector on; real processes, sockets, cgroups
# and Python agents end to end), the Python client's own tests, the
# Debian package installed, used and purged (as root), and a short fuzz of
# the parsers of what agents and upstreams send.
test: test-go test-python test-node test-install test-fuzz

# internal/gateway/sdktest is a module of its own (the providers' SDKs are
# never dependencies of hermeskilld): its tests run `hermeskilld supervise`
# with agents on openai-go and anthropic-sdk-go against a fake provider on
# loopback. Besides loopback they need only the Go module proxy, once.
# Its TestNodeAgents runs the agents of test/agents/node on the TypeScript
# SDKs (openai, @openai/agents, ai + @ai-sdk/openai) the same way: they need
# Node >= 20 and `npm ci --prefix test/agents/node` once; without them the
# test is skipped, saying so, but fails under HK_REQUIRE_NPM_AGENTS=1 (CI).
HK_REQUIRE_NPM_AGENTS ?= $(if $(CI),1)
#
# internal/telemetry/collectortest is one too: a real OpenTelemetry
# Collector (otelcol, its OTLP receiver) built from its Go modules receives
# what `hermeskilld supervise` and `hermeskilld daemon` export. It runs
# without the race detector: the collector's compile under it is several
# times slower, and hermeskilld runs there as a separate process anyway.
#
# The alert rules' tests (internal/metrics) run promtool: under CI (CI set;
# .ci/run installs the Debian package prometheus, which ships it) they fail
# without it, elsewhere they are skipped, saying so.
HK_REQUIRE_PROMTOOL ?= $(if $(CI),1)
#
# The benchmark harness's smoke test runs alone, after the rest: it starts
# a daemon of agents and hundreds of short supervise runs, whose load and
# whose clean-up of dead runs' cgroups must not meet the end-to-end tests
# (one of them leaves a dead supervise's cgroup behind on purpose).
#
# GORACE: a binary built with the race detector sleeps a second at exit
# (atexit_sleep_ms, 1000 by default) for threads still running to report;
# the tests start the race-built test binary as hermeskilld some hundreds of
# times (every supervise, daemon and operator command), and that second
# each was half the suite's time. A race is still reported where it
# happens; only the wait at exit goes.
export GORACE ?= atexit_sleep_ms=0
test-go:
	HK_REQUIRE_PROMTOOL=$(HK_REQUIRE_PROMTOOL) $(GO) test -race -count=1 -timeout 15m \
		$$($(GO) list ./... | grep -v /tools/benchcompare)
	$(GO) test -count=1 -timeout 5m ./tools/benchcompare/
	cd internal/gateway/sdktest && HK_REQUIRE_NPM_AGENTS=$(HK_REQUIRE_NPM_AGENTS) $(GO) test -race -count=1 -timeout 5m ./...
	cd internal/telemetry/collectortest && $(GO) test -count=1 -timeout 5m ./...

# The long loops of the guarantees (make test runs a short loop of each):
# 50 cooperative stops per containment mode and blocking call, 50 SIGKILLs
# of supervise at random moments and 50 of a daemon of five agents per
# mode, 10 minutes of daemon churn
# (50 agents, some hostile) with its goroutines, descriptors and memory
# printed as a curve, and 5 minutes of 50 agents starting and stopping
# beside a watched agent (400 ms heartbeat timeout) whose longest
# heartbeat wait is printed, 20 descriptor floods through the gateway per
# containment mode, and 50 SIGKILLs of supervise beside a traceless
# escapee. Without the race detector: the figures are the shipped binary's.
soak:
	HK_SOAK_RUNS=50 HK_SOAK_DURATION=10m HK_ISOLATION_DURATION=5m HK_EXHAUST_RUNS=20 $(GO) test -count=1 -timeout 60m -v \
		-run 'TestCooperativeStopNeverLost|TestClientStopWithDefaultSignal|TestFailClosedAtAnyMoment|TestFailClosedDaemonKilled|TestSoakDaemonChurn|TestHeartbeatIsolationUnderChurn|TestDescriptorFloodThroughGateway|TestTracelessEscapeeDiesWithSupervise' ./cmd/hermeskilld/

# The fuzz targets of the parsers that agents, upstreams and files feed
# (package:target), each fuzzed for FUZZTIME, one `go test -fuzz` at a time
# (go test fuzzes one target per run). A crash fails the run and leaves
# the input under the package's testdata/fuzz/TARGET/, where every later
# `go test` replays it. Every target's seeds and corpus also run in
# test-go; `make test-fuzz FUZZTIME=10m` fuzzes for real.
#
# Go before 1.27 has a race in its fuzz coordinator: on a loaded machine a
# run can end in a bare "context deadline exceeded" as FUZZTIME runs out,
# with no failing input. That alone is not a crash and is let pass, saying
# so; any other failure fails.
FUZZTIME ?= 2s
FUZZ_TARGETS := \
	internal/heartbeat:FuzzParse internal/heartbeat:FuzzCredentials internal/heartbeat:FuzzFramer \
	internal/gateway:FuzzStreamMeter internal/gateway:FuzzStreamMeterBody \
	internal/gateway:FuzzToolCallAssembly internal/gateway:FuzzToolCallIndexes \
	internal/gateway:FuzzStreamMeters internal/gateway:FuzzStreamScan internal/gateway:FuzzParseRequest \
	internal/config:FuzzParseAgent internal/config:FuzzParseDaemon \
	internal/certs:FuzzCertParse internal/certs:FuzzCertKey \
	internal/procfs:FuzzJoinCmdline
test-fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=./$${t%%:*}/ fn=$${t#*:}; \
		echo "fuzz $$fn $$pkg for $(FUZZTIME)"; \
		if out=$$($(GO) test -count=1 -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg 2>&1); then \
			echo "$$out" | grep -E '^(ok|PASS)' | tail -1; continue; \
		fi; \
		if echo "$$out" | grep -qx '    context deadline exceeded' && ! echo "$$out" | grep -q 'Failing input written'; then \
			echo "$$fn: stopped by Go's fuzz deadline race, no failing input: not a crash"; continue; \
		fi; \
		echo "$$out"; exit 1; \
	done

test-python:
	$(PYTHON) -m unittest discover -s clients/python -p 'test_*.py'

# The Node client's suite (clients/node, Node >= 18 and npm): unit tests on a
# real Unix stream socket, its npm package packed and installed offline, and
# Node agents end to end under the hermeskilld that `make build` made.
test-node: build
	@command -v $(NODE) >/dev/null || { echo "make test-node: no $(NODE): install Node.js >= 18 and npm (apt-get install nodejs npm)" >&2; exit 1; }
	@$(NODE) -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' || { echo "make test-node: $(NODE) is $$($(NODE) --version); the client needs Node.js >= 18" >&2; exit 1; }
	HERMESKILL_BIN=$(CURDIR)/$(BIN) $(NODE) --test clients/node/test/

# Builds the package, installs it into this machine with dpkg, checks the
# installed unit, config and binary, removes and purges it and checks what
# is left; the machine is left as it was. Root with dpkg only: it skips,
# saying what is missing, elsewhere. (make test-go runs the other test of
# packaging/: the static binary in an empty root.)
test-install:
	HK_TEST_INSTALL=1 $(GO) test -count=1 -timeout 5m -v -run '^TestDebInstall$$' ./packaging/

# A wedged Python agent (spinning in `while True: pass`, ignoring SIGINT and
# SIGTERM) killed through the whole ladder; its death certificate printed.
demo: build
	@rm -rf $(DEMO) && mkdir -p $(DEMO)
	@echo '$$ hermeskilld supervise --heartbeat-timeout 1s --coop-grace 300ms --term-grace 300ms -- python3 examples/agents/wedged_agent.py'
	@$(BIN) supervise --heartbeat-timeout 1s --coop-grace 300ms --term-grace 300ms \
		--certs-dir $(DEMO)/certs -- $(PYTHON) examples/agents/wedged_agent.py; \
		echo "(exit status $$?)"
	@echo; echo '$$ hermeskilld certs show --json' $(DEMO)/certs/*.json
	@$(BIN) certs show --json $(DEMO)/certs/*.json

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
	./scripts/bench-supervise.sh

# hermeskilld side by side with tini, dumb-init, coreutils timeout and the
# harness's own floors, and its LLM gateway beside a bare reverse proxy,
# every comparison interleaved; one markdown table (tools/benchcompare,
# docs/benchmarks.md). ~5 minutes on 2 cores (the gateway's ~1.5 of them);
# BENCH_FLAGS=-quick for a short run, -n 10000, -rows 1,2, … (-help).
# Installs tini and dumb-init with apt-get when absent (as root).
bench-compare:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	CGO_ENABLED=$(CGO) $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $$tmp/hermeskilld ./cmd/hermeskilld && \
	CGO_ENABLED=$(CGO) $(GO) build -trimpath -o $$tmp/launchfloor ./tools/benchcompare/agents/launchfloor && \
	env -u CGO_ENABLED $(GO) build -o $$tmp/hermeskilld-dynamic ./cmd/hermeskilld && \
	env -u CGO_ENABLED $(GO) build -o $$tmp/launchfloor-dynamic ./tools/benchcompare/agents/launchfloor && \
	$(GO) run ./tools/benchcompare -hk $$tmp/hermeskilld -floor $$tmp/launchfloor \
		-hk-dynamic $$tmp/hermeskilld-dynamic -floor-dynamic $$tmp/launchfloor-dynamic $(BENCH_FLAGS)

# The gateway's rows alone (row group 7 of bench-compare): added latency
# at concurrency 1, requests per second, the highest rate sustained with
# an added p99 under 20 ms, 1,000 and 4,000 streams held at 10 Hz and
# 10,000 at 1 Hz (RSS, live heap and stacks, goroutines and CPU per open
# stream, beside a bare httputil.ReverseProxy). About 5 minutes; as root,
# so that RLIMIT_NOFILE can be raised for the 10,000.
bench-gateway:
	@$(MAKE) --no-print-directory bench-compare BENCH_FLAGS='-rows 7 $(BENCH_FLAGS)'

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

install: build
	install -D -m 0755 $(BIN) $(DESTDIR)/usr/local/bin/hermeskilld
	install -D -m 0644 systemd/hermeskilld.service $(DESTDIR)/etc/systemd/system/hermeskilld.service
	install -d -m 0755 $(DESTDIR)/etc/hermeskill/agents.d
	test -e $(DESTDIR)/etc/hermeskill/hermeskilld.yaml || \
		install -m 0644 examples/config/hermeskilld.yaml $(DESTDIR)/etc/hermeskill/hermeskilld.yaml

# dist/hermeskilld_VERSION-1_ARCH.deb, replacing any earlier one there: the
# static binary (stripped), the unit with /usr/bin, sysusers.d and
# tmpfiles.d entries, the sample config as a conffile, completions, man
# pages generated from the commands (by a test: cobra/doc stays out of the
# binary) and compressed with gzip -9n (no name or time: reproducible), and
# in /usr/share/doc/hermeskilld the README, the docs it links to and the
# sample price file.
deb:
	rm -rf $(STAGE) $(DIST)/hermeskilld_*.deb && mkdir -p $(STAGE)/completion $(STAGE)/man
	$(MAKE) --no-print-directory build BIN=$(STAGE)/hermeskilld LDFLAGS='$(LDFLAGS) -s -w'
	sed 's|/usr/local/bin/hermeskilld|/usr/bin/hermeskilld|g' systemd/hermeskilld.service >$(STAGE)/hermeskilld.service
	grep -q '^ExecStart=/usr/bin/hermeskilld ' $(STAGE)/hermeskilld.service
	$(STAGE)/hermeskilld completion bash >$(STAGE)/completion/hermeskilld.bash
	$(STAGE)/hermeskilld completion zsh >$(STAGE)/completion/hermeskilld.zsh
	$(STAGE)/hermeskilld completion fish >$(STAGE)/completion/hermeskilld.fish
	HK_MAN_DIR=$(abspath $(STAGE)/man) HK_MAN_SOURCE='hermeskilld $(VERSION)' SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) \
		$(GO) test -count=1 -run '^TestManPages$$' ./cmd/hermeskilld/
	gzip -9nf $(STAGE)/man/*.1
	STAGE=$(abspath $(STAGE)) DEB_VERSION=$(DEB_VERSION) DEB_REVISION=$(DEB_REVISION) DEB_ARCH=$(DEB_ARCH) \
		SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run $(NFPM) package --config packaging/nfpm.yaml --packager deb --target $(DEB)

clean:
	rm -rf bin dist
