//! Source tools that reach the world: a Python source (the helper's
//! `http`, and `urllib.request`) and a JavaScript source (`fetch`) call a
//! loopback JSON server their namespace's policy allows, with an API key
//! from `[config]`, and answer with its data; toward an origin nobody
//! granted they fail inside the tool with the origin named, and that
//! server sees no request; a redirect to an origin nobody granted is not
//! followed; the call's accounting counts what went out.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::json;

use crate::support::{Server, plugin_dir};

/// One request a [`JsonServer`] received: its request line and headers.
#[derive(Debug, Clone)]
struct Seen {
    line: String,
    headers: Vec<(String, String)>,
}

/// A loopback HTTP/1.1 server answering every request with a JSON body
/// naming what it was asked (or a redirect, for `/redirect?to=URL`), and
/// keeping each request it received.
struct JsonServer {
    origin: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl JsonServer {
    fn start() -> JsonServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let kept = kept.clone();
                std::thread::spawn(move || answer(stream, &kept));
            }
        });
        JsonServer { origin, seen }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn answer(stream: std::net::TcpStream, seen: &Mutex<Vec<Seen>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let line = line.trim_end().to_string();
        let mut headers = Vec::new();
        let mut length = 0;
        loop {
            let mut header = String::new();
            reader.read_line(&mut header).unwrap();
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').unwrap();
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim().to_string());
            if name == "content-length" {
                length = value.parse().unwrap();
            }
            headers.push((name, value));
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        seen.lock().unwrap().push(Seen {
            line: line.clone(),
            headers: headers.clone(),
        });
        let target = line.split(' ').nth(1).unwrap_or("/").to_string();
        let mut stream = &stream;
        if let Some(to) = target.strip_prefix("/redirect?to=") {
            let to = to.replace("%3A", ":").replace("%2F", "/");
            write!(
                stream,
                "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\n\r\n"
            )
            .unwrap();
            continue;
        }
        let key = headers
            .iter()
            .find(|(name, _)| name == "x-api-key")
            .map(|(_, value)| value.clone());
        let text = json!({
            "method": line.split(' ').next(),
            "target": target,
            "key": key,
            "body": String::from_utf8_lossy(&body),
            "forecast": "sunny",
        })
        .to_string();
        write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\n\r\n{text}",
            text.len()
        )
        .unwrap();
    }
}

const PYTHON: &str = r#"import json
import urllib.request

from toolhost_plugin import HTTPRequestError, config, http, tool


@tool(name="forecast")
def forecast(url: str, city: str) -> dict:
    """Asks the API for a city's forecast.

    Args:
        url: The API's base URL
        city: The city
    """
    answer = http.get(url + "/forecast", params={"city": city},
                      headers={"X-Api-Key": config.get("api_key")})
    answer.raise_for_status()
    return {"status": answer.status, "type": answer.headers["CONTENT-TYPE"],
            "data": answer.json()}


@tool(name="post_note")
def post_note(url: str) -> dict:
    """Posts JSON.

    Args:
        url: The API's base URL
    """
    return http.post(url + "/notes", json={"note": "hi"}).json()


@tool(name="forecast_urllib")
def forecast_urllib(url: str) -> dict:
    """The same through urllib.

    Args:
        url: The API's base URL
    """
    request = urllib.request.Request(url + "/forecast?city=Oslo",
                                     headers={"X-Api-Key": "from-urllib"})
    with urllib.request.urlopen(request) as answer:
        return {"status": answer.status, "data": json.loads(answer.read())}


@tool(name="reach_signed")
def reach_signed(url: str) -> str:
    """Tries a URL with a credential.

    Args:
        url: Where
    """
    return http.get(url, headers={"Authorization": "Bearer s3cret"}).json()["target"]


@tool(name="reach")
def reach(url: str) -> str:
    """Tries a URL.

    Args:
        url: Where
    """
    try:
        http.get(url)
        return "reached"
    except HTTPRequestError as error:
        return "refused: " + str(error)
"#;

const JAVASCRIPT: &str = r#"import { tool, exportPlugin, config } from "./toolhost.js";

const forecast = tool({
  name: "js_forecast",
  description: "Asks the API for a city's forecast.",
  input: {
    type: "object",
    properties: { url: { type: "string" }, city: { type: "string" } },
    required: ["url", "city"],
  },
  async run({ url, city }) {
    const address = new URL("/forecast", url);
    address.searchParams.set("city", city);
    const response = await fetch(address, { headers: { "X-Api-Key": config.get("api_key") } });
    if (!response.ok) throw new Error(`status ${response.status}`);
    const data = await response.json();
    return { status: response.status, type: response.headers.get("Content-Type"), data };
  },
});

const post = tool({
  name: "js_post_note",
  description: "Posts JSON.",
  input: { type: "object", properties: { url: { type: "string" } }, required: ["url"] },
  run: ({ url }) =>
    fetch(url + "/notes", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ note: "hi" }),
    }).then((response) => response.json()),
});

