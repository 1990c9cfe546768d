# chime build, test and tooling entry points. `make help` lists the targets.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-builtin-rules

# Use the installed Go, never a downloaded toolchain. The module stays in its
# default read-only mode, so a missing go.sum entry fails here as it does in CI.
export GOTOOLCHAIN := local

GO ?= go

# ---------------------------------------------------------------------------
# Pinned tools, installed into .tools/ (GOBIN). Each install leaves a stamp named
# after the tool's version: bumping a version reinstalls, otherwise re-runs are
# instant. A stamp whose binary is gone is redone.
# ---------------------------------------------------------------------------
TOOLS_DIR := $(CURDIR)/.tools
STAMP_DIR := $(TOOLS_DIR)/.stamps

BUF_VERSION         := v1.75.0
STATICCHECK_VERSION := v0.8.2
# protoc-gen-go must match the protobuf runtime the generated code is compiled
# against, so its version is read from go.mod rather than written here.
PROTOC_GEN_GO_VERSION := $(shell $(GO) list -m -f '{{.Version}}' google.golang.org/protobuf)
ifeq ($(PROTOC_GEN_GO_VERSION),)
$(error cannot read the google.golang.org/protobuf version from go.mod (is Go installed, and go.mod/go.sum intact?))
endif
# protoc-gen-go-vtproto likewise matches the vtprotobuf runtime in go.mod.
PROTOC_GEN_VTPROTO_VERSION := $(shell $(GO) list -m -f '{{.Version}}' github.com/planetscale/vtprotobuf)

BUF           := $(TOOLS_DIR)/buf
PROTOC_GEN_GO := $(TOOLS_DIR)/protoc-gen-go
PROTOC_GEN_VTPROTO := $(TOOLS_DIR)/protoc-gen-go-vtproto
STATICCHECK   := $(TOOLS_DIR)/staticcheck

BUF_STAMP           := $(STAMP_DIR)/buf-$(BUF_VERSION)
PROTOC_GEN_GO_STAMP := $(STAMP_DIR)/protoc-gen-go-$(PROTOC_GEN_GO_VERSION)
PROTOC_GEN_VTPROTO_STAMP := $(STAMP_DIR)/protoc-gen-go-vtproto-$(PROTOC_GEN_VTPROTO_VERSION)
STATICCHECK_STAMP   := $(STAMP_DIR)/staticcheck-$(STATICCHECK_VERSION)

# install_tool: $(1) binary name, $(2) package path, $(3) version.
define install_tool
	@echo "installing $(1) $(3) into .tools/"
	@mkdir -p $(STAMP_DIR)
	GOBIN=$(TOOLS_DIR) $(GO) install $(2)@$(3)
	@rm -f $(STAMP_DIR)/$(1)-*
	@touch $@
endef

$(BUF_STAMP): $(if $(wildcard $(BUF)),,FORCE)
	$(call install_tool,buf,github.com/bufbuild/buf/cmd/buf,$(BUF_VERSION))

$(PROTOC_GEN_GO_STAMP): $(if $(wildcard $(PROTOC_GEN_GO)),,FORCE)
	$(call install_tool,protoc-gen-go,google.golang.org/protobuf/cmd/protoc-gen-go,$(PROTOC_GEN_GO_VERSION))

$(PROTOC_GEN_VTPROTO_STAMP): $(if $(wildcard $(PROTOC_GEN_VTPROTO)),,FORCE)
	$(call install_tool,protoc-gen-go-vtproto,github.com/planetscale/vtprotobuf/cmd/protoc-gen-go-vtproto,$(PROTOC_GEN_VTPROTO_VERSION))

$(STATICCHECK_STAMP): $(if $(wildcard $(STATICCHECK)),,FORCE)
	$(call install_tool,staticcheck,honnef.co/go/tools/cmd/staticcheck,$(STATICCHECK_VERSION))

.PHONY: FORCE
FORCE:

