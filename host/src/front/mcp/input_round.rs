//! Input-required results (SEP-2322): how a plugin's requests for input
//! reach a client of the 2026-07-28 revision, which takes no request from
//! the server while a call runs.
//!
//! One round is one run of the call. The plugin's requests (`elicit`,
//! `create-message`, `input.ask`) are answered from what the client sent
//! (`inputResponses`) and from the earlier rounds (`requestState`), by key.
//! The first request with no answer ends the round: the plugin gets `err`
//! at once (nothing waits on a client that cannot answer), and the call's
//! answer is an input-required result with that request (or, from
//! `input.ask`, every request of the batch the client can answer) and a
//! `requestState` sealed with the server's keys ([`InputKeys`]): the
//! answers so far, bound to the method and the name, expiring. The client
//! calls again with its answers, and the call runs again from the start.
//!
//! A request the client did not declare the capability for gets `err` too,
//! as before 2026-07-28; if the call then fails, the answer is -32021
//! (missing required client capability) naming it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    ClientCapabilities, CreateMessageRequest, CreateMessageRequestParams, ElicitRequest,
    ElicitRequestParams, ErrorCode, InputRequest, InputRequests, InputResponses, ListRootsRequest,
    LoggingLevel, SealOptions,
};
use serde_json::{Value, json};

use super::input_keys::InputKeys;
use crate::runtime::{
    AskError, ClientChannel, ELICIT, InputRequest as PluginRequest, LogLevel, NotAResult, ROOTS,
    SAMPLE,
};

/// How long a `requestState` may be sent back.
const STATE_TTL: Duration = Duration::from_secs(15 * 60);

/// What a `requestState` carries: the answers of earlier rounds.
#[derive(serde::Serialize, serde::Deserialize, Default)]
struct State {
    answers: BTreeMap<String, Value>,
    /// What the client declared it can answer, for a next round that does
    /// not say it again (REST's `Toolhost-Input`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    declared: Option<ClientCapabilities>,
}

/// How a round ended, when it did not simply complete.
pub(super) enum Stop {
    /// The plugin asked for what the client has not answered yet.
    NeedsInput(InputRequests),
    /// An answer the client sent is not one of its method.
    BadAnswer(String),
}

/// One round of a call for a 2026-07-28 client.
pub(crate) struct InputRound {
    capabilities: ClientCapabilities,
    /// Every answer known: earlier rounds', then the client's new ones.
    given: BTreeMap<String, Value>,
    /// The answers the plugin used, which the next state carries.
    used: Mutex<BTreeMap<String, Value>>,
    stop: Mutex<Option<Stop>>,
    /// Told when the round stops.
    stopping: tokio::sync::Notify,
    /// The capabilities a refused request needed.
    missing: Mutex<Vec<&'static str>>,
    /// Where log messages (at the level the request named, `logLevel`;
    /// none without it) and progress (for the request's token) go.
    relay: Relay,
}

/// Where a round's notifications go.
pub(crate) struct Relay {
    pub(super) log_level: Option<LoggingLevel>,
    pub(super) to: Arc<dyn ClientChannel>,
}

impl Relay {
    /// Nowhere: a round whose notifications have no listener (REST).
    pub(crate) fn silent() -> Self {
        Relay {
            log_level: None,
            to: Arc::new(super::answer_stream::StatelessClient::default()),
        }
    }
}

impl InputRound {
    /// The round for a request: the state it sent back opened (a state
    /// that does not open is refused, as is an answer that is not an
    /// object), its new answers added. `capabilities`: what the client
    /// declares; `None`, what it declared in the round the state is of.
    pub(crate) fn open(
        keys: &InputKeys,
        bound_to: &str,
        capabilities: Option<ClientCapabilities>,
        state: Option<&str>,
        responses: Option<&InputResponses>,
        relay: Relay,
    ) -> Result<Self, McpError> {
        let opened = match state {
            Some(sealed) => keys
                .codec
                .open_json_with::<State>(sealed, bound_to.as_bytes())
                .map_err(|_| {
                    McpError::invalid_params(
                        "requestState is not one this server sealed for this request, or it \
                         has expired; call again without it",
                        None,
                    )
                })?,
            None => State::default(),
        };
        let capabilities = capabilities.or(opened.declared).unwrap_or_default();
        let mut given = opened.answers;
        for (key, answer) in responses.into_iter().flatten() {
            if !answer.is_object() {
                return Err(McpError::invalid_params(
                    format!("inputResponses.{key} must be an object (the client's result)"),
                    None,
                ));
            }
            given.insert(key.clone(), answer.clone());
        }
        Ok(InputRound {
            capabilities,
            given,
            used: Mutex::default(),
            stop: Mutex::default(),
            stopping: tokio::sync::Notify::new(),
            missing: Mutex::default(),
            relay,
        })
    }

