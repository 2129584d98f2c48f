//! `weather`: a networked tool. `get_weather_forecast {location}` asks an
//! upstream weather service over outbound HTTP (wasi:http), which toolhost
//! allows only to the origins the plugin's policy lists.
//!
//! Upstream and key come from the policy's `[config]` (`base_url`,
//! `api_key`). The upstream contract: `GET {base_url}/forecast?location=...`
//! with header `X-Api-Key`, answering 200 with
//! `{"temperature", "conditions", "humidity", "wind_speed"}`, or 404 (unknown
//! location), 401 (bad key), 429 (rate limited).

wit_bindgen::generate!({ world: "plugin", path: "../../wit" });

use exports::toolhost::plugin::tools::{Annotations, ContentBlock, Guest, Output, Tool, ToolError};
use serde_json::{Value, json};
use toolhost::plugin::config;
use wasi::http::outgoing_handler;
use wasi::http::types::{Fields, Method, OutgoingRequest, Scheme};
use wasi::io::streams::StreamError;

fn error(code: &str, message: impl Into<String>) -> ToolError {
    ToolError {
        code: code.into(),
        message: message.into(),
        details: None,
    }
}

struct Weather;

impl Guest for Weather {
    fn list_tools() -> Vec<Tool> {
        vec![Tool {
            name: "get_weather_forecast".into(),
            title: Some("Weather forecast".into()),
            description: "Current weather for a location: temperature (°C), conditions, humidity (%) and wind speed (km/h).".into(),
            input_schema: r#"{
                "type": "object",
                "properties": { "location": { "type": "string", "minLength": 1, "description": "City name, e.g. Oslo" } },
                "required": ["location"],
                "additionalProperties": false
            }"#
            .into(),
            output_schema: Some(
                r#"{
                "type": "object",
                "properties": {
                    "temperature": { "type": "number" },
                    "conditions": { "type": "string" },
                    "humidity": { "type": "number" },
                    "wind_speed": { "type": "number" }
                },
                "required": ["temperature", "conditions", "humidity", "wind_speed"]
            }"#
                .into(),
            ),
            annotations: Some(Annotations {
                read_only: Some(true),
                destructive: Some(false),
                idempotent: Some(true),
                open_world: Some(true),
            }),
        }]
    }

    fn call_tool(_name: String, arguments: String) -> Result<Output, ToolError> {
        // Strict: a missing or mistyped location is INVALID_ARGUMENTS.
        let args: Value = serde_json::from_str(&arguments).unwrap_or(Value::Null);
        let Some(location) = args.get("location").and_then(Value::as_str) else {
            return Err(error("INVALID_ARGUMENTS", "\"location\" must be a string"));
        };
        let base_url = config::get("base_url").ok_or_else(|| {
            error(
                "NOT_CONFIGURED",
                "no base_url in the plugin's policy [config]",
            )
        })?;
        let api_key = config::get("api_key").unwrap_or_default();
        let path = format!("/forecast?location={}", percent_encode(location));
        let (status, body) = get(&base_url, &path, &api_key)?;
        match status {
            200 => {}
            404 => {
                return Err(error(
                    "LOCATION_NOT_FOUND",
                    format!("no weather for {location:?}"),
                ));
            }
            401 | 403 => {
                return Err(error(
                    "INVALID_API_KEY",
                    "the weather service refused the API key",
                ));
            }
            429 => {
                return Err(error(
                    "RATE_LIMITED",
                    "the weather service asks us to slow down; try again later",
                ));
            }
            other => {
                return Err(error(
                    "UPSTREAM_ERROR",
                    format!("the weather service answered HTTP {other}"),
                ));
            }
        }
        let data: Value = serde_json::from_slice(&body).map_err(|e| {
            error(
                "UPSTREAM_ERROR",
                format!("the weather service answered invalid JSON: {e}"),
            )
        })?;
        let forecast = json!({
            "temperature": data["temperature"],
            "conditions": data["conditions"],
            "humidity": data["humidity"],
            "wind_speed": data["wind_speed"],
        });
        let text = format!(
            "Temperature in {location}: {}°C, {}. Humidity {}%, wind {} km/h.",
            data["temperature"],
            data["conditions"].as_str().unwrap_or("?"),
            data["humidity"],
            data["wind_speed"]
        );
        Ok(Output {
            content: vec![ContentBlock::Text(text)],
            structured: Some(forecast.to_string()),
        })
    }
}

/// One GET over wasi:http: the status and the whole body.
fn get(base_url: &str, path: &str, api_key: &str) -> Result<(u16, Vec<u8>), ToolError> {
    let (scheme, rest) = base_url.split_once("://").ok_or_else(|| {
        error(
            "NOT_CONFIGURED",
            format!("base_url {base_url:?} has no scheme"),
        )
    })?;
    let (authority, prefix) = match rest.find('/') {
        Some(slash) => (&rest[..slash], rest[slash..].trim_end_matches('/')),
        None => (rest, ""),
    };
    let headers = Fields::from_list(&[("x-api-key".to_string(), api_key.as_bytes().to_vec())])
        .map_err(|e| error("NOT_CONFIGURED", format!("bad api_key header: {e:?}")))?;
    let request = OutgoingRequest::new(headers);
    let unreachable = |what: &str| error("UPSTREAM_UNREACHABLE", what.to_string());
    request
        .set_method(&Method::Get)
        .map_err(|_| unreachable("bad method"))?;
    let scheme = if scheme == "https" {
        Scheme::Https
    } else {
        Scheme::Http
    };
    request
        .set_scheme(Some(&scheme))
        .map_err(|_| unreachable("bad scheme"))?;
    request
        .set_authority(Some(authority))
        .map_err(|_| unreachable("bad authority"))?;
    request
        .set_path_with_query(Some(&format!("{prefix}{path}")))
        .map_err(|_| unreachable("bad path"))?;
    let pending = outgoing_handler::handle(request, None).map_err(|e| {
        error(
            "UPSTREAM_UNREACHABLE",
            format!("the request was refused: {e:?}"),
        )
    })?;
    let response = loop {
        match pending.get() {
            Some(result) => break result,
            None => pending.subscribe().block(),
        }
    };
    let response = response
        .map_err(|_| unreachable("no response"))?
        .map_err(|e| {
            error(
                "UPSTREAM_UNREACHABLE",
                format!("the weather service could not be reached: {e:?}"),
            )
        })?;
    let status = response.status();
    let body = response.consume().map_err(|_| unreachable("no body"))?;
    let stream = body.stream().map_err(|_| unreachable("no body stream"))?;
    let mut bytes = Vec::new();
    loop {
        match stream.blocking_read(64 * 1024) {
            Ok(chunk) => bytes.extend_from_slice(&chunk),
            Err(StreamError::Closed) => break,
            Err(e) => {
                return Err(error(
                    "UPSTREAM_UNREACHABLE",
                    format!("reading the answer failed: {e:?}"),
                ));
            }
        }
    }
    Ok((status, bytes))
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

export!(Weather);