# ---------------------------------------------------------------------------
# Local ClickHouse: the ClickHouse engine as libchdb.so, from the pinned npm
# package, installed into .tools/chdb (no global npm install), plus a small C
# host (infra/clickhouse/host) that serves it on 127.0.0.1, built from this
# checkout's source into bin/ (a checkout never runs another one's host).
# Needs npm and a C compiler. infra/clickhouse reads the same paths and version.
# ---------------------------------------------------------------------------
CHDB_VERSION := 26.7.3-stable.1
CHDB_DIR     := $(TOOLS_DIR)/chdb
CHDB_LIB     := $(CHDB_DIR)/node_modules/@chdb/lib-linux-x64-gnu/libchdb.so
CHDB_HOST    := $(CURDIR)/bin/chimech
CHDB_STAMP   := $(STAMP_DIR)/chdb-$(CHDB_VERSION)
CC ?= cc

$(CHDB_STAMP): $(if $(wildcard $(CHDB_LIB)),,FORCE)
	@echo "installing @chdb/lib-linux-x64-gnu@$(CHDB_VERSION) into .tools/chdb/"
	@mkdir -p $(STAMP_DIR) $(CHDB_DIR)
	npm install --prefix $(CHDB_DIR) --save-exact --no-audit --no-fund --no-progress --loglevel=error \
		@chdb/lib-linux-x64-gnu@$(CHDB_VERSION)
	@test -f $(CHDB_LIB) || { echo "npm installed no $(CHDB_LIB)"; exit 1; }
	@rm -f $(STAMP_DIR)/chdb-*
	@touch $@

$(CHDB_HOST): infra/clickhouse/host/chimech.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Wextra -Werror -o $@ $< -ldl

.PHONY: clickhouse
clickhouse: $(CHDB_STAMP) $(CHDB_HOST) ## install the local ClickHouse (npm @chdb/lib-linux-x64-gnu into .tools/chdb, the host into bin/chimech)

# ---------------------------------------------------------------------------
# Debian's Chromium, for the console's browser test (cmd/chime
# TestConsoleInChromium, driven by chromedp). Installed with apt when missing
# (as root, or through sudo).
# ---------------------------------------------------------------------------
CHROMIUM := /usr/bin/chromium

# apt_install is the shell command that installs the Debian packages $(1):
# as root, or through sudo; the package lists are updated only when the
# first try fails (a fresh image may have none).
apt_install = echo "installing Debian's $(1) (apt-get)"; \
	SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	$$SUDO apt-get install -y --no-install-recommends $(1) || \
		{ $$SUDO apt-get update && $$SUDO apt-get install -y --no-install-recommends $(1); }

.PHONY: chromium
chromium: ## install Debian's chromium for the console test (apt, when missing)
	@if [ ! -x $(CHROMIUM) ]; then $(call apt_install,chromium); fi

# ---------------------------------------------------------------------------
# schemathesis (PyPI), pinned, in a virtualenv under .tools/; .ci/schemathesis
# runs it against a whole chime dev.
# ---------------------------------------------------------------------------
SCHEMATHESIS_VERSION := 4.32.5
ST_VENV              := $(TOOLS_DIR)/schemathesis-$(SCHEMATHESIS_VERSION)
ST_STAMP             := $(STAMP_DIR)/schemathesis-$(SCHEMATHESIS_VERSION)
SCHEMATHESIS_EXAMPLES ?= 50

$(ST_STAMP): $(if $(wildcard $(ST_VENV)/bin/st),,FORCE)
	@echo "installing schemathesis $(SCHEMATHESIS_VERSION) into .tools/"
	@mkdir -p $(STAMP_DIR)
	python3 -m venv $(ST_VENV)
	$(ST_VENV)/bin/pip install --quiet --disable-pip-version-check schemathesis==$(SCHEMATHESIS_VERSION)
	@touch $@

