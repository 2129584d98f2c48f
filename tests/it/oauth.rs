//! OAuth 2.1 access tokens through the real binary: an authorization
//! server served by the test itself on loopback (its metadata, a JWKS of
//! keys `openssl` makes for this run, a client-credentials token
//! endpoint), `toolhost serve --auth-issuer … --auth-audience …` beside a
//! tokens file, and the official TypeScript SDK client finding its way
//! from a 401 to a token on its own.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use base64::Engine as _;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use crate::support::{Server, example, plugin_dir};

const AUDIENCE: &str = "toolhost-oauth-test";
const CLIENT_ID: &str = "agent-7";
const CLIENT_SECRET: &str = "agent-7-secret";
const CAROL: &str = "carol-secret-0123456789";

/// A private key made by openssl for this run (PKCS#8 PEM), as
/// jsonwebtoken signs with it, and its public JWK under `kid`.
struct Key {
    encoding: EncodingKey,
    algorithm: Algorithm,
    kid: String,
}

impl Key {
    fn make(dir: &Path, kid: &str, algorithm: Algorithm) -> Key {
        let file = dir.join(format!("{kid}.pem"));
        let spec: &[&str] = match algorithm {
            Algorithm::ES256 => &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
            _ => &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
        };
        let made = Command::new("openssl")
            .arg("genpkey")
            .args(spec)
            .arg("-out")
            .arg(&file)
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(made.success(), "openssl made no key");
        let pem = std::fs::read(&file).unwrap();
        let encoding = match algorithm {
            Algorithm::ES256 => EncodingKey::from_ec_pem(&pem).unwrap(),
            _ => EncodingKey::from_rsa_pem(&pem).unwrap(),
        };
        Key {
            encoding,
            algorithm,
            kid: kid.into(),
        }
    }

    fn jwk(&self) -> Jwk {
        let mut jwk = Jwk::from_encoding_key(&self.encoding, self.algorithm).unwrap();
        jwk.common.key_id = Some(self.kid.clone());
        jwk
    }