    /// How the round stopped, if it did: the call's own answer is then
    /// not what the client gets.
    pub(super) fn stopped(
        &self,
        keys: &InputKeys,
        bound_to: &str,
    ) -> Option<Result<Stopped, McpError>> {
        let stop = self
            .stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()?;
        Some(match stop {
            Stop::BadAnswer(problem) => Err(McpError::invalid_params(problem, None)),
            Stop::NeedsInput(requests) => {
                let state = State {
                    answers: self
                        .used
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .clone(),
                    declared: Some(self.capabilities.clone()),
                };
                keys.codec
                    .seal_json_with(
                        &state,
                        &SealOptions::new()
                            .associated_data(bound_to.as_bytes())
                            .ttl(STATE_TTL),
                    )
                    .map(|state| Stopped { requests, state })
                    .map_err(|e| McpError::internal_error(e.to_string(), None))
            }
        })
    }

    /// Whether the round stopped (to ask, or on a bad answer): what
    /// [`InputRound::stopped`] would take.
    pub(super) fn asked(&self) -> bool {
        self.stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// Every answer known to this round (earlier rounds' and the new).
    pub(crate) fn given(&self) -> serde_json::Map<String, Value> {
        self.given.clone().into_iter().collect()
    }

    /// The answers the plugin used in this round.
    pub(super) fn used(&self) -> serde_json::Map<String, Value> {
        self.used
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .into_iter()
            .collect()
    }

    /// -32021 when the call failed after the plugin asked for what the
    /// client did not declare.
    pub(super) fn missing_capability(&self) -> Option<McpError> {
        let missing = self.missing.lock().unwrap_or_else(PoisonError::into_inner);
        if missing.is_empty() {
            return None;
        }
        let required: serde_json::Map<String, Value> = missing
            .iter()
            .map(|name| (name.to_string(), json!({})))
            .collect();
        Some(McpError::new(
            ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
            format!(
                "the tool needs what the client did not declare: {}",
                missing.join(", ")
            ),
            Some(json!({ "requiredCapabilities": required })),
        ))
    }

    fn declared(&self, method: &str) -> Option<bool> {
        let c = &self.capabilities;
        match method {
            ELICIT => Some(c.elicitation.is_some()),
            SAMPLE => Some(c.sampling.is_some()),
            ROOTS => Some(c.roots.is_some()),
            _ => None,
        }
    }

    fn stop_with(&self, stop: Stop) {
        let mut slot = self.stop.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(stop);
            self.stopping.notify_one();
        }
    }

    /// Once the round has stopped (at once if it has).
    pub(super) async fn has_stopped(&self) {
        loop {
            let notified = self.stopping.notified();
            if self
                .stop
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_some()
            {
                return;
            }
            notified.await;
        }
    }
}

/// An input-required answer: what is asked, and the state to send back.
pub(crate) struct Stopped {
    pub(super) requests: InputRequests,
    pub(super) state: String,
}

#[wasmtime_wasi::async_trait]
impl ClientChannel for InputRound {
    async fn log(&self, level: LogLevel, message: String) {
        if let Some(threshold) = self.relay.log_level {
            let severity = super::session_client::severity;
            if severity(super::session_client::logging_level(level)) >= severity(threshold) {
                self.relay.to.log(level, message).await;
            }
        }
    }