.PHONY: schemathesis
schemathesis: build clickhouse $(ST_STAMP) ## schemathesis against chime dev (SCHEMATHESIS_EXAMPLES per operation): no 5xx, nothing outside /openapi.json
	.ci/schemathesis $(ST_VENV)/bin/st $(BIN_DIR)/chime $(SCHEMATHESIS_EXAMPLES)

# ---------------------------------------------------------------------------
# SDKs (issue 29). The Python SDK's pinned test and generator packages
# (sdk/python/requirements-dev.txt: grpcio-tools bundles the protoc that
# makes src/chime/v1, datamodel-code-generator makes models.py from
# api/openapi.json) in a virtualenv under .tools/, named by the file's hash
# so a change to it makes a new one.
# ---------------------------------------------------------------------------
PY_SDK       := sdk/python
PY_REQS      := $(PY_SDK)/requirements-dev.txt
PY_VENV      := $(TOOLS_DIR)/py-sdk-$(shell sha256sum $(PY_REQS) 2>/dev/null | cut -c1-12)
PY_STAMP     := $(PY_VENV)/.installed
PY           := $(PY_VENV)/bin/python
BENCH_SDK_JOBS ?= 100000
# The TypeScript SDK's packages (npm, exact versions from its package-lock.json)
# in sdk/typescript/node_modules; protoc-gen-es makes src/gen through buf.
TS_SDK       := sdk/typescript
TS_STAMP     := $(TS_SDK)/node_modules/.installed

$(PY_STAMP): $(PY_REQS)
	@echo "installing the Python SDK's packages into $(PY_VENV)"
	python3 -m venv $(PY_VENV)
	$(PY_VENV)/bin/pip install --quiet --disable-pip-version-check -r $(PY_REQS)
	$(PY_VENV)/bin/pip install --quiet --disable-pip-version-check --no-deps -e $(PY_SDK)
	@touch $@

$(TS_STAMP): $(TS_SDK)/package-lock.json
	@echo "installing the TypeScript SDK's packages into $(TS_SDK)/node_modules"
	cd $(TS_SDK) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

.PHONY: generate-sdk
generate-sdk: $(PY_STAMP) $(TS_STAMP) $(BUF_STAMP) ## regenerate the SDKs' messages and API types (sdk/python/src/chime/{v1,models.py}, sdk/typescript/src/gen)
	$(PY_SDK)/generate.sh $(PY) $(PY_SDK)/src
	rm -rf $(TS_SDK)/src/gen && cd $(TS_SDK) && sh generate.sh src/gen

.PHONY: check-generate-sdk
check-generate-sdk: $(PY_STAMP) $(TS_STAMP) $(BUF_STAMP) ## fail if the SDKs' generated code is not what the .proto files and api/openapi.json make
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(PY_SDK)/generate.sh $(PY) $$tmp; \
	for f in $$(cd $$tmp && find chime -type f | sort); do \
		if ! diff -u "$(PY_SDK)/src/$$f" "$$tmp/$$f" >"$$tmp/changes.diff" 2>&1; then \
			head -n 40 "$$tmp/changes.diff"; \
			echo "check-generate-sdk: $(PY_SDK)/src/$$f is stale; run 'make generate-sdk' and commit the result"; \
			exit 1; \
		fi; \
	done; \
	echo "check-generate-sdk: the Python SDK's generated code is up to date"
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	(cd $(TS_SDK) && sh generate.sh "$$tmp/gen"); \
	if ! diff -r -u $(TS_SDK)/src/gen "$$tmp/gen" >"$$tmp/changes.diff" 2>&1; then \
		head -n 40 "$$tmp/changes.diff"; \
		echo "check-generate-sdk: $(TS_SDK)/src/gen is stale; run 'make generate-sdk' and commit the result"; \
		exit 1; \
	fi; \
	echo "check-generate-sdk: the TypeScript SDK's generated code is up to date"

