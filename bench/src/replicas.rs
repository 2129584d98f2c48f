//! Section 15 of the harness: many machines, on this one.
//! Debian's docker-registry and haproxy on loopback, plugins pushed and
//! signed with `toolhost push`, replicas verifying them (`--verify-key`).
//!
//! Rows:
//! - a signed re-push to serving, per replica (`poll_secs = 1`: up to a
//!   second of it is waiting for the next poll);
//! - a replica's cold start with 100 OCI-sourced plugins and an empty
//!   cache (every plugin resolved, verified, pulled, compiled), and its
//!   restart with the cache kept;
//! - requests per second through haproxy with 1, 2 and 3 replicas (wrk
//!   c=16, echo), beside one replica alone.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::benchtool::patched;
use super::options::BenchOptions;
use super::probes::{Spawned, toolhost_binary, wrk};
use super::report::Report;
use super::wire::{request, wait_until_for};

const SECTION: &str = "replicas";

/// A child process killed on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Killed {
    /// Starts `command` with its output discarded; `what` names it in the
    /// error (`make bench` installs both programs this section runs).
    fn spawn(command: &mut Command, what: &str) -> anyhow::Result<Killed> {
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| anyhow::anyhow!("running {what} (make bench installs it): {e}"))?;
        Ok(Killed(child))
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn registry(work: &Path) -> anyhow::Result<(Killed, String)> {
    let address = format!("127.0.0.1:{}", free_port()?);
    let config = work.join("registry.yml");
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {address}\n",
            work.join("registry-store").display()
        ),
    )?;
    let child = Killed::spawn(
        Command::new("docker-registry").arg("serve").arg(&config),
        "docker-registry",
    )?;
    let up: SocketAddr = address.parse()?;
    wait_until_for(Duration::from_secs(20), || {
        request(up, "GET", "/v2/", "").is_ok_and(|(status, _)| status == 200)
    })?;
    Ok((child, address))
}

fn push(file: &Path, target: &str, key: &Path) -> anyhow::Result<()> {
    let output = Command::new(toolhost_binary())
        .arg("push")
        .arg(file)
        .arg(target)
        .arg("--sign-key")
        .arg(key)
        .output()?;
    anyhow::ensure!(
        output.status.success(),
        "push failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

fn serving_hash(address: SocketAddr, id: &str) -> Option<String> {
    let (_, body) = request(address, "GET", "/plugins", "").ok()?;
    let report: Value = serde_json::from_str(&body).ok()?;
    report["plugins"]
        .as_array()?
        .iter()
        .find(|plugin| plugin["id"] == id)?["contentHash"]
        .as_str()
        .map(str::to_string)
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("{:x}", sha2::Sha256::digest(bytes))
}

fn haproxy(work: &Path, backends: &[SocketAddr]) -> anyhow::Result<(Killed, SocketAddr)> {
    let port = free_port()?;
    let template = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/haproxy.cfg"),
    )?;
    let servers: String = backends
        .iter()
        .enumerate()
        .map(|(index, address)| format!("    server replica{index} {address} check\n"))
        .collect();
    let config = template
        .replace("bind :8000", &format!("bind 127.0.0.1:{port}"))
        .replace(
            "    server-template replica 3 toolhost:8000 check resolvers dns init-addr none\n",
            &servers,
        );
    let path = work.join(format!("haproxy-{}.cfg", backends.len()));
    std::fs::write(&path, config)?;
    let program = if Path::new("/usr/sbin/haproxy").exists() {
        "/usr/sbin/haproxy"
    } else {
        "haproxy"
    };
    let child = Killed::spawn(
        Command::new(program).arg("-db").arg("-f").arg(&path),
        "haproxy",
    )?;
    let address: SocketAddr = format!("127.0.0.1:{port}").parse()?;
    // Every replica up in haproxy's checks: a call reaches each.
    wait_until_for(Duration::from_secs(20), || {
        (0..backends.len() * 2).all(|_| {
            request(address, "POST", "/tools/echo", r#"{"text":"up"}"#)
                .is_ok_and(|(status, _)| status == 200)
        })
    })?;
    std::thread::sleep(Duration::from_secs(2));
    Ok((child, address))
}

fn policy(dir: &Path, id: &str, reference: &str, poll_secs: u64) -> anyhow::Result<()> {
    std::fs::write(
        dir.join(format!("{id}.toml")),
        format!("[source]\noci = \"{reference}\"\npoll_secs = {poll_secs}\n"),
    )?;
    Ok(())
}

/// An EC P-256 key pair made by openssl.
fn key_pair(work: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let (private, public) = (work.join("bench.key"), work.join("bench.pub"));
    let made = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl ecparam -genkey -name prime256v1 -noout | openssl pkcs8 -topk8 -nocrypt -out {0} && openssl ec -in {0} -pubout -out {1}",
            private.display(),
            public.display()
        ))
        .stderr(Stdio::null())
        .status()?;
    anyhow::ensure!(made.success(), "openssl made no key");
    Ok((private, public))
}