    async fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        self.relay.to.progress(progress, total, message).await;
    }

    async fn create_message(&self, params: String) -> Result<String, AskError> {
        self.ask_one(SAMPLE, params).await
    }

    async fn elicit(&self, params: String) -> Result<String, AskError> {
        self.ask_one(ELICIT, params).await
    }

    async fn list_roots(&self) -> Result<String, AskError> {
        self.ask_one(ROOTS, "{}".into()).await
    }

    async fn ask(&self, requests: Vec<PluginRequest>) -> Vec<Result<String, AskError>> {
        if self
            .stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
        {
            return requests.iter().map(|_| Err(AskError::AskedLater)).collect();
        }
        let mut answers = Vec::with_capacity(requests.len());
        let mut asked = InputRequests::new();
        for request in requests {
            let answer = match self.declared(&request.method) {
                None => Err(AskError::UnknownMethod(request.method.clone())),
                Some(false) => {
                    let name = capability(&request.method);
                    let mut missing = self.missing.lock().unwrap_or_else(PoisonError::into_inner);
                    if !missing.contains(&name) {
                        missing.push(name);
                    }
                    Err(AskError::Unsupported(request.method.clone()))
                }
                Some(true) => match self.given.get(&request.key) {
                    Some(answer) => match check_answer(&request.method, answer) {
                        Ok(()) => {
                            self.used
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .insert(request.key.clone(), answer.clone());
                            Ok(answer.to_string())
                        }
                        Err(problem) => {
                            self.stop_with(Stop::BadAnswer(format!(
                                "inputResponses.{}: {problem}",
                                request.key
                            )));
                            Err(problem.into())
                        }
                    },
                    None => match input_request(&request.method, &request.params) {
                        Ok(input) => {
                            asked.insert(request.key.clone(), input);
                            Err(AskError::AskedLater)
                        }
                        Err(problem) => Err(problem),
                    },
                },
            };
            answers.push(answer);
        }
        if !asked.is_empty() {
            self.stop_with(Stop::NeedsInput(asked));
        }
        answers
    }
}

impl InputRound {
    async fn ask_one(&self, method: &str, params: String) -> Result<String, AskError> {
        // The single requests' keys are the sandbox's (`elicitation-1`);
        // this is reached only through `ask`.
        self.ask(vec![PluginRequest {
            key: format!("{method}-direct"),
            method: method.into(),
            params,
        }])
        .await
        .pop()
        .unwrap_or(Err(AskError::NoAnswer))
    }
}

fn capability(method: &str) -> &'static str {
    match method {
        ELICIT => "elicitation",
        SAMPLE => "sampling",
        _ => "roots",
    }
}

/// The plugin's JSON params as the request the client is sent.
fn input_request(method: &str, params: &str) -> Result<InputRequest, AskError> {
    let invalid = |source| AskError::InvalidParams {
        method: method.into(),
        source,
    };
    Ok(match method {
        ELICIT => InputRequest::Elicitation(ElicitRequest::new(
            serde_json::from_str::<ElicitRequestParams>(params).map_err(invalid)?,
        )),
        SAMPLE => InputRequest::CreateMessage(CreateMessageRequest::new(
            serde_json::from_str::<CreateMessageRequestParams>(params).map_err(invalid)?,
        )),
        _ => InputRequest::ListRoots(ListRootsRequest::default()),
    })
}

/// Whether `answer` reads as the result of `method`.
pub(crate) fn check_answer(method: &str, answer: &Value) -> Result<(), NotAResult> {
    let fits = match method {
        ELICIT => serde_json::from_value::<rmcp::model::ElicitResult>(answer.clone()).is_ok(),
        SAMPLE => {
            serde_json::from_value::<rmcp::model::CreateMessageResult>(answer.clone()).is_ok()
        }
        _ => serde_json::from_value::<rmcp::model::ListRootsResult>(answer.clone()).is_ok(),
    };
    if fits {
        Ok(())
    } else {
        Err(NotAResult {
            method: method.into(),
        })
    }
}

/// What the client gets instead of the answer of a call that ran in
/// `round` (`failed`: that answer is an error), if anything: an input-required result if the plugin asked for
/// what is not answered yet; -32021 if it failed after asking for what the
/// client did not declare.
pub(crate) fn overrides(
    round: &InputRound,
    keys: &InputKeys,
    bound_to: &str,
    failed: bool,
) -> Option<Result<rmcp::model::InputRequiredResult, McpError>> {
    overrides_binding(round, keys, || bound_to.to_string(), failed)
}