.PHONY: bench-sdk
bench-sdk: build $(PY_STAMP) $(TS_STAMP) ## the SDKs' publishing benchmark: one process schedules BENCH_SDK_JOBS (100000) jobs into a chime dev through Kafka
	CHIME_BIN=$(CURDIR)/$(BIN_DIR)/chime $(PY) $(PY_SDK)/bench/publish.py $(BENCH_SDK_JOBS)
	cd $(TS_SDK) && npm run --silent build && CHIME_BIN=$(CURDIR)/$(BIN_DIR)/chime node dist/bench/publish.js $(BENCH_SDK_JOBS)

.PHONY: test-sdk
test-sdk: build clickhouse check-generate-sdk ## the SDKs' tests: unit tests, then against a chime dev the tests start (bin/chime)
	CHIME_BIN=$(CURDIR)/$(BIN_DIR)/chime $(PY) -m pytest -q $(PY_SDK)/tests
	cd $(TS_SDK) && CHIME_BIN=$(CURDIR)/$(BIN_DIR)/chime npm test --silent

# ---------------------------------------------------------------------------
# Apache Kafka for tests on a real broker: its jars from Maven Central (pinned
# in internal/kafkacluster/pom.xml, the one place the version is written), copied
# into .tools/kafka-<version>/libs; needs Java 17+ and Maven. chime-kafka
# starts KRaft nodes from them on 127.0.0.1.
# ---------------------------------------------------------------------------
KAFKA_POM     := internal/kafkacluster/pom.xml
KAFKA_VERSION := $(shell sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' $(KAFKA_POM))
KAFKA_LIBS    := $(TOOLS_DIR)/kafka-$(KAFKA_VERSION)/libs
KAFKA_STAMP   := $(STAMP_DIR)/kafka-$(KAFKA_VERSION)
KAFKA_NODES   ?= 1
MVN           ?= mvn

$(KAFKA_STAMP): $(KAFKA_POM) $(if $(wildcard $(KAFKA_LIBS)/kafka_2.13-$(KAFKA_VERSION).jar),,FORCE)
	@echo "installing Apache Kafka $(KAFKA_VERSION) jars into .tools/kafka-$(KAFKA_VERSION)/libs"
	@mkdir -p $(STAMP_DIR)
	rm -rf $(KAFKA_LIBS)
	$(MVN) -q -B -f $(KAFKA_POM) dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(KAFKA_LIBS)
	@test -f $(KAFKA_LIBS)/kafka_2.13-$(KAFKA_VERSION).jar || { echo "mvn copied no kafka_2.13-$(KAFKA_VERSION).jar"; exit 1; }
	@rm -f $(STAMP_DIR)/kafka-*
	@touch $@

.PHONY: kafka-jars
kafka-jars: $(KAFKA_STAMP) ## fetch Apache Kafka's jars (Maven Central) into .tools/

.PHONY: kafka
kafka: $(KAFKA_STAMP) ## serve Apache Kafka (KAFKA_NODES KRaft nodes, default 1) on 127.0.0.1 until Ctrl-C
	$(GO) run ./cmd/chime-kafka -libs $(KAFKA_LIBS) -nodes $(KAFKA_NODES)

.PHONY: tools
tools: $(BUF_STAMP) $(PROTOC_GEN_GO_STAMP) $(PROTOC_GEN_VTPROTO_STAMP) $(STATICCHECK_STAMP) ## install the pinned tools into .tools/

# ---------------------------------------------------------------------------
# Generated code
# ---------------------------------------------------------------------------
SCHEMA_DIR := schema
GEN_DIR    := $(SCHEMA_DIR)/chimev1

# --clean empties schema/chimev1 first, so the output of a deleted .proto goes
# too: that folder holds generated code only.
.PHONY: generate
generate: $(BUF_STAMP) $(PROTOC_GEN_GO_STAMP) $(PROTOC_GEN_VTPROTO_STAMP) ## regenerate schema/chimev1 from the .proto files
	cd $(SCHEMA_DIR) && $(BUF) generate --clean
	gofmt -w $(GEN_DIR)

# Generates into a scratch directory (buf generate -o) and compares it with the
# committed tree, so stale, hand-edited, missing or leftover files all show up.
.PHONY: check-generate
check-generate: $(BUF_STAMP) $(PROTOC_GEN_GO_STAMP) $(PROTOC_GEN_VTPROTO_STAMP) check-generate-sdk ## buf lint, and fail if schema/chimev1 (or the SDKs' generated code) is not what the .proto files generate
	cd $(SCHEMA_DIR) && $(BUF) lint
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	(cd $(SCHEMA_DIR) && $(BUF) generate -o "$$tmp/out"); \
	gofmt -w "$$tmp/out/chimev1"; \
	if ! diff -r -u "$(GEN_DIR)" "$$tmp/out/chimev1" >"$$tmp/changes.diff" 2>&1; then \
		head -n 60 "$$tmp/changes.diff"; \
		echo; \
		echo "check-generate: $(GEN_DIR) is stale: it differs from what $(SCHEMA_DIR)/proto generates"; \
		echo "  with buf $(BUF_VERSION), protoc-gen-go $(PROTOC_GEN_GO_VERSION) and protoc-gen-go-vtproto $(PROTOC_GEN_VTPROTO_VERSION)."; \
		echo "  Run 'make generate' and commit the result; never edit *.pb.go by hand."; \
		exit 1; \
	fi; \
	echo "check-generate: $(GEN_DIR) is up to date"

# ---------------------------------------------------------------------------
# Build, run, test
# ---------------------------------------------------------------------------
BIN_DIR   := bin
RUN_FLAGS ?=
BENCH_FLAGS ?=
FUZZTIME  ?= 30s
TEST_FLAGS ?= -race -count=1 -timeout 20m
# Against real Kafka: no race detector (its 5-10x slowdown beside a JVM on two
# cores turns timeouts into noise; the kfake run keeps it).
KAFKA_TEST_FLAGS ?= -count=1 -timeout 30m

.PHONY: build
build: ## build bin/chime
	$(GO) build -o $(BIN_DIR)/chime ./cmd/chime

.PHONY: run
run: build clickhouse ## run everything in one process: bin/chime dev $(RUN_FLAGS)
	$(BIN_DIR)/chime dev $(RUN_FLAGS)

.PHONY: vet
vet: ## go vet ./...
	$(GO) vet ./...

# Every .go file outside tool/build output and testdata (which go tooling skips).
GO_FILES_CMD := find . -type f -name '*.go' \
	-not -path './.git/*' -not -path './.tools/*' -not -path './$(BIN_DIR)/*' \
	-not -path './.chime/*' -not -path '*/testdata/*' -print0

.PHONY: fmt-check
fmt-check: ## fail listing the files gofmt would change
	@unformatted=$$($(GO_FILES_CMD) | xargs -0 -r gofmt -l); \
	if [ -n "$$unformatted" ]; then \
		echo "gofmt would change these files (run 'gofmt -w' on them):"; \
		echo "$$unformatted" | sed 's/^/  /'; \
		exit 1; \
	fi

.PHONY: fmt
fmt: ## gofmt -w every Go file
	$(GO_FILES_CMD) | xargs -0 -r gofmt -w

.PHONY: test
test: vet fmt-check check-generate clickhouse chromium ## vet, gofmt check, check-generate, local ClickHouse and Chromium, then go test -race ./...
	$(GO) test $(TEST_FLAGS) ./...

# The same suite against Apache Kafka: chime-kafka starts a KRaft node and runs
# go test with CHIME_TEST_BROKERS pointing at it; tests of broker faults start
# three-node clusters of their own from CHIME_KAFKA_LIBS.
.PHONY: test-kafka
test-kafka: $(KAFKA_STAMP) clickhouse chromium ## go test ./... against a real Apache Kafka node (KAFKA_TEST_FLAGS)
	$(GO) run ./cmd/chime-kafka -libs $(KAFKA_LIBS) -nodes $(KAFKA_NODES) -- $(GO) test $(KAFKA_TEST_FLAGS) ./...

.PHONY: lint
lint: $(STATICCHECK_STAMP) vet ## staticcheck ./... and go vet ./...
	$(STATICCHECK) ./...

.PHONY: bench
bench: build clickhouse $(KAFKA_STAMP) ## run the benchmark harness (chime dev end to end, failover on Apache Kafka, then each role alone): go run ./cmd/chime-bench $(BENCH_FLAGS)
	$(GO) run ./cmd/chime-bench -chime $(BIN_DIR)/chime $(BENCH_FLAGS)

# The figures beside River and asynq: ../shared/peers runs them and this
# checkout's chime dev on the same workload and prints one line per peer
# (its README). It writes bin/ and results/ inside its folder, so it runs
# from a copy in .tools/peers (the results stay there); it serves Redis and
# PostgreSQL from Debian's packages (apt, when missing). PEERS_FLAGS are
# run.sh's own settings, e.g. "SPREAD=60s DELAY=30s" for the steady
# workload (then PEERS_N is the jobs over the window).
PEERS_SRC   ?= $(CURDIR)/../shared/peers
PEERS_DIR   := $(TOOLS_DIR)/peers
PEERS       ?= river asynq chime
PEERS_N     ?= 100000
PEERS_FLAGS ?=
# PEERS_RUNS runs the harness that many times in a row (each run alternates
# the peers itself) and ends with the ratios' medians: the peers' own speed
# moves by half and more from one hour to the next on a 2-core machine, so one
# run says little about a change.
PEERS_RUNS  ?= 1
# The issue's two burst figures from a run's result lines: chime's
# dispatch rate over the better peer's, and its lag p99 over the lowest
# of theirs (each run's own peers; a steady run's lines are left alone).
PEERS_RATIO_AWK := /^peer=/ { delete v; for (i = 1; i <= NF; i++) { j = index($$i, "="); if (j) v[substr($$i, 1, j - 1)] = substr($$i, j + 1) } \
	if (v["spread_s"] != "0" || v["dispatch_per_s"] == "") next; \
	if (v["peer"] == "chime") { cr = v["dispatch_per_s"]; cl = v["lag_p99_ms"]; next } \
	if (v["dispatch_per_s"] + 0 > br) { br = v["dispatch_per_s"] + 0; bp = v["peer"] } \
	if (bl == "" || v["lag_p99_ms"] + 0 < bl) { bl = v["lag_p99_ms"] + 0; lp = v["peer"] } } \
	END { if (cr != "" && br > 0) printf "chime over the better peer: dispatch %.2fx (%d/s, %s %d/s), lag p99 %.2fx (%.0f ms, %s %.0f ms)\n", cr / br, cr, bp, br, cl / bl, cl, lp, bl }
# The medians of PEERS_RATIO_AWK's lines over the runs (the figures after
# "dispatch" and "p99"), and how many runs met issue 28's burst targets
# (dispatch at least 2x, lag p99 at most 0.5x).
PEERS_MEDIAN_AWK := function median(a, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t } \
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 } \
	{ n++; for (i = 1; i < NF; i++) { if ($$i == "dispatch") d[n] = $$(i + 1) + 0; if ($$i == "p99") l[n] = $$(i + 1) + 0 } if (d[n] >= 2) dm++; if (l[n] <= 0.5) lm++; if (d[n] >= 2 && l[n] <= 0.5) both++ } \
	END { if (n) printf "over %d runs: dispatch median %.2fx (>= 2x in %d), lag p99 median %.2fx (<= 0.5x in %d), both in %d of %d\n", n, median(d, n), dm, median(l, n), lm, both, n }
