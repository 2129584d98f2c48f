//! Settings and secrets the plugin's policy grants it: the `[config]` table
//! of `<plugin>.toml` beside the `.wasm` file.

/// The value of `key`, or `None` when the policy does not grant it.
pub fn get(key: &str) -> Option<String> {
    crate::bindings::toolhost::plugin0_1_0::config::get(key)
}