/// [`overrides`], with what the new `requestState` is bound to made only
/// when the round stopped to ask (a lone call that asked nothing never
/// hashes its arguments).
pub(crate) fn overrides_binding(
    round: &InputRound,
    keys: &InputKeys,
    bound_to: impl FnOnce() -> String,
    failed: bool,
) -> Option<Result<rmcp::model::InputRequiredResult, McpError>> {
    if round.asked() {
        let bound_to = bound_to();
        if let Some(stopped) = round.stopped(keys, &bound_to) {
            return Some(stopped.map(|Stopped { requests, state }| {
                rmcp::model::InputRequiredResult::new(Some(requests), Some(state))
            }));
        }
    }
    if failed {
        return round.missing_capability().map(Err);
    }
    None
}

/// What a `requestState` is bound to: the method, the name, who asked and
/// the arguments (a digest of them, whatever the order of their keys), so
/// that it is good for nothing else: answers given for one call are never
/// replayed into a call with other arguments.
pub(crate) fn bind(
    method: &str,
    name: &str,
    person: Option<&str>,
    arguments: Option<&serde_json::Map<String, Value>>,
) -> String {
    use sha2::Digest;
    // No arguments and `{}` are one call.
    let mut bytes = Vec::new();
    match arguments {
        Some(arguments) => canonical_object(arguments, &mut bytes),
        None => bytes.extend_from_slice(b"{}"),
    }
    let digest = sha2::Sha256::digest(&bytes);
    format!("{method}\0{name}\0{}\0{digest:x}", person.unwrap_or(""))
}

/// `value` as JSON with every object's keys in order, so that equal
/// arguments sent in another order bind the same.
fn canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => canonical_object(map, out),
        Value::Array(items) => {
            out.push(b'[');
            for (at, item) in items.iter().enumerate() {
                if at > 0 {
                    out.push(b',');
                }
                canonical(item, out);
            }
            out.push(b']');
        }
        other => {
            let _ = serde_json::to_writer(&mut *out, other);
        }
    }
}