# peers-harness copies ../shared/peers to PEERS_DIR and installs the two
# datastores its peers need; PEERS_RUN is one run of it (the peers' own
# settings after it: env assignments for run.sh, then its N).
.PHONY: peers-harness
peers-harness: build clickhouse
	@test -x $(PEERS_SRC)/run.sh || { echo "bench-peers: no $(PEERS_SRC)/run.sh (the peers' harness, beside the checkout)"; exit 1; }
	@if ! command -v redis-server >/dev/null || ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		$(call apt_install,redis-server postgresql); \
	fi
	mkdir -p $(PEERS_DIR) && cp -rf $(PEERS_SRC)/. $(PEERS_DIR)/
PEERS_RUN = cd $(PEERS_DIR) && env CHIME_REPO=$(CURDIR) MODES=tuned TUNED_CONC= CHIME_ENQUEUE=api
PEERS_LAST = "$$(ls -t $(PEERS_DIR)/results/*.txt | head -1)"

.PHONY: bench-peers
bench-peers: peers-harness ## chime dev beside River and asynq (../shared/peers): PEERS_N (100000) jobs due at once, one line per peer; PEERS, PEERS_FLAGS, PEERS_RUNS (medians of several runs)
	@ratios=$$(mktemp); trap 'rm -f "$$ratios"' EXIT; \
	for i in $$(seq $(PEERS_RUNS)); do \
		echo "bench-peers: run $$i of $(PEERS_RUNS)"; \
		($(PEERS_RUN) PEERS="$(PEERS)" $(PEERS_FLAGS) ./run.sh $(PEERS_N)) || exit 1; \
		awk '$(PEERS_RATIO_AWK)' $(PEERS_LAST) | tee -a "$$ratios"; \
	done; \
	if [ $(PEERS_RUNS) -gt 1 ]; then awk '$(PEERS_MEDIAN_AWK)' "$$ratios"; fi