const reach = tool({
  name: "js_reach",
  description: "Tries a URL.",
  input: { type: "object", properties: { url: { type: "string" } }, required: ["url"] },
  run: async ({ url }) => {
    try {
      const bytes = await (await fetch(url)).arrayBuffer();
      return "reached " + new TextDecoder().decode(bytes).length;
    } catch (error) {
      return "refused: " + error.message;
    }
  },
});

export const { tools, resources, prompts, completion } = exportPlugin({ tools: [forecast, post, reach] });
"#;

#[test]
fn a_python_source_calls_what_its_namespace_allows_and_nothing_else() {
    let allowed = JsonServer::start();
    let other = JsonServer::start();
    let second = JsonServer::start();
    let dir = plugin_dir(&[]);
    let namespace = dir.path().join("ada");
    std::fs::create_dir(&namespace).unwrap();
    std::fs::write(
        namespace.join("_namespace.toml"),
        format!(
            "[http]\nallow = [\"{}\", \"{}\"]\n\n[config]\napi_key = \"key-0123\"\n",
            allowed.origin, second.origin
        ),
    )
    .unwrap();
    let server = Server::start(dir.path(), &[]);
    std::fs::write(namespace.join(".weather.tmp"), PYTHON).unwrap();
    std::fs::rename(namespace.join(".weather.tmp"), namespace.join("weather.py")).unwrap();
    server.wait_for("weather.py to load", |s| {
        s.tool_names().contains(&"ada__forecast".to_string())
    });

    let answer = server.call(
        "ada__forecast",
        json!({ "url": allowed.origin, "city": "Paris" }),
    );
    let data = &answer.json["structuredContent"];
    assert_eq!(data["status"], 200, "{}", answer.json);
    assert_eq!(data["type"], "application/json; charset=utf-8");
    assert_eq!(data["data"]["forecast"], "sunny");
    assert_eq!(data["data"]["target"], "/forecast?city=Paris");
    // The API key from [config] reached the request's header.
    assert_eq!(data["data"]["key"], "key-0123", "{}", answer.json);
    let outbound = &answer.json["meta"]["outbound"];
    assert_eq!(outbound["requests"], 1, "{}", answer.json);
    assert!(outbound["bytesReceived"].as_u64().unwrap() > 0);

    let posted = server.call("ada__post_note", json!({ "url": allowed.origin }));
    let data = &posted.json["structuredContent"];
    assert_eq!(data["method"], "POST", "{}", posted.json);
    assert_eq!(data["body"], "{\"note\": \"hi\"}");

    let answer = server.call("ada__forecast_urllib", json!({ "url": allowed.origin }));
    let data = &answer.json["structuredContent"];
    assert_eq!(data["status"], 200, "{}", answer.json);
    assert_eq!(data["data"]["key"], "from-urllib");
    assert_eq!(data["data"]["target"], "/forecast?city=Oslo");

    // An origin nobody granted: refused inside the tool, the origin named
    // with where an admin grants it, and nothing sent.
    let before = allowed.seen().len();
    let refused = server.call(
        "ada__reach",
        json!({ "url": format!("{}/x", other.origin) }),
    );
    let text = refused.json["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.starts_with("refused: ")
            && text.contains(&format!("{} is not allowed for ada/weather", other.origin))
            && text.contains("[http] allow"),
        "{}",
        refused.json
    );
    assert!(other.seen().is_empty(), "{:?}", other.seen());
    // Redirected toward it from an allowed origin: the hop is refused too.
    let bounced = server.call(
        "ada__reach",
        json!({ "url": format!("{}/redirect?to={}/y", allowed.origin, other.origin) }),
    );
    let text = bounced.json["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("is not allowed"), "{}", bounced.json);
    assert!(other.seen().is_empty(), "{:?}", other.seen());
    assert_eq!(allowed.seen().len(), before + 1);
    // A credential is for the origin it was written for: a redirect to
    // another allowed origin arrives without it.
    let signed = server.call(
        "ada__reach_signed",
        json!({ "url": format!("{}/redirect?to={}/landed", allowed.origin, second.origin) }),
    );
    assert_eq!(
        signed.json["content"][0]["text"], "/landed",
        "{}",
        signed.json
    );
    assert!(
        allowed
            .seen()
            .last()
            .unwrap()
            .headers
            .iter()
            .any(|(name, _)| name == "authorization"),
        "the first hop had it"
    );
    assert!(
        second
            .seen()
            .iter()
            .all(|seen| seen.headers.iter().all(|(name, _)| name != "authorization")),
        "{:?}",
        second.seen()
    );
    assert!(
        allowed
            .seen()
            .iter()
            .all(|seen| seen.line.ends_with("HTTP/1.1")),
        "{:?}",
        allowed.seen()
    );
    assert!(
        allowed
            .seen()
            .iter()
            .all(|seen| seen.headers.iter().any(|(name, _)| name == "user-agent")),
        "{:?}",
        allowed.seen()
    );

    // JavaScript: the standard fetch, awaited in an async run.
    std::fs::write(namespace.join(".js.tmp"), JAVASCRIPT).unwrap();
    std::fs::rename(namespace.join(".js.tmp"), namespace.join("weatherjs.js")).unwrap();
    server.wait_for("weatherjs.js to load", |s| {
        s.tool_names().contains(&"ada__js_forecast".to_string())
    });
    let answer = server.call(
        "ada__js_forecast",
        json!({ "url": allowed.origin, "city": "Lima" }),
    );
    let data = &answer.json["structuredContent"];
    assert_eq!(data["status"], 200, "{}", answer.json);
    assert_eq!(data["type"], "application/json; charset=utf-8");
    assert_eq!(data["data"]["target"], "/forecast?city=Lima");
    assert_eq!(data["data"]["key"], "key-0123", "{}", answer.json);
    assert_eq!(answer.json["meta"]["outbound"]["requests"], 1);
    let posted = server.call("ada__js_post_note", json!({ "url": allowed.origin }));
    let data = &posted.json["structuredContent"];
    assert_eq!(data["method"], "POST", "{}", posted.json);
    assert_eq!(data["body"], "{\"note\":\"hi\"}");
    let reached = server.call("ada__js_reach", json!({ "url": allowed.origin }));
    let text = reached.json["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.starts_with("reached "), "{}", reached.json);
    let refused = server.call("ada__js_reach", json!({ "url": other.origin }));
    let text = refused.json["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.starts_with("refused: ")
            && text.contains(&format!(
                "{} is not allowed for ada/weatherjs",
                other.origin
            )),
        "{}",
        refused.json
    );
    assert!(other.seen().is_empty(), "{:?}", other.seen());
}

/// The instructor grants one origin to the whole room in one file
/// (`_room.toml`), before anyone has published: every attendee's source
/// reaches it, in any namespace; taken away, it reaches it no more; and
/// `toolhost grants allow --namespace bob` gives it back to bob alone.
#[test]
fn the_room_grants_an_origin_to_every_namespace_in_one_place() {
    let allowed = JsonServer::start();
    let dir = plugin_dir(&[]);
    std::fs::write(
        dir.path().join("_room.toml"),
        format!("[http]\nallow = [\"{}\"]\n", allowed.origin),
    )
    .unwrap();
    let server = Server::start(dir.path(), &[]);
    for person in ["ada", "bob"] {
        let namespace = dir.path().join(person);
        std::fs::create_dir(&namespace).unwrap();
        std::fs::write(namespace.join(".w.tmp"), PYTHON).unwrap();
        std::fs::rename(namespace.join(".w.tmp"), namespace.join("weather.py")).unwrap();
    }
    server.wait_for("both sources to load", |s| {
        let names = s.tool_names();
        names.contains(&"ada__reach".to_string()) && names.contains(&"bob__reach".to_string())
    });
    for person in ["ada", "bob"] {
        let answer = server.call(
            &format!("{person}__reach"),
            json!({ "url": format!("{}/hello", allowed.origin) }),
        );
        assert_eq!(
            answer.json["content"][0]["text"], "reached",
            "{}",
            answer.json
        );
    }
    assert_eq!(allowed.seen().len(), 2);
    let granted = server.plugin_json("bob/weather").unwrap();
    assert_eq!(
        granted["granted"]["httpAllow"],
        json!([allowed.origin]),
        "{granted}"
    );

    std::fs::remove_file(dir.path().join("_room.toml")).unwrap();
    server.wait_for("the grant to be gone", |s| {
        s.plugin_json("bob/weather")
            .is_some_and(|plugin| plugin["granted"]["httpAllow"] == json!([]))
    });
    // The room's change reaches every plugin it governs in one step: once
    // bob's grant is gone, ada's is too.
    assert_eq!(
        server.plugin_json("ada/weather").unwrap()["granted"]["httpAllow"],
        json!([])
    );
    let answer = server.call(
        "bob__reach",
        json!({ "url": format!("{}/hello", allowed.origin) }),
    );
    let text = answer.json["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("is not allowed for bob/weather"),
        "{}",
        answer.json
    );
    assert_eq!(allowed.seen().len(), 2);

    // The admin's command grants it again, to bob's namespace alone.
    let granted = std::process::Command::new(crate::support::toolhost_bin())
        .args([
            "grants",
            "allow",
            "--namespace",
            "bob",
            &allowed.origin,
            "--plugins",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(granted.status.success(), "{granted:?}");
    server.wait_for("bob's grant", |s| {
        s.plugin_json("bob/weather")
            .is_some_and(|plugin| plugin["granted"]["httpAllow"] == json!([allowed.origin]))
    });
    let answer = server.call(
        "bob__reach",
        json!({ "url": format!("{}/hello", allowed.origin) }),
    );
    assert_eq!(
        answer.json["content"][0]["text"], "reached",
        "{}",
        answer.json
    );
    let answer = server.call(
        "ada__reach",
        json!({ "url": format!("{}/hello", allowed.origin) }),
    );
    let text = answer.json["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("is not allowed for ada/weather"),
        "{}",
        answer.json
    );
}
