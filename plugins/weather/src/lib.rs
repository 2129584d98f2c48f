//! `weather`: a networked tool on OpenWeatherMap's current-weather API.
//! `get_weather_forecast {location}` asks the upstream over outbound HTTP
//! (wasi:http), which toolhost allows only to the origins the plugin's
//! policy lists, and answers as seed 000 does: `Temperature in Oslo: 5°C,
//! Overcast clouds` plus `{temperature, conditions, humidity, wind_speed}`.
//!
//! The upstream is OpenWeatherMap's documented endpoint
//! `GET {base_url}/data/2.5/weather?q=...&appid=...&units=metric`, which
//! answers `main.temp` (°C), `weather[0].description`, `main.humidity` (%)
//! and `wind.speed` (m/s), or 404 (unknown city), 401 (bad key) and 429
//! (rate limited). `base_url` (default `https://api.openweathermap.org`)
//! and `api_key` come from the policy's `[config]`.
//!
//! Its results are shown in a view (`ui://forecast`, `forecast.html`), for
//! the clients that show MCP Apps.

use toolhost_plugin::{prelude::*, serde_json};
use wasi::http::outgoing_handler;
use wasi::http::types::{Fields, Method, OutgoingRequest, Scheme};
use wasi::io::streams::StreamError;

const DEFAULT_BASE_URL: &str = "https://api.openweathermap.org";

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// City name, e.g. Oslo
    #[schemars(length(min = 1))]
    location: String,
}

#[derive(Serialize, JsonSchema)]
struct Forecast {
    /// Degrees Celsius
    temperature: f64,
    conditions: String,
    /// Relative humidity, percent
    humidity: f64,
    /// Metres per second
    wind_speed: f64,
}

/// The part of OpenWeatherMap's answer this tool reads.
#[derive(Deserialize)]
struct Current {
    main: Main,
    weather: Vec<Condition>,
    wind: Wind,
}

#[derive(Deserialize)]
struct Main {
    temp: f64,
    humidity: f64,
}

#[derive(Deserialize)]
struct Condition {
    description: String,
}

#[derive(Deserialize)]
struct Wind {
    speed: f64,
}

fn get_weather_forecast(Args { location }: Args) -> Result<Structured<Forecast>, ToolError> {
    let base_url = config::get("base_url").unwrap_or_else(|| DEFAULT_BASE_URL.into());
    let api_key = config::get("api_key").ok_or_else(|| {
        ToolError::new(
            "NOT_CONFIGURED",
            "no api_key in the plugin's policy [config]",
        )
    })?;
    let path = format!(
        "/data/2.5/weather?q={}&appid={}&units=metric",
        percent_encode(&location),
        percent_encode(&api_key)
    );
    let (status, body) = get(&base_url, &path)?;
    let refused = |code: &str, message: String| Err(ToolError::new(code, message));
    match status {
        200 => {}
        404 => return refused("LOCATION_NOT_FOUND", format!("no weather for {location:?}")),
        401 | 403 => {
            return refused(
                "INVALID_API_KEY",
                "the weather service refused the API key".into(),
            );
        }
        429 => {
            let message = "the weather service asks us to slow down; try again later";
            return refused("RATE_LIMITED", message.into());
        }
        other => {
            return refused(
                "UPSTREAM_ERROR",
                format!("the weather service answered HTTP {other}"),
            );
        }
    }
    let current: Current = serde_json::from_slice(&body).map_err(|e| {
        ToolError::new(
            "UPSTREAM_ERROR",
            format!("unexpected answer from the weather service: {e}"),
        )
    })?;
    let conditions = capitalise(
        current
            .weather
            .first()
            .map_or("unknown", |w| &w.description),
    );
    let text = format!(
        "Temperature in {location}: {:.0}°C, {conditions}",
        current.main.temp
    );
    let forecast = Forecast {
        temperature: current.main.temp,
        conditions,
        humidity: current.main.humidity,
        wind_speed: current.wind.speed,
    };
    Ok(Structured::new(forecast).text(text))
}

fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn tools() -> Tools {
    Tools::new()
        // A view (MCP Apps): a client that shows views draws the result
        // with it. It reaches nothing beyond itself (no CSP origins).
        .view(
            View::new("ui://forecast", include_str!("forecast.html"))
                .title("Weather forecast")
                .prefers_border(true),
        )
        .tool(
        Tool::new(
            "get_weather_forecast",
            "Current weather for a location: temperature (°C), conditions, humidity (%) and wind speed (m/s).",
            get_weather_forecast,
        )
        .title("Weather forecast")
        .read_only(true)
        .destructive(false)
        .idempotent(true)
        .open_world(true)
        .view("ui://forecast"),
    )
}

toolhost_plugin::export!(tools, catalog);

/// One GET over wasi:http: the status and the whole body.
fn get(base_url: &str, path: &str) -> Result<(u16, Vec<u8>), ToolError> {
    let (scheme, rest) = base_url.split_once("://").ok_or_else(|| {
        ToolError::new(
            "NOT_CONFIGURED",
            format!("base_url {base_url:?} has no scheme"),
        )
    })?;
    let (authority, prefix) = match rest.find('/') {
        Some(slash) => (&rest[..slash], rest[slash..].trim_end_matches('/')),
        None => (rest, ""),
    };
    let request = OutgoingRequest::new(Fields::new());
    let unreachable = |what: &str| ToolError::new("UPSTREAM_UNREACHABLE", what.to_string());
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
        ToolError::new(
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
            ToolError::new(
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
                return Err(ToolError::new(
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