    /// A token with these claims, its header naming `kid`.
    fn sign(&self, kid: &str, claims: &Value) -> String {
        let mut header = Header::new(self.algorithm);
        header.kid = Some(kid.into());
        jsonwebtoken::encode(&header, claims, &self.encoding).unwrap()
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// What the authorization server serves and saw.
#[derive(Clone)]
struct IssuerState {
    base: String,
    keys: Arc<Mutex<Vec<Jwk>>>,
    signer: Arc<Key>,
    jwks_fetches: Arc<AtomicUsize>,
    token_requests: Arc<Mutex<Vec<HashMap<String, String>>>>,
}

/// The test's authorization server on a loopback port, in a thread of its
/// own; it stops with the test process.
fn start_issuer(signer: Arc<Key>, keys: Vec<Jwk>) -> IssuerState {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let state = IssuerState {
        base: format!("http://{}", listener.local_addr().unwrap()),
        keys: Arc::new(Mutex::new(keys)),
        signer,
        jwks_fetches: Arc::new(AtomicUsize::new(0)),
        token_requests: Arc::new(Mutex::new(Vec::new())),
    };
    let app = axum::Router::new()
        .route("/.well-known/oauth-authorization-server", get(metadata))
        .route("/jwks", get(jwks))
        .route("/token", post(token))
        .with_state(state.clone());
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    state
}

async fn metadata(State(state): State<IssuerState>) -> axum::Json<Value> {
    let base = &state.base;
    axum::Json(json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "jwks_uri": format!("{base}/jwks"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["client_credentials"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
    }))
}

async fn jwks(State(state): State<IssuerState>) -> axum::Json<JwkSet> {
    state.jwks_fetches.fetch_add(1, Ordering::SeqCst);
    axum::Json(JwkSet {
        keys: state.keys.lock().unwrap().clone(),
    })
}

/// The client-credentials grant (RFC 6749 4.4) with `client_secret_basic`.
async fn token(
    State(state): State<IssuerState>,
    headers: HeaderMap,
    body: String,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let form: HashMap<String, String> = serde_urlencoded::from_str(&body).unwrap_or_default();
    state.token_requests.lock().unwrap().push(form.clone());
    let basic = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|v| base64::engine::general_purpose::STANDARD.decode(v).ok())
        .map(|v| String::from_utf8_lossy(&v).to_string());
    if basic.as_deref() != Some(&format!("{CLIENT_ID}:{CLIENT_SECRET}"))
        || form.get("grant_type").map(String::as_str) != Some("client_credentials")
    {
        return (
            axum::http::StatusCode::UNAUTHORIZED,
            axum::Json(json!({"error": "invalid_client"})),
        )
            .into_response();
    }
    let scope = form.get("scope").cloned().unwrap_or_default();
    let claims = json!({
        "iss": state.base, "aud": AUDIENCE, "sub": CLIENT_ID, "scope": scope,
        "iat": now(), "exp": now() + 300,
    });
    let signer = &state.signer;
    axum::Json(json!({
        "access_token": signer.sign(&signer.kid, &claims),
        "token_type": "Bearer",
        "expires_in": 300,
        "scope": scope,
    }))
    .into_response()
}

/// One answer: status, `WWW-Authenticate`, JSON body.
struct Answer {
    status: u16,
    challenge: String,
    body: Value,
}

fn send(
    server: &Server,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: impl AsRef<[u8]>,
) -> Answer {
    let kind = if method == "PUT" {
        "application/wasm"
    } else {
        "application/json"
    };
    let (status, challenge, body) =
        crate::support::exchange(server, method, path, token, kind, body.as_ref());
    Answer {
        status,
        challenge,
        body,
    }
}

const ECHO: &str = r#"{"text":"hi"}"#;
const MCP_CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#;

#[test]
fn access_tokens_from_an_issuer_are_validated_and_scoped() {
    let keys = tempfile::tempdir().unwrap();
    let es = Arc::new(Key::make(keys.path(), "es-1", Algorithm::ES256));
    let rs = Key::make(keys.path(), "rs-1", Algorithm::RS256);
    // Not published: signs with the published key's kid.
    let stranger = Key::make(keys.path(), "es-1", Algorithm::ES256);
    let rotated = Key::make(keys.path(), "es-2", Algorithm::ES256);
    let issuer = start_issuer(es.clone(), vec![es.jwk(), rs.jwk()]);

    let dir = plugin_dir(&[&example("echo")]);
    let config = tempfile::tempdir().unwrap();
    let tokens = config.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        format!("[[token]]\nname = \"carol\"\nsecret = \"{CAROL}\"\nrole = \"caller\"\n"),
    )
    .unwrap();
    let server = Server::start(
        dir.path(),
        &[
            "--auth-issuer",
            &issuer.base,
            "--auth-audience",
            AUDIENCE,
            "--tokens",
            tokens.to_str().unwrap(),
        ],
    );
    let host = server.base.trim_start_matches("http://").to_string();
    let metadata_url = format!("http://{host}/.well-known/oauth-protected-resource");

    // RFC 9728: the resource, its issuer and the scopes; open to anyone.
    let document = send(
        &server,
        "GET",
        "/.well-known/oauth-protected-resource",
        None,
        "",
    );
    assert_eq!(document.status, 200, "{}", document.body);
    assert_eq!(document.body["resource"], format!("http://{host}"));
    assert_eq!(document.body["authorization_servers"], json!([issuer.base]));
    for scope in ["tools:call", "plugins:publish", "admin"] {
        assert!(
            document.body["scopes_supported"]
                .as_array()
                .unwrap()
                .contains(&json!(scope)),
            "{}",
            document.body
        );
    }
    assert_eq!(
        send(
            &server,
            "GET",
            "/.well-known/oauth-protected-resource/mcp",
            None,
            ""
        )
        .body,
        document.body
    );

    // No token: 401 pointing at the metadata, over REST and MCP.
    for (path, body) in [("/tools/echo", ECHO), ("/mcp", MCP_CALL)] {
        let refused = send(&server, "POST", path, None, body);
        assert_eq!(refused.status, 401, "{path}: {}", refused.body);
        assert_eq!(
            refused.challenge,
            format!("Bearer resource_metadata=\"{metadata_url}\""),
            "{path}"
        );
    }
    assert_eq!(
        send(&server, "GET", "/tools", None, "").body["error"]["code"],
        "UNAUTHORIZED"
    );

