//! People and roles: `--tokens FILE` through the real binary. Unknown or
//! missing tokens get 401 (an envelope over REST, a JSON-RPC error over
//! MCP), `/health` stays open, only admins see server paths in
//! `/plugins`, and the file is reloaded when it changes, a broken version
//! keeping the people already known.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::{Server, example, plugin_dir};

const ADA: &str = "ada-secret-0123456789";
const BOB: &str = "bob-secret-0123456789";
const CAROL: &str = "carol-secret-0123456789";

fn sha256_hex(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("secret");
    std::fs::write(&file, text).unwrap();
    crate::support::file_hash(&file)
}

/// Writes the tokens file the way an editor or `mv` does: beside, then
/// renamed over.
fn write_tokens(path: &Path, text: &str) {
    let temp = path.with_extension("tmp");
    std::fs::write(&temp, text).unwrap();
    std::fs::rename(&temp, path).unwrap();
}

/// `(status, body)` of a request with an optional bearer token.
fn request(
    server: &Server,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> (u16, Value) {
    crate::support::send(
        server,
        method,
        path,
        token,
        "application/json",
        body.as_bytes(),
    )
}

#[test]
fn people_with_tokens_and_roles_from_a_reloaded_file() {
    let dir = plugin_dir(&[&example("echo")]);
    let config = tempfile::tempdir().unwrap();
    let tokens = config.path().join("tokens.toml");
    write_tokens(
        &tokens,
        &format!(
            "[[token]]\nname = \"ada\"\nsecret = \"{ADA}\"\nrole = \"caller\"\n\n\
             [[token]]\nname = \"bob\"\nsha256 = \"{}\"\nrole = \"admin\"\n",
            sha256_hex(BOB)
        ),
    );
    // A client's token variable left exported in the shell that starts the
    // server adds nobody: `serve` reads TOOLHOST_SERVER_TOKEN, never it.
    const CLIENT_TOKEN: &str = "a-client-token-exported-in-the-shell";
    let server = Server::start_with_env(
        dir.path(),
        &["--tokens", tokens.to_str().unwrap()],
        &[("TOOLHOST_TOKEN", CLIENT_TOKEN)],
    );

    // No token, one nobody holds, or the client's variable: 401, as an
    // envelope.
    for token in [None, Some("not-a-known-token-at-all"), Some(CLIENT_TOKEN)] {
        let (status, body) = request(&server, "GET", "/tools", token, "");
        assert_eq!(status, 401, "{body}");
        assert_eq!(body["error"]["code"], "UNAUTHORIZED", "{body}");
    }
    // Over MCP, the same refusal is a JSON-RPC error.
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let (status, body) = request(&server, "POST", "/mcp", None, &list);
    assert_eq!(status, 401, "{body}");
    assert!(body["error"]["code"].is_i64(), "{body}");
    // /health is open to probes.
    assert_eq!(request(&server, "GET", "/health", None, "").0, 200);

    // Known people call and list; the secret or its SHA-256 both work.
    for token in [ADA, BOB] {
        let (status, body) = request(
            &server,
            "POST",
            "/tools/echo",
            Some(token),
            r#"{"text":"hi"}"#,
        );
        assert_eq!(
            (status, &body["content"][0]["text"]),
            (200, &json!("hi")),
            "{body}"
        );
        let (status, body) = request(&server, "POST", "/mcp", Some(token), &list);
        assert_eq!(status, 200, "{body}");
    }

    // Only an admin sees server paths in /plugins: the raw JSON each is
    // sent (a field absent for one, present for the other).
    let (_, as_ada) = request(&server, "GET", "/plugins", Some(ADA), "");
    assert!(as_ada.get("folder").is_none(), "{as_ada}");
    assert_eq!(as_ada["plugins"][0]["file"], "echo.wasm", "{as_ada}");
    let (_, as_bob) = request(&server, "GET", "/plugins", Some(BOB), "");
    assert!(as_bob["folder"].is_string(), "{as_bob}");
    assert!(
        as_bob["plugins"][0]["file"]
            .as_str()
            .is_some_and(|file| file.starts_with('/')),
        "{as_bob}"
    );

    // The file is reloaded: carol in, ada out.
    write_tokens(
        &tokens,
        &format!(
            "[[token]]\nname = \"carol\"\nsecret = \"{CAROL}\"\nrole = \"publisher\"\n\n\
             [[token]]\nname = \"bob\"\nsha256 = \"{}\"\nrole = \"admin\"\n",
            sha256_hex(BOB)
        ),
    );
    server.wait_for("carol's token", |s| {
        request(s, "GET", "/tools", Some(CAROL), "").0 == 200
    });
    assert_eq!(request(&server, "GET", "/tools", Some(ADA), "").0, 401);

    // A broken file is refused with its reason; the people known stay.
    write_tokens(&tokens, "[[token]]\nname = \"dave\"\nrole = \"caller\"\n");
    server.wait_for("the refusal in the log", |s| {
        s.log().contains("tokens file refused")
    });
    assert_eq!(request(&server, "GET", "/tools", Some(CAROL), "").0, 200);
    assert!(
        server.log().contains("exactly one of secret and sha256"),
        "{}",
        server.log()
    );

    // A Host this server does not answer to: the refusal names the flag
    // that admits it, and the server logs it.
    let mut stream =
        std::net::TcpStream::connect(server.base.trim_start_matches("http://")).unwrap();
    std::io::Write::write_all(
        &mut stream,
        b"GET /tools HTTP/1.1\r\nHost: 192.168.1.20:8000\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut stream, &mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("--allowed-host 192.168.1.20"), "{answer}");
    server.wait_for("the Host refusal in the log", |s| {
        s.log()
            .contains("refused a request: Host \"192.168.1.20:8000\"")
    });
}
