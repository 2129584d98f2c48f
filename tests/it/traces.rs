//! OpenTelemetry traces through the real binary, with this test as the
//! OTLP receiver (`http/protobuf` on loopback): a call made with a known
//! W3C `traceparent` (an HTTP header for REST, `params._meta` for MCP)
//! arrives under that trace id, as a child of the caller's span, with the
//! call's spans (request, invoke, instantiate, guest, normalise) and the
//! MCP/GenAI attributes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::json;

use crate::support::{Server, example, plugin_dir};

/// Every span received, and the paths and content types it came on.
#[derive(Default)]
struct Received {
    spans: Vec<Span>,
    requests: Vec<(String, String)>,
}

/// A minimal OTLP/HTTP receiver: answers each POST with 200 and an empty
/// protobuf `ExportTraceServiceResponse`.
fn start_receiver() -> (String, Arc<Mutex<Received>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let received = Arc::new(Mutex::new(Received::default()));
    let sink = received.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let sink = sink.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut stream = stream;
                loop {
                    let mut request_line = String::new();
                    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
                        return;
                    }
                    let path = request_line
                        .split_whitespace()
                        .nth(1)
                        .unwrap_or("")
                        .to_string();
                    let (mut length, mut kind) = (0usize, String::new());
                    loop {
                        let mut line = String::new();
                        reader.read_line(&mut line).unwrap();
                        let line = line.trim_end();
                        if line.is_empty() {
                            break;
                        }
                        let (name, value) = line.split_once(':').unwrap_or((line, ""));
                        match name.to_ascii_lowercase().as_str() {
                            "content-length" => length = value.trim().parse().unwrap(),
                            "content-type" => kind = value.trim().to_string(),
                            _ => {}
                        }
                    }
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body).unwrap();
                    let export = ExportTraceServiceRequest::decode(body.as_slice())
                        .expect("an OTLP protobuf trace export");
                    let mut sink = sink.lock().unwrap();
                    sink.requests.push((path, kind));
                    for resource in export.resource_spans {
                        for scope in resource.scope_spans {
                            sink.spans.extend(scope.spans);
                        }
                    }
                    drop(sink);
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n"
                    );
                }
            });
        }
    });
    (format!("http://{address}"), received)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
            AnyValue::StringValue(text) => Some(text.clone()),
            other => Some(format!("{other:?}")),
        })
}

/// The spans of `trace_id`, once `names` are all among them.
fn spans_of(
    received: &Mutex<Received>,
    trace_id: &str,
    names: &[&str],
    server: &Server,
) -> Vec<Span> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let spans: Vec<Span> = received
            .lock()
            .unwrap()
            .spans
            .iter()
            .filter(|span| hex(&span.trace_id) == trace_id)
            .cloned()
            .collect();
        if names
            .iter()
            .all(|name| spans.iter().any(|span| span.name == *name))
        {
            return spans;
        }
        assert!(
            Instant::now() < deadline,
            "spans of {trace_id}: {:?}\nserver log:\n{}",
            spans.iter().map(|span| &span.name).collect::<Vec<_>>(),
            server.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_call_with_a_known_trace_id_arrives_under_it_over_rest_and_mcp() {
    let (endpoint, received) = start_receiver();
    let dir = plugin_dir(&[&example("echo"), &example("math")]);
    let server = Server::start_with_env(
        dir.path(),
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );

    // REST, the caller's context in the `traceparent` header.
    let rest_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let rest_parent = "00f067aa0ba902b7";
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let answer = agent
        .post(format!("{}/tools/echo", server.base))
        .header("Content-Type", "application/json")
        .header("traceparent", format!("00-{rest_trace}-{rest_parent}-01"))
        .send(json!({"text": "traced"}).to_string())
        .unwrap();
    assert_eq!(answer.status().as_u16(), 200);

    let spans = spans_of(
        &received,
        rest_trace,
        &[
            "POST /tools/echo",
            "call",
            "instantiate",
            "guest",
            "normalise",
        ],
        &server,
    );
    let by_name = |name: &str| spans.iter().find(|span| span.name == name).unwrap().clone();
    let request = by_name("POST /tools/echo");
    // Continued, not restarted: the caller's span is the request's parent.
    assert_eq!(hex(&request.parent_span_id), rest_parent);
    let attr = |span: &Span, key: &str| attribute(span, key);
    assert_eq!(
        attr(&request, "mcp.method.name").as_deref(),
        Some("tools/call")
    );
    assert_eq!(attr(&request, "gen_ai.tool.name").as_deref(), Some("echo"));
    assert_eq!(
        attr(&request, "gen_ai.operation.name").as_deref(),
        Some("execute_tool")
    );
    assert_eq!(attr(&request, "error.type"), None);
    let call = by_name("call");
    assert_eq!(call.parent_span_id, request.span_id);
    assert_eq!(attr(&call, "tool").as_deref(), Some("echo"));
    for child in ["instantiate", "guest", "normalise"] {
        assert_eq!(by_name(child).parent_span_id, call.span_id, "{child}");
    }

    // MCP, the caller's context in `params._meta` (and a failing call,
    // whose error type is on the span).
    let mcp_trace = "0af7651916cd43dd8448eb211c80319c";
    let mcp_parent = "b7ad6b7169203331";
    let divide = |trace: &str, b: i64, headers: &[(&str, &str)]| -> Span {
        let (status, _, body) = crate::mcp::rpc(
            &server,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "divide", "arguments": {"a": 1, "b": b},
                              "_meta": {"traceparent": format!("00-{trace}-{mcp_parent}-01")}}}),
            headers,
        );
        assert_eq!(status, 200, "{body}");
        let spans = spans_of(&received, trace, &["tools/call divide", "call"], &server);
        spans
            .into_iter()
            .find(|span| span.name == "tools/call divide")
            .unwrap()
    };
    let request = &divide(mcp_trace, 0, &[]);
    assert_eq!(hex(&request.parent_span_id), mcp_parent);
    assert_eq!(attr(request, "gen_ai.tool.name").as_deref(), Some("divide"));
    assert_eq!(
        attr(request, "error.type").as_deref(),
        Some("DIVISION_BY_ZERO")
    );

    // The same through rmcp's service (the MCP front's fast path leaves a
    // request with its `Accept` given twice to rmcp): `_meta` reaches the
    // call there too.
    let rmcp_trace = "1bf7651916cd43dd8448eb211c80319c";
    let request = divide(
        rmcp_trace,
        2,
        &[("Accept", "application/json, text/event-stream")],
    );
    assert_eq!(hex(&request.parent_span_id), mcp_parent);

    // What the exporter sent it on: OTLP/HTTP with protobuf bodies.
    let requests = &received.lock().unwrap().requests;
    assert!(
        requests
            .iter()
            .all(|(path, kind)| path == "/v1/traces" && kind == "application/x-protobuf"),
        "{requests:?}"
    );
}
