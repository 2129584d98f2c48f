//! The measuring instruments of `toolhost bench`: wrk runs and their
//! parsing, percentiles, resident memory, and the server processes under
//! test.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The folder watcher's debounce every server under test is given.
pub(crate) const DEBOUNCE_MS: u64 = 50;

pub(super) struct WrkResult {
    pub rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// CPU time (user + system) the server spent per request: what the
    /// server itself costs, apart from wrk, which shares the cores.
    pub server_cpu_us: f64,
}

/// Runs wrk against the server `server` (a pid, for its CPU time).
#[allow(clippy::too_many_arguments)]
pub(super) fn wrk(
    work: &Path,
    server: u32,
    address: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
    connections: usize,
    duration: &str,
) -> anyhow::Result<WrkResult> {
    wrk_as(
        work,
        server,
        address,
        (method, path, body),
        None,
        connections,
        duration,
    )
}

/// The echo (`POST path`, `{"text":"hello"}`: `/tools/echo` over REST)
/// under wrk at c=16 for `duration`: the call most rows compare.
pub(super) fn wrk_echo(
    work: &Path,
    server: &Spawned,
    path: &str,
    duration: &str,
) -> anyhow::Result<WrkResult> {
    wrk(
        work,
        server.child.id(),
        server.address,
        "POST",
        path,
        r#"{"text":"hello"}"#,
        16,
        duration,
    )
}

/// [`wrk`] with `Authorization: Bearer TOKEN` when `token` is given.
pub(super) fn wrk_as(
    work: &Path,
    server: u32,
    address: SocketAddr,
    request: (&str, &str, &str),
    token: Option<&str>,
    connections: usize,
    duration: &str,
) -> anyhow::Result<WrkResult> {
    let bearer = token.map(|token| format!("Bearer {token}"));
    let headers: Vec<(&str, &str)> = bearer
        .as_deref()
        .map(|bearer| ("Authorization", bearer))
        .into_iter()
        .collect();
    wrk_with(
        work,
        server,
        address,
        request,
        &headers,
        connections,
        duration,
    )
}

/// [`wrk`] with more headers (or JSON's `Accept` replaced).
pub(super) fn wrk_with(
    work: &Path,
    server: u32,
    address: SocketAddr,
    (method, path, body): (&str, &str, &str),
    headers: &[(&str, &str)],
    connections: usize,
    duration: &str,
) -> anyhow::Result<WrkResult> {
    let script = work.join(format!("wrk-{}.lua", std::process::id()));
    let mut lines = format!(
        "wrk.method = {method:?}\nwrk.body = [[{body}]]\nwrk.headers[\"Content-Type\"] = \"application/json\"\nwrk.headers[\"Accept\"] = \"application/json, text/event-stream\"\n"
    );
    for (name, value) in headers {
        lines.push_str(&format!("wrk.headers[{name:?}] = {value:?}\n"));
    }
    std::fs::write(&script, lines)?;
    let cpu_before = cpu_seconds(server)?;
    let output = Command::new("wrk")
        .args([
            "-t",
            &connections.min(2).to_string(),
            "-c",
            &connections.to_string(),
            "-d",
            duration,
            "--latency",
            "-s",
        ])
        .arg(&script)
        .arg(format!("http://{address}{path}"))
        .output()
        .map_err(|e| anyhow::anyhow!("running wrk (install it: apt-get install wrk): {e}"))?;
    let cpu = cpu_seconds(server)? - cpu_before;
    let text = String::from_utf8_lossy(&output.stdout);
    anyhow::ensure!(
        !text.contains("Non-2xx"),
        "wrk saw errors from {path}:\n{text}"
    );
    let value_after = |label: &str| -> Option<&str> {
        text.lines()
            .find_map(|line| line.trim().strip_prefix(label))
            .map(str::trim)
    };
    let rps = value_after("Requests/sec:")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    // "12345 requests in 5.00s, ..."
    let requests: f64 = text
        .lines()
        .find_map(|line| line.trim().split_once(" requests in "))
        .and_then(|(count, _)| count.trim().parse().ok())
        .unwrap_or(f64::NAN);
    Ok(WrkResult {
        rps,
        server_cpu_us: cpu * 1e6 / requests,
        p50_ms: value_after("50%").map(wrk_ms).unwrap_or(f64::NAN),
        p99_ms: value_after("99%").map(wrk_ms).unwrap_or(f64::NAN),
    })
}

/// wrk prints latencies as `812.00us`, `1.20ms` or `1.01s`.
pub(super) fn wrk_ms(text: &str) -> f64 {
    let split = text
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    let number: f64 = text[..split].parse().unwrap_or(f64::NAN);
    match &text[split..] {
        "us" => number / 1e3,
        "s" => number * 1e3,
        "m" => number * 60e3,
        _ => number,
    }
}