    let claims = |scope: &str| {
        json!({"iss": issuer.base, "aud": AUDIENCE, "sub": "ada", "scope": scope,
               "iat": now(), "exp": now() + 300})
    };
    let call = es.sign("es-1", &claims("tools:call"));

    // Valid tokens, ES256 and RS256, over REST and MCP.
    let answer = send(&server, "POST", "/tools/echo", Some(&call), ECHO);
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["isError"], false, "{}", answer.body);
    let answer = send(&server, "POST", "/mcp", Some(&call), MCP_CALL);
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["result"]["isError"], false, "{}", answer.body);
    let me = send(&server, "GET", "/me", Some(&call), "");
    assert_eq!(me.body["name"], "oauth-ada", "{}", me.body);
    assert_eq!(me.body["namespace"], "oauth-ada", "{}", me.body);
    assert_eq!(me.body["role"], "caller", "{}", me.body);
    let rsa = rs.sign("rs-1", &claims("tools:call"));
    assert_eq!(
        send(&server, "POST", "/tools/echo", Some(&rsa), ECHO).status,
        200
    );
    // The tokens file's people still get in beside OAuth.
    assert_eq!(
        send(&server, "POST", "/tools/echo", Some(CAROL), ECHO).status,
        200
    );

    // Each bad token: 401 invalid_token saying why, over REST and MCP.
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let unsigned = format!(
        "{}.{}.",
        engine.encode(r#"{"alg":"none","typ":"JWT"}"#),
        engine.encode(claims("admin").to_string())
    );
    let with = |change: &dyn Fn(&mut Value)| {
        let mut claims = claims("tools:call");
        change(&mut claims);
        es.sign("es-1", &claims)
    };
    let hmac = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims("admin"),
        &EncodingKey::from_secret(b"a shared secret anyone could guess"),
    )
    .unwrap();
    let bad: Vec<(&str, String, &str)> = vec![
        (
            "expired",
            with(&|c| {
                c["exp"] = json!(now() - 120);
            }),
            "expired",
        ),
        (
            "not yet valid",
            with(&|c| {
                c["nbf"] = json!(now() + 600);
            }),
            "not valid yet",
        ),
        (
            "wrong audience",
            with(&|c| {
                c["aud"] = json!("another-server");
            }),
            "not for this server",
        ),
        (
            "wrong issuer",
            with(&|c| {
                c["iss"] = json!("http://127.0.0.1:1");
            }),
            "issuer",
        ),
        (
            "no expiry",
            with(&|c| {
                c.as_object_mut().unwrap().remove("exp");
            }),
            "exp",
        ),
        (
            "wrong key",
            stranger.sign("es-1", &claims("admin")),
            "signature",
        ),
        ("alg none", unsigned, "alg none"),
        ("HS256", hmac, "symmetric"),
        ("garbage", "eyJhbGciOi.eyJzdWIi.c2ln".into(), "not a JWT"),
        ("not a JWT", "not-a-token-anyone-holds".into(), ""),
    ];
    for (what, token, why) in &bad {
        let refused = send(&server, "POST", "/tools/echo", Some(token), ECHO);
        assert_eq!(refused.status, 401, "{what}: {}", refused.body);
        assert_eq!(refused.body["error"]["code"], "UNAUTHORIZED", "{what}");
        let message = refused.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(why), "{what}: {message}");
        assert!(
            refused
                .challenge
                .contains(&format!("resource_metadata=\"{metadata_url}\"")),
            "{what}: {}",
            refused.challenge
        );
        if !why.is_empty() {
            assert!(
                refused
                    .challenge
                    .starts_with("Bearer error=\"invalid_token\""),
                "{what}: {}",
                refused.challenge
            );
        }
        let refused = send(&server, "POST", "/mcp", Some(token), MCP_CALL);
        assert_eq!(refused.status, 401, "MCP {what}: {}", refused.body);
        assert!(
            refused.body["error"]["code"].is_i64(),
            "MCP {what}: {}",
            refused.body
        );
    }

    // A call-only token may not publish: 403 naming the scope, nothing written.
    let component = std::fs::read(example("echo")).unwrap();
    let before: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    let refused = send(
        &server,
        "PUT",
        "/plugins/oauth-ada/mine",
        Some(&call),
        &component,
    );
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(
        refused.challenge,
        format!(
            "Bearer error=\"insufficient_scope\", scope=\"plugins:publish\", resource_metadata=\"{metadata_url}\""
        )
    );
    assert!(!dir.path().join("oauth-ada").exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), before.len());
    // A token without any of the server's scopes may not even call.
    let openid = es.sign("es-1", &claims("openid profile"));
    let refused = send(&server, "POST", "/tools/echo", Some(&openid), ECHO);
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(
        refused.challenge.contains("scope=\"tools:call\""),
        "{}",
        refused.challenge
    );
    // plugins:publish publishes into the subject's own namespace, under
    // the OAuth prefix (`oauth-ada`), and nowhere else.
    let publisher = es.sign("es-1", &claims("tools:call plugins:publish"));
    let published = send(
        &server,
        "PUT",
        "/plugins/oauth-ada/mine",
        Some(&publisher),
        &component,
    );
    assert_eq!(published.status, 201, "{}", published.body);
    for elsewhere in ["/plugins/bob/mine", "/plugins/ada/mine"] {
        let refused = send(&server, "PUT", elsewhere, Some(&publisher), &component);
        assert_eq!(refused.status, 403, "{elsewhere}: {}", refused.body);
    }

    // Rotation: a token signed by a key the issuer published since is
    // accepted once the keys are fetched again (at most every 10 s): tried
    // until it is, each try before then refused with no fetch, and one
    // fetch in all.
    issuer.keys.lock().unwrap().push(rotated.jwk());
    let fetches = issuer.jwks_fetches.load(Ordering::SeqCst);
    let fresh = rotated.sign("es-2", &claims("tools:call"));
    let deadline = Instant::now() + Duration::from_secs(30);
    let answer = loop {
        let answer = send(&server, "POST", "/tools/echo", Some(&fresh), ECHO);
        if answer.status != 401 || Instant::now() >= deadline {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(issuer.jwks_fetches.load(Ordering::SeqCst), fetches + 1);
    // Made-up key ids do not make the server fetch again and again.
    for n in 0..5 {
        let token = es.sign(&format!("made-up-{n}"), &claims("tools:call"));
        let refused = send(&server, "POST", "/tools/echo", Some(&token), ECHO);
        assert_eq!(refused.status, 401, "{}", refused.body);
        assert!(
            refused.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("kid")
        );
    }
    assert_eq!(issuer.jwks_fetches.load(Ordering::SeqCst), fetches + 1);

    // The official TypeScript SDK client, given only a client id and secret:
    // from the 401 to the metadata, the issuer, a token, and the call.
    let mut command = crate::clients::ts_client();
    command.args([
        "oauth",
        &format!("{}/mcp", server.base),
        CLIENT_ID,
        CLIENT_SECRET,
        "tools:call",
    ]);
    let report = crate::clients::run(command, "TypeScript SDK with OAuth");
    let mut tools: Vec<String> = serde_json::from_value(report["tools"].clone()).unwrap();
    tools.sort();
    assert_eq!(tools, ["echo", "oauth-ada__echo"], "{report}");
    let requests = issuer.token_requests.lock().unwrap().clone();
    let asked = requests
        .last()
        .expect("the SDK asked the issuer for a token");
    assert_eq!(asked["grant_type"], "client_credentials");
    assert_eq!(asked["resource"], format!("http://{host}"), "{asked:?}");
}

/// One identity, one namespace: a token holder's namespace is the prefix
/// and their claim, so no subject takes a tokens-file person's namespace
/// or another holder's, a subject that cannot be a namespace publishes
/// nowhere, and neither does a token without one.
#[test]
fn token_holders_never_take_another_namespace() {
    let keys = tempfile::tempdir().unwrap();
    let es = Arc::new(Key::make(keys.path(), "es-1", Algorithm::ES256));
    let issuer = start_issuer(es.clone(), vec![es.jwk()]);
    let dir = plugin_dir(&[&example("echo")]);
    let config = tempfile::tempdir().unwrap();
    let tokens = config.path().join("tokens.toml");
    const ADA: &str = "ada-secret-0123456789";
    std::fs::write(
        &tokens,
        format!("[[token]]\nname = \"ada\"\nsecret = \"{ADA}\"\nrole = \"publisher\"\n"),
    )
    .unwrap();
    let flags = |claim: &str| {
        vec![
            "--auth-issuer".to_string(),
            issuer.base.clone(),
            "--auth-audience".into(),
            AUDIENCE.into(),
            "--auth-namespace-claim".into(),
            claim.into(),
            "--tokens".into(),
            tokens.to_str().unwrap().into(),
        ]
    };
    let args = flags("sub");
    let server = Server::start(
        dir.path(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let component = std::fs::read(example("echo")).unwrap();
    assert_eq!(
        send(&server, "PUT", "/plugins/ada/keep", Some(ADA), &component).status,
        201
    );
    let token = |claims: Value| es.sign("es-1", &claims);
    let publisher = |extra: Value| {
        let mut claims = json!({"iss": issuer.base, "aud": AUDIENCE,
                                "scope": "tools:call plugins:publish",
                                "iat": now(), "exp": now() + 300});
        for (key, value) in extra.as_object().unwrap() {
            claims[key] = value.clone();
        }
        token(claims)
    };

    // sub=ada is not the tokens file's ada.
    let ada = publisher(json!({"sub": "ada"}));
    let refused = send(&server, "DELETE", "/plugins/ada/keep", Some(&ada), "");
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(dir.path().join("ada/keep.wasm").exists());
    assert_eq!(
        send(&server, "PUT", "/plugins/ada/other", Some(&ada), &component).status,
        403
    );
    // A subject that cannot be a namespace publishes nowhere, and the
    // subject its old digest name was is a namespace of its own.
    let odd = publisher(json!({"sub": "user@example.com"}));
    let refused = send(
        &server,
        "PUT",
        "/plugins/oauth-b4c9a289323b/x",
        Some(&odd),
        &component,
    );
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no namespace"),
        "{}",
        refused.body
    );
    let lookalike = publisher(json!({"sub": "oauth-b4c9a289323b"}));
    assert_eq!(
        send(
            &server,
            "PUT",
            "/plugins/oauth-b4c9a289323b/x",
            Some(&lookalike),
            &component
        )
        .status,
        403
    );
    assert_eq!(
        send(
            &server,
            "PUT",
            "/plugins/oauth-oauth-b4c9a289323b/x",
            Some(&lookalike),
            &component
        )
        .status,
        201
    );
    // Without a subject: may call, may not publish, shares nothing.
    let nobody = publisher(json!({}));
    assert_eq!(
        send(&server, "POST", "/tools/echo", Some(&nobody), ECHO).status,
        200
    );
    let me = send(&server, "GET", "/me", Some(&nobody), "");
    assert_eq!(me.body["namespace"], Value::Null, "{}", me.body);
    assert!(
        me.body["name"].as_str().unwrap().starts_with("oauth:"),
        "{}",
        me.body
    );
    assert_eq!(
        send(
            &server,
            "PUT",
            "/plugins/oauth-anyone/x",
            Some(&nobody),
            &component
        )
        .status,
        403
    );
    drop(server);

    // Another claim names the namespace when the operator says so.
    let args = flags("preferred_username");
    let server = Server::start(
        dir.path(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let named = publisher(
        json!({"sub": "5b8f0c2e-4a1d-4e7f-9c3b-2d6a8e1f0a7c", "preferred_username": "grace"}),
    );
    let me = send(&server, "GET", "/me", Some(&named), "");
    assert_eq!(me.body["namespace"], "oauth-grace", "{}", me.body);
    assert_eq!(
        send(
            &server,
            "PUT",
            "/plugins/oauth-grace/x",
            Some(&named),
            &component
        )
        .status,
        201
    );
    drop(server);

    // The tokens file may name nobody with the prefix.
    std::fs::write(
        &tokens,
        format!("[[token]]\nname = \"oauth-eve\"\nsecret = \"{ADA}\"\nrole = \"publisher\"\n"),
    )
    .unwrap();
    let output = Command::new(crate::support::toolhost_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--plugins"])
        .arg(dir.path())
        .args(flags("sub"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("--auth-namespace-prefix"), "{stderr}");
}

/// Flags that cannot work are refused before anything loads or listens.
#[test]
fn an_issuer_over_plain_http_elsewhere_is_refused_at_start() {
    let dir = plugin_dir(&[&example("echo")]);
    for (flags, says) in [
        (
            [
                "--auth-issuer",
                "http://id.example.com",
                "--auth-audience",
                "x",
            ],
            "over https",
        ),
        (
            [
                "--auth-issuer",
                "https://id.example.com",
                "--auth-audience",
                " ",
            ],
            "--auth-audience is empty",
        ),
    ] {
        let output = Command::new(crate::support::toolhost_bin())
            .args(["serve", "--listen", "127.0.0.1:0", "--plugins"])
            .arg(dir.path())
            .args(flags)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{flags:?}: {stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
        assert!(!stderr.contains("listening"), "{flags:?}: {stderr}");
    }
}

/// With `--auth-tools-claim groups`, an access token sees the
/// tokens file's groups its claim names, and nothing without one; the
/// file's groups edited change what the same token sees.
#[test]
fn an_access_tokens_claim_names_the_groups_it_sees() {
    let keys = tempfile::tempdir().unwrap();
    let es = Arc::new(Key::make(keys.path(), "es-1", Algorithm::ES256));
    let issuer = start_issuer(es.clone(), vec![es.jwk()]);
    let dir = plugin_dir(&[&example("echo")]);
    std::fs::create_dir(dir.path().join("finance")).unwrap();
    std::fs::copy(example("echo"), dir.path().join("finance/ledger.wasm")).unwrap();
    let config = tempfile::tempdir().unwrap();
    let tokens = config.path().join("tokens.toml");
    let file = |support: &str| {
        format!(
            "[[group]]\nname = \"support\"\ntools = [{support}]\n\
             [[group]]\nname = \"finance\"\ntools = [\"finance/*\"]\n\
             [[token]]\nname = \"carol\"\nsecret = \"{CAROL}\"\nrole = \"caller\"\n"
        )
    };
    std::fs::write(&tokens, file("\"*\"")).unwrap();
    let server = Server::start(
        dir.path(),
        &[
            "--auth-issuer",
            &issuer.base,
            "--auth-audience",
            AUDIENCE,
            "--auth-tools-claim",
            "groups",
            "--tokens",
            tokens.to_str().unwrap(),
        ],
    );
    let token = |groups: Option<Value>| {
        let mut claims = json!({"iss": issuer.base, "aud": AUDIENCE, "sub": "agent",
                                "scope": "tools:call", "iat": now(), "exp": now() + 300});
        if let Some(groups) = groups {
            claims["groups"] = groups;
        }
        es.sign("es-1", &claims)
    };
    let tools = |token: &str| -> Vec<String> {
        let listed = send(&server, "GET", "/tools", Some(token), "");
        assert_eq!(listed.status, 200, "{}", listed.body);
        listed
            .body
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool["name"].as_str().unwrap().to_string())
            .collect()
    };
    let support = token(Some(json!(["support", "unknown-group"])));
    assert_eq!(tools(&support), ["echo"]);
    let finance = token(Some(json!("finance")));
    assert_eq!(tools(&finance), ["finance__echo"]);
    let called = send(
        &server,
        "POST",
        "/tools/finance__echo",
        Some(&support),
        ECHO,
    );
    assert_eq!(called.status, 404, "{}", called.body);
    // No claim: nothing (a set is never widened by leaving it out).
    assert!(tools(&token(None)).is_empty());
    // The tokens-file person without a set sees every tool.
    assert_eq!(tools(CAROL).len(), 2);

    // The group edited: the same token sees what it names now.
    let next = config.path().join("tokens.next");
    std::fs::write(&next, file("\"finance/*\"")).unwrap();
    std::fs::rename(&next, &tokens).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while tools(&support) != ["finance__echo"] {
        assert!(Instant::now() < deadline, "the edited group never applied");
        std::thread::sleep(Duration::from_millis(50));
    }
}
