//! The benchtool fixture (`tests/fixtures/benchtool`) made into many
//! distinct plugins: its tool-name marker replaced by a prefix per copy.

/// The marker `tests/fixtures/benchtool` names its tools from.
const BENCHTOOL_MARKER: &[u8] = b"BENCHTOOL_PREFIX_0000000";

pub(crate) fn tool_name(index: usize) -> String {
    format!("{}_0", prefix(index))
}

fn prefix(index: usize) -> String {
    format!("bench_tool_{index:013}")
}

/// The benchtool component with its tool-name marker replaced.
pub(crate) fn patched(benchtool: &[u8], index: usize) -> anyhow::Result<Vec<u8>> {
    let at = benchtool
        .windows(BENCHTOOL_MARKER.len())
        .position(|window| window == BENCHTOOL_MARKER)
        .ok_or_else(|| anyhow::anyhow!("the benchtool marker is missing"))?;
    let name = prefix(index);
    anyhow::ensure!(name.len() == BENCHTOOL_MARKER.len(), "prefix length");
    let mut bytes = benchtool.to_vec();
    bytes[at..at + name.len()].copy_from_slice(name.as_bytes());
    Ok(bytes)
}