pub(super) fn percentile(samples: &[f64], p: f64) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let rank = ((p / 100.0) * (sorted.len().saturating_sub(1)) as f64).round() as usize;
    sorted.get(rank).copied().unwrap_or(f64::NAN)
}

pub(super) fn resident_mib(pid: u32) -> anyhow::Result<f64> {
    status_mib(pid, "VmRSS:")
}

/// The largest resident set so far (VmHWM), in MiB.
pub(super) fn peak_resident_mib(pid: u32) -> anyhow::Result<f64> {
    status_mib(pid, "VmHWM:")
}

/// A `kB` field of /proc/<pid>/status, in MiB.
fn status_mib(pid: u32, field: &str) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(f64::NAN);
    Ok(kib / 1024.0)
}

/// User plus system CPU time of a process so far, from /proc/<pid>/stat
/// (in clock ticks of 1/100 s: USER_HZ is 100 on every Linux ABI the host
/// builds for).
pub(super) fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name, which is in parentheses and may hold
    // spaces: state is field 3, utime 14, stime 15.
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |index: usize| -> f64 {
        fields
            .get(index - 3)
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    };
    Ok((ticks(14) + ticks(15)) / 100.0)
}

pub(super) fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cores} cores, {cpu}")
}

pub(super) fn tempfile_dir(name: &str) -> std::io::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The `toolhost` binary every server of the harness runs: `--toolhost`,
/// or by default the one beside this binary (cargo builds both into the
/// same target folder).
pub(super) static TOOLHOST: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

pub(super) fn toolhost_binary() -> PathBuf {
    TOOLHOST
        .get()
        .cloned()
        .or_else(|| Some(std::env::current_exe().ok()?.with_file_name("toolhost")))
        .unwrap_or_else(|| PathBuf::from("toolhost"))
}

/// What the measured binary's `--version` prints, e.g. `toolhost 0.1.0
/// (profile release)`.
pub(super) fn toolhost_version() -> anyhow::Result<String> {
    let output = Command::new(toolhost_binary()).arg("--version").output()?;
    anyhow::ensure!(output.status.success(), "toolhost --version failed");
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// A child process that printed `listening on http://ADDR`; killed on drop.
pub(super) struct Spawned {
    pub child: Child,
    pub address: SocketAddr,
}

impl Spawned {
    pub(super) fn serve(plugins: &Path, cache: &Path, extra: &[&str]) -> anyhow::Result<Spawned> {
        Self::serve_with(&toolhost_binary(), plugins, cache, extra)
    }

    /// [`Spawned::serve`] with another build of toolhost.
    pub(super) fn serve_with(
        binary: &Path,
        plugins: &Path,
        cache: &Path,
        extra: &[&str],
    ) -> anyhow::Result<Spawned> {
        let mut command = Command::new(binary);
        command
            .arg("serve")
            .arg("--plugins")
            .arg(plugins)
            .arg("--cache-dir")
            .arg(cache)
            .args([
                "--listen",
                "127.0.0.1:0",
                "--debounce-ms",
                &DEBOUNCE_MS.to_string(),
            ])
            .args(extra)
            .env("TOOLHOST_LOG", "info,rmcp=warn");
        Self::start(&mut command)
    }

    pub(super) fn start(command: &mut Command) -> anyhow::Result<Spawned> {
        Self::start_marked(command, "listening on http://")
    }

    /// [`Spawned::start`] for a server that tells its address after
    /// `marker` on stderr (`wasmtime serve`: "Serving HTTP on http://").
    pub(super) fn start_marked(command: &mut Command, marker: &str) -> anyhow::Result<Spawned> {
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stderr"))?;
        let mut lines = BufReader::new(stderr);
        let mut line = String::new();
        let address = loop {
            line.clear();
            if lines.read_line(&mut line)? == 0 {
                anyhow::bail!("the server exited before listening");
            }
            if let Some(rest) = line.split(marker).nth(1) {
                let address = rest.split_whitespace().next().unwrap_or("");
                break address.trim_end_matches('/').parse()?;
            }
        };
        // Keep draining the log so the child never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = lines.read_to_end(&mut sink);
        });
        Ok(Spawned { child, address })
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `toolhost bench-baseline`: the bare axum handler REST is measured
/// against: the same JSON echo with no plugin behind it.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_latencies_are_read_in_milliseconds() {
        assert_eq!(wrk_ms("812.00us"), 0.812);
        assert_eq!(wrk_ms("1.20ms"), 1.2);
        assert_eq!(wrk_ms("1.50s"), 1500.0);
    }

    #[test]
    fn percentiles_pick_the_ranked_sample() {
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&samples, 50.0), 51.0);
        assert_eq!(percentile(&samples, 99.0), 99.0);
    }
}