/// An object as [`canonical`] writes it: its keys in order.
fn canonical_object(map: &serde_json::Map<String, Value>, out: &mut Vec<u8>) {
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    out.push(b'{');
    for (at, key) in keys.into_iter().enumerate() {
        if at > 0 {
            out.push(b',');
        }
        let _ = serde_json::to_writer(&mut *out, key);
        out.push(b':');
        canonical(&map[key], out);
    }
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relay() -> Relay {
        Relay {
            log_level: None,
            to: Arc::new(super::super::answer_stream::StatelessClient::default()),
        }
    }

    fn everything() -> ClientCapabilities {
        serde_json::from_value(json!({ "elicitation": {}, "sampling": {}, "roots": {} })).unwrap()
    }

    fn elicit(key: &str) -> PluginRequest {
        PluginRequest {
            key: key.into(),
            method: ELICIT.into(),
            params: json!({
                "message": "Name?",
                "requestedSchema": { "type": "object", "properties": { "name": { "type": "string" } } }
            })
            .to_string(),
        }
    }

    /// One round: the plugin asks for `key`; the state it ends with.
    async fn round_state(
        keys: &InputKeys,
        bound: &str,
        state: Option<&str>,
        responses: Option<InputResponses>,
    ) -> Result<Option<String>, McpError> {
        let round = InputRound::open(
            keys,
            bound,
            Some(everything()),
            state,
            responses.as_ref(),
            relay(),
        )?;
        round.ask(vec![elicit("first"), elicit("second")]).await;
        Ok(match round.stopped(keys, bound) {
            Some(stopped) => Some(stopped?.state),
            None => None,
        })
    }

    #[tokio::test]
    async fn a_state_opens_only_unchanged_for_its_request_and_with_a_key_it_was_sealed_with() {
        let keys = InputKeys::from_file_text(
            "active = \"new\"\n[keys]\nnew = \"0123456789abcdef0123456789abcdef\"\nold = \"fedcba9876543210fedcba9876543210\"\n",
        )
        .unwrap();
        let arguments = json!({ "a": 1, "b": [{ "y": 2, "x": 1 }] });
        let bound = bind("tools/call", "ask", Some("ada"), arguments.as_object());
        // The same arguments, their keys in another order: the same binding.
        let reordered = json!({ "b": [{ "x": 1, "y": 2 }], "a": 1 });
        assert_eq!(
            bind("tools/call", "ask", Some("ada"), reordered.as_object()),
            bound
        );
        let answer = json!({ "action": "accept", "content": { "name": "Ada" } });
        let responses: InputResponses = [("first".to_string(), answer.clone())].into();
        let state = round_state(&keys, &bound, None, Some(responses))
            .await
            .unwrap()
            .unwrap();
        // Carried: the next round needs only the second answer.
        let second: InputResponses = [("second".to_string(), answer)].into();
        assert_eq!(
            round_state(&keys, &bound, Some(&state), Some(second.clone()))
                .await
                .unwrap(),
            None
        );
        // Changed by one character, for another tool or person, or under
        // keys without the one that sealed it: refused.
        let tampered = format!("{state}-TAMPERED");
        assert!(
            round_state(&keys, &bound, Some(&tampered), None)
                .await
                .is_err()
        );
        let smuggled = json!({ "a": 2, "b": [{ "y": 2, "x": 1 }] });
        for other in [
            bind("tools/call", "other", Some("ada"), arguments.as_object()),
            bind("tools/call", "ask", Some("bob"), arguments.as_object()),
            bind("tools/call", "ask", Some("ada"), smuggled.as_object()),
            bind("tools/call", "ask", Some("ada"), None),
        ] {
            assert!(
                round_state(&keys, &other, Some(&state), None)
                    .await
                    .is_err()
            );
        }
        let rotated = InputKeys::from_file_text(
            "active = \"newer\"\n[keys]\nnewer = \"abcdefabcdefabcdefabcdefabcdefab\"\nnew = \"0123456789abcdef0123456789abcdef\"\n",
        )
        .unwrap();
        assert_eq!(
            round_state(&rotated, &bound, Some(&state), Some(second.clone()))
                .await
                .unwrap(),
            None
        );
        let retired = InputKeys::from_file_text(
            "active = \"newer\"\n[keys]\nnewer = \"abcdefabcdefabcdefabcdefabcdefab\"\n",
        )
        .unwrap();
        assert!(
            round_state(&retired, &bound, Some(&state), Some(second))
                .await
                .is_err()
        );
    }

    #[test]
    fn a_short_key_or_an_unknown_active_key_is_refused() {
        assert!(InputKeys::from_file_text("active = \"a\"\n[keys]\na = \"short\"\n").is_err());
        assert!(
            InputKeys::from_file_text(
                "active = \"b\"\n[keys]\na = \"0123456789abcdef0123456789abcdef\"\n"
            )
            .is_err()
        );
    }

    #[tokio::test]
    async fn an_answer_of_the_wrong_shape_is_refused_and_a_missing_one_asked_again() {
        let keys = InputKeys::random();
        let bound = bind("tools/call", "ask", None, None);
        let wrong: InputResponses = [("first".to_string(), json!({ "roots": "no" }))].into();
        let round = InputRound::open(
            &keys,
            &bound,
            Some(everything()),
            None,
            Some(&wrong),
            relay(),
        )
        .unwrap();
        round.ask(vec![elicit("first")]).await;
        assert!(matches!(round.stopped(&keys, &bound), Some(Err(_))));
        let not_object: InputResponses = [("first".to_string(), json!(12345))].into();
        assert!(
            InputRound::open(
                &keys,
                &bound,
                Some(everything()),
                None,
                Some(&not_object),
                relay()
            )
            .is_err()
        );
        let round =
            InputRound::open(&keys, &bound, Some(everything()), None, None, relay()).unwrap();
        round.ask(vec![elicit("first")]).await;
        let Some(Ok(stopped)) = round.stopped(&keys, &bound) else {
            panic!("asked again")
        };
        assert_eq!(stopped.requests.keys().collect::<Vec<_>>(), ["first"]);
    }
}
