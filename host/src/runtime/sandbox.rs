//! What one call's sandbox holds, and the host side of every import of the
//! plugin world in one place: WASI with exactly the plugin's grants
//! (nothing by default), wasi:http through the allowlist hook, the
//! `config` import (the policy's values), the `client` import (the
//! call's `ClientChannel`, if any), the `source` import (the source
//! file a language runtime runs) and the `http` import (the runtimes'
//! outbound requests, sent by `outbound.rs`). The memory limiter is in
//! `memory_cap.rs`, the bounded stdout/stderr capture in `log_capture.rs`.
//!
//! A new [`Sandbox`] is built for every call (and every tool listing), so
//! nothing a plugin did in one call is visible in the next. A large
//! plugin's spare instance (`warm.rs`) has answered `list-tools` in its
//! sandbox before its call: what that listing left (memory, open files)
//! is the plugin's own, never a caller's.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::bindings::toolhost::plugin0_1_0::{client, config};
use super::bindings::toolhost::plugin0_2_0::{http, input, source};
use super::client::{AskError, CallClient, ELICIT, InputRequest, LogLevel, SAMPLE};
use super::grants::{Grants, HttpAllowlist};
use super::log_capture::LogCapture;
use super::memory_cap::MemoryCap;
use super::outbound::{self, Outbound};

/// The data of a wasmtime `Store` for one call.
pub(crate) struct Sandbox {
    /// The client behind the call, for the `client` import.
    pub(crate) client: CallClient,
    /// How many single requests (elicitation, sampling) the plugin made,
    /// for their keys: `elicitation-1`, `sampling-1`, ...
    asked: (u32, u32),
    /// What the plugin's policy grants (read by the `config` import).
    pub(crate) grants: Arc<Grants>,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    http_hooks: HttpAllowlist,
    /// The `http` import's requests (the language runtimes'), and what
    /// they used.
    pub(crate) outbound: Outbound,
    table: ResourceTable,
    pub(crate) limiter: MemoryCap,
    pub(crate) stdout: LogCapture,
    pub(crate) stderr: LogCapture,
}

impl Sandbox {
    /// A fresh sandbox for one call of `plugin`. Fails only if a granted
    /// directory can no longer be opened.
    pub(crate) fn new(
        plugin: Arc<str>,
        grants: Arc<Grants>,
        client: CallClient,
    ) -> std::io::Result<Self> {
        let stdout = LogCapture::default();
        let stderr = LogCapture::default();
        // Deny by default: no arguments, no stdin, no sockets and no name
        // lookups ever (outbound HTTP goes through wasi:http and its
        // allowlist instead); environment and directories only as granted.
        // Clocks and randomness stay, because they open nothing.
        let mut wasi = WasiCtx::builder();
        wasi.stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .envs(&grants.env);
        let runtime_dirs = grants.source.iter().flat_map(|source| &source.dirs);
        for dir in grants.dirs.iter().chain(runtime_dirs) {
            let perms = if dir.writable {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            wasi.preopened_dir(&dir.host, &dir.guest, perms)
                .map_err(|e| std::io::Error::other(format!("{}: {e}", dir.host.display())))?;
        }
        let outbound = Outbound::new(
            plugin.clone(),
            grants.http_allow.clone(),
            grants.outbound,
            grants.limits.timeout,
        );
        let http_hooks = HttpAllowlist {
            plugin,
            allow: grants.http_allow.clone(),
        };
        Ok(Sandbox {
            client,
            asked: (0, 0),
            limiter: MemoryCap::new(grants.limits.memory_bytes),
            grants,
            wasi: wasi.build(),
            http: WasiHttpCtx::new(),
            http_hooks,
            outbound,
            table: ResourceTable::new(),
            stdout,
            stderr,
        })
    }
}

impl WasiView for Sandbox {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for Sandbox {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.http_hooks,
        }
    }
}

impl source::Host for Sandbox {
    /// The source file this plugin's runtime runs; empty for a plugin
    /// that is no source (only the language runtimes import this).
    async fn read(&mut self) -> (String, String) {
        match &self.grants.source {
            Some(file) => (file.name.to_string(), file.text.to_string()),
            None => (String::new(), String::new()),
        }
    }

    /// The packages the source imports, for the JavaScript runtime.
    async fn modules(&mut self) -> Vec<(String, String)> {
        match &self.grants.source {
            Some(file) => file.modules.clone(),
            None => Vec::new(),
        }
    }
}

impl http::Host for Sandbox {
    /// One outbound request, through the allowlist and the call's limits
    /// (`outbound.rs`); the error is the sentence the author reads.
    async fn send(&mut self, request: http::Request) -> Result<http::Response, String> {
        let request = outbound::Request {
            method: request.method,
            url: request.url,
            headers: request.headers,
            body: request.body,
            timeout: request
                .timeout_ms
                .map(|millis| std::time::Duration::from_millis(millis.into())),
            follow_redirects: request.follow_redirects,
        };
        match self.outbound.send(request).await {
            Ok(response) => Ok(http::Response {
                status: response.status,
                url: response.url,
                headers: response.headers,
                body: response.body,
            }),
            Err(refused) => Err(refused.to_string()),
        }
    }
}

impl config::Host for Sandbox {
    async fn get(&mut self, key: String) -> Option<String> {
        self.grants.config.get(&key).cloned()
    }
}

impl client::Host for Sandbox {
    async fn log(&mut self, level: LogLevel, message: String) {
        if let Some(client) = &self.client {
            client.log(level, message).await;
        }
    }

    async fn progress(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        if let Some(client) = &self.client {
            client.progress(progress, total, message).await;
        }
    }

    // The WIT import returns `result<string, string>`: the error is its
    // sentence.
    async fn create_message(&mut self, params: String) -> Result<String, String> {
        self.asked.1 += 1;
        let key = format!("sampling-{}", self.asked.1);
        self.ask_one(key, SAMPLE, params)
            .await
            .map_err(|error| error.to_string())
    }

    async fn elicit(&mut self, params: String) -> Result<String, String> {
        self.asked.0 += 1;
        let key = format!("elicitation-{}", self.asked.0);
        self.ask_one(key, ELICIT, params)
            .await
            .map_err(|error| error.to_string())
    }
}

impl Sandbox {
    async fn ask_one(
        &mut self,
        key: String,
        method: &str,
        params: String,
    ) -> Result<String, AskError> {
        let request = InputRequest {
            key,
            method: method.into(),
            params,
        };
        match self.client.clone() {
            Some(client) => client
                .ask(vec![request])
                .await
                .pop()
                .unwrap_or(Err(AskError::NoAnswer)),
            None => Err(AskError::NoClient),
        }
    }
}

impl input::Host for Sandbox {
    // The WIT import returns `list<result<string, string>>`: each error is
    // its sentence.
    async fn ask(&mut self, requests: Vec<input::Request>) -> Vec<Result<String, String>> {
        let count = requests.len();
        match self.client.clone() {
            Some(client) => {
                let requests = requests
                    .into_iter()
                    .map(|request| InputRequest {
                        key: request.key,
                        method: request.method,
                        params: request.params,
                    })
                    .collect();
                client
                    .ask(requests)
                    .await
                    .into_iter()
                    .map(|answer| answer.map_err(|error| error.to_string()))
                    .collect()
            }
            None => vec![Err(AskError::NoClient.to_string()); count],
        }
    }
}