pub(super) fn section(
    options: &BenchOptions,
    work: &Path,
    benchtool: &[u8],
    duration: &str,
    report: &mut Report,
) -> anyhow::Result<()> {
    let work = work.join("replicas");
    std::fs::create_dir_all(&work)?;
    let (key, public) = key_pair(&work)?;
    let (_registry, registry) = registry(&work)?;
    let echo = std::fs::read(&options.echo)?;
    let variant = |tag: u8| -> anyhow::Result<PathBuf> {
        // A custom section: other bytes, the same behaviour.
        let mut bytes = echo.clone();
        let name = b"toolhost-bench";
        bytes.extend_from_slice(&[0, (name.len() + 2) as u8, name.len() as u8]);
        bytes.extend_from_slice(name);
        bytes.push(tag);
        let path = work.join(format!("echo-{tag}.wasm"));
        std::fs::write(&path, bytes)?;
        Ok(path)
    };
    let target = format!("oci://{registry}/tools/echo:stable");
    push(&variant(1)?, &target, &key)?;

    let folder = work.join("folder");
    std::fs::create_dir_all(&folder)?;
    policy(&folder, "echo", &target, 1)?;
    let verify = ["--verify-key", public.to_str().unwrap_or_default()];
    let replicas: Vec<Spawned> = (0..3)
        .map(|index| Spawned::serve(&folder, &work.join(format!("cache-{index}")), &verify))
        .collect::<anyhow::Result<_>>()?;

    // A signed re-push, to serving on each replica.
    let second = variant(2)?;
    let expected = sha256_hex(&std::fs::read(&second)?);
    push(&second, &target, &key)?;
    let pushed = Instant::now();
    let mut reached = vec![None; replicas.len()];
    wait_until_for(Duration::from_secs(30), || {
        for (index, replica) in replicas.iter().enumerate() {
            if reached[index].is_none()
                && serving_hash(replica.address, "echo").as_deref() == Some(&expected)
            {
                reached[index] = Some(pushed.elapsed());
            }
        }
        reached.iter().all(Option::is_some)
    })?;
    let reached: Vec<f64> = reached
        .iter()
        .map(|at| at.unwrap_or_default().as_secs_f64() * 1e3)
        .collect();
    report.record(
        SECTION,
        "signed re-push to serving, per replica ms (poll_secs = 1)",
        json!(reached),
        reached
            .iter()
            .map(|ms| format!("{ms:.0}"))
            .collect::<Vec<_>>()
            .join(" / "),
    );

    // Requests per second through haproxy, 1 to 3 replicas.
    let body = r#"{"text":"hello"}"#;
    let alone = wrk(
        &work,
        replicas[0].child.id(),
        replicas[0].address,
        "POST",
        "/tools/echo",
        body,
        16,
        duration,
    )?;
    let mut through = Vec::new();
    for count in 1..=replicas.len() {
        let backends: Vec<SocketAddr> = replicas[..count].iter().map(|r| r.address).collect();
        let (_balancer, address) = haproxy(&work, &backends)?;
        let run = wrk(
            &work,
            replicas[0].child.id(),
            address,
            "POST",
            "/tools/echo",
            body,
            16,
            duration,
        )?;
        through.push(run.rps);
    }
    report.record(
        SECTION,
        "REST c=16 req/s: one replica direct / haproxy over 1, 2, 3",
        json!({ "direct": alone.rps, "haproxy": through }),
        format!(
            "{:.0} / {}",
            alone.rps,
            through
                .iter()
                .map(|rps| format!("{rps:.0}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    drop(replicas);

    // A replica's cold start with 100 OCI-sourced plugins.
    let count = if options.quick { 5 } else { 100 };
    let many = work.join("many");
    std::fs::create_dir_all(&many)?;
    for index in 0..count {
        let file = work.join(format!("p{index:03}.wasm"));
        std::fs::write(&file, patched(benchtool, 20_000 + index)?)?;
        let reference = format!("oci://{registry}/tools/p{index:03}:1");
        push(&file, &reference, &key)?;
        policy(&many, &format!("p{index:03}"), &reference, 30)?;
    }
    let cache = work.join("cache-many");
    let started = Instant::now();
    let cold = Spawned::serve(&many, &cache, &verify)?;
    let cold_ms = started.elapsed().as_secs_f64() * 1e3;
    let listed = serde_json::from_str::<Value>(&request(cold.address, "GET", "/tools", "")?.1)?
        .as_array()
        .map_or(0, Vec::len);
    anyhow::ensure!(listed == count * 10, "{listed} tools listed");
    drop(cold);
    let started = Instant::now();
    let warm = Spawned::serve(&many, &cache, &verify)?;
    let warm_ms = started.elapsed().as_secs_f64() * 1e3;
    drop(warm);
    report.record(
        SECTION,
        &format!("{count} OCI plugins: cold start, empty cache / restart, cache kept ms"),
        json!([cold_ms, warm_ms]),
        format!("{cold_ms:.0} / {warm_ms:.0}"),
    );
    Ok(())
}