# Issue 28's sustained target beside the peers, in one run: the reference
# peers' burst (PEERS_REF, PEERS_N due at once) gives the better one's rate
# R; then chime dev gets PEERS_SUSTAIN_FACTOR x R jobs a second, due evenly
# over 60 s (run.sh's steady workload), and the line says whether the lag
# p99 of the jobs due in the window's last 10 s stayed within 1 s. The
# enqueue must end before the window opens: DELAY allows 25,000 creates a
# second, the API's rate on a loaded machine, and 15 s more.
PEERS_REF            ?= river asynq
PEERS_SUSTAIN_FACTOR ?= 2
PEERS_SUSTAIN_AWK := /^peer=/ { delete v; for (i = 1; i <= NF; i++) { j = index($$i, "="); if (j) v[substr($$i, 1, j - 1)] = substr($$i, j + 1) } \
	if (v["spread_s"] != "0" || v["dispatch_per_s"] == "") next; \
	if (v["dispatch_per_s"] + 0 > br) { br = v["dispatch_per_s"] + 0; bp = v["peer"] } } \
	END { if (br > 0) print bp, br }
PEERS_STEADY_AWK := /^peer=chime/ { delete v; for (i = 1; i <= NF; i++) { j = index($$i, "="); if (j) v[substr($$i, 1, j - 1)] = substr($$i, j + 1) } \
	ok = v["lag_tail_p99_ms"] != "" && v["lag_tail_p99_ms"] + 0 <= 1000 && v["missing"] == "0" && v["tail_missing"] == "0"; \
	printf "chime sustained at %sx the better peer'"'"'s burst (%s %d/s): offered %s/s, dispatched %s/s, lag p99 of the last %s s %s ms (target <= 1000), all %s ms, missing %s: %s\n", \
		f, bp, br, v["offered_per_s"], v["dispatch_per_s"], v["tail_s"], v["lag_tail_p99_ms"], v["lag_p99_ms"], v["missing"], ok ? "met" : "not met" }

.PHONY: bench-peers-sustain
bench-peers-sustain: peers-harness ## issue 28's sustained target in one run: the better of PEERS_REF's burst rate R, then chime dev offered PEERS_SUSTAIN_FACTOR (2) x R a second for 60 s; PEERS_RUNS
	@for i in $$(seq $(PEERS_RUNS)); do \
		echo "bench-peers-sustain: run $$i of $(PEERS_RUNS)"; \
		($(PEERS_RUN) PEERS="$(PEERS_REF)" ./run.sh $(PEERS_N)) || exit 1; \
		set -- $$(awk '$(PEERS_SUSTAIN_AWK)' $(PEERS_LAST)); \
		[ -n "$$2" ] || { echo "bench-peers-sustain: no burst rate from $(PEERS_REF)"; exit 1; }; \
		n=$$(( $$2 * $(PEERS_SUSTAIN_FACTOR) * 60 )); \
		($(PEERS_RUN) PEERS=chime SPREAD=60s DELAY=$$(( n / 25000 + 15 ))s ./run.sh $$n) || exit 1; \
		awk -v bp=$$1 -v br=$$2 -v f=$(PEERS_SUSTAIN_FACTOR) '$(PEERS_STEADY_AWK)' $(PEERS_LAST); \
	done

# go build optimises cmd/chime with cmd/chime/default.pgo (profile-guided
# optimisation, -pgo=auto): a CPU profile of make bench's burst, from 1 s
# before the instant, 10 s. Refresh it after the hot path changes.
PGO_PROFILE_FLAGS := -e2e-only -capacity=false -e2e-producer=false -e2e-steady 0 -e2e-pending 0 -e2e-idle 0 \
	-failover=false -api-standalone 0 -e2e-sustain '' -e2e-overload ''
.PHONY: pgo
pgo: build clickhouse ## refresh cmd/chime/default.pgo, the profile go build optimises chime with: make bench's burst, profiled
	@dir=$$(mktemp -d) && \
	$(GO) run ./cmd/chime-bench -chime $(BIN_DIR)/chime $(PGO_PROFILE_FLAGS) -e2e-profile-dir "$$dir" && \
	cp "$$dir/chime-burst-jobsbatch.pprof" cmd/chime/default.pgo && rm -rf "$$dir" && \
	echo "pgo: cmd/chime/default.pgo refreshed; make build to use it"

SOAK ?= 30m
.PHONY: soak
soak: build clickhouse ## soak: chime dev at 1,000 fires/s (5% failing, a breaker trip a minute) for SOAK (30m), sampled every minute
	$(GO) run ./cmd/chime-bench -chime $(BIN_DIR)/chime -soak $(SOAK)

# `go test -list` prints a package's matching names, then its "ok <pkg>" line:
# turn that into one "<pkg> <FuzzName>" line per target.
FUZZ_LIST_AWK := /^Fuzz/ { names = names " " $$1; next } /^ok/ { n = split(names, a, " "); for (i = 1; i <= n; i++) print $$2, a[i]; names = "" }

# Runs every Fuzz* target of every package for FUZZTIME each (go test -fuzz
# takes one target of one package at a time). New fuzz tests are picked up
# without touching this file.
.PHONY: fuzz
fuzz: ## run each Fuzz* target for FUZZTIME (default 30s)
	@targets=$$($(GO) test -list '^Fuzz' ./... | awk '$(FUZZ_LIST_AWK)'); \
	if [ -z "$$targets" ]; then echo "fuzz: no Fuzz* targets found"; exit 0; fi; \
	failed=""; \
	while read -r pkg name; do \
		echo "==> fuzz $$pkg $$name for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) "$$pkg" </dev/null || failed="$$failed $$pkg.$$name"; \
	done <<<"$$targets"; \
	if [ -n "$$failed" ]; then \
		echo "fuzz: failing targets (inputs saved under the package's testdata/fuzz/):"; \
		printf '  %s\n' $$failed; \
		exit 1; \
	fi

.PHONY: clean
clean: ## remove build and test output (keeps .tools/ and the .chime/ dev data)
	rm -rf $(BIN_DIR)
	rm -f *.test *.out *.prof *.pprof

.PHONY: clean-tools
clean-tools: ## remove .tools/
	rm -rf $(TOOLS_DIR)

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | \
		awk 'BEGIN { FS = ":.*## " } { printf "  %-15s %s\n", $$1, $$2 }'
