# The two commands a fresh machine needs:
#   make serve   build everything and serve the example plugins on 127.0.0.1:8000
#   make test    run every test
# Both add the wasm32-wasip2 target first if it is missing.

.PHONY: serve test plugins target lint

serve: plugins
	cargo run --release -p toolhost -- serve --plugins plugins

test: target
	cargo test --workspace

# Builds the example plugins and copies the components into plugins/, the
# default drop folder.
plugins: target
	cd plugins && cargo build --release --target wasm32-wasip2
	cp plugins/target/wasm32-wasip2/release/*.wasm plugins/

target:
	@rustup target list --installed | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	cd plugins && cargo fmt --all -- --check && cargo clippy --target wasm32-wasip2 -- -D warnings
	cd tests/fixtures && cargo fmt --all -- --check && cargo clippy --target wasm32-wasip2 -- -D warnings
