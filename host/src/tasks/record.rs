//! One task's record, as the store keeps it (a serde type), and how it
//! changes: answered, ended, lost, cancelled.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

/// How often a client is told to poll.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// How a run of a task's call ended.
#[derive(Clone)]
pub(crate) enum RunEnd {
    /// The tool's result (a business error too: `isError`).
    Completed(Value),
    /// The call could not give a result: a JSON-RPC error object.
    Failed(Value),
    /// The plugin asked its client for input: the requests by key, and
    /// the answers it used.
    NeedsInput {
        requests: Value,
        answers: Map<String, Value>,
    },
}

/// Where a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl Status {
    pub(crate) fn is_terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Cancelled)
    }
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct TaskRecord {
    pub(crate) id: String,
    /// Who made it (a token's person); `None` on an open server.
    pub(crate) owner: Option<String>,
    pub(crate) tool: String,
    pub(crate) arguments: Map<String, Value>,
    /// What the client said it can answer (MCP's client capabilities).
    pub(crate) capabilities: Value,
    pub(crate) status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) status_message: Option<String>,
    /// Milliseconds since the epoch.
    pub(crate) created_ms: u64,
    pub(crate) updated_ms: u64,
    pub(crate) ttl_ms: u64,
    /// What the call waits for, by key (`input_required`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) input_requests: Option<Map<String, Value>>,
    /// Every answer so far, by key.
    #[serde(default)]
    pub(crate) answers: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<Value>,
    /// The server that runs it (or last ran it).
    pub(crate) runner: String,
    /// Counts its changes (the store's compare-and-set).
    #[serde(default)]
    pub(crate) version: u64,
}

impl TaskRecord {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        id: String,
        owner: Option<String>,
        tool: String,
        arguments: Map<String, Value>,
        capabilities: Value,
        answers: Map<String, Value>,
        ttl: Duration,
        runner: String,
    ) -> Self {
        let now = now_ms();
        TaskRecord {
            id,
            owner,
            tool,
            arguments,
            capabilities,
            status: Status::Working,
            status_message: None,
            created_ms: now,
            updated_ms: now,
            ttl_ms: ttl.as_millis() as u64,
            input_requests: None,
            answers,
            result: None,
            error: None,
            runner,
            version: 0,
        }
    }

    /// When it is forgotten, in milliseconds since the epoch.
    pub(crate) fn expires_ms(&self) -> u64 {
        self.created_ms.saturating_add(self.ttl_ms)
    }

    pub(crate) fn expired(&self) -> bool {
        now_ms() >= self.expires_ms()
    }

    pub(super) fn set_status(&mut self, status: Status) {
        self.status = status;
        self.updated_ms = now_ms();
    }

    /// Takes the answers to what it waits for (others are ignored); true
    /// when nothing is missing any more, and it is to run again on
    /// `replica`.
    pub(super) fn answer(&mut self, responses: Map<String, Value>, replica: &str) -> bool {
        let Some(waiting) = self.input_requests.as_mut() else {
            return false;
        };
        if self.status != Status::InputRequired {
            return false;
        }
        for (key, answer) in responses {
            if waiting.remove(&key).is_some() {
                self.answers.insert(key, answer);
            }
        }
        self.updated_ms = now_ms();
        if !waiting.is_empty() {
            return false;
        }
        self.input_requests = None;
        self.status = Status::Working;
        self.runner = replica.to_string();
        true
    }

    pub(super) fn end(&mut self, ended: RunEnd) {
        match ended {
            RunEnd::Completed(result) => {
                self.result = Some(result);
                self.set_status(Status::Completed);
            }
            RunEnd::Failed(error) => {
                self.error = Some(error);
                self.set_status(Status::Failed);
            }
            RunEnd::NeedsInput { requests, answers } => {
                self.input_requests = requests.as_object().cloned();
                self.answers.extend(answers);
                self.set_status(Status::InputRequired);
            }
        }
    }

    /// Its run ended with the server that ran it.
    pub(super) fn fail_lost(&mut self) {
        self.error = Some(json!({
            "code": -32603,
            "message": "the server running this task stopped before it ended; call the tool again",
        }));
        self.status_message = Some("lost with the server that ran it".into());
        self.set_status(Status::Failed);
    }

    /// The record without what the task holds (its arguments and answers,
    /// result, error, or what it waits for): what its maker may read of it
    /// once its tool left their set.
    pub(super) fn without_payload(mut self) -> Self {
        self.arguments = Map::new();
        self.answers = Map::new();
        self.input_requests = None;
        self.result = None;
        self.error = None;
        self
    }

    /// The task as MCP's tasks extension writes it (`tasks/get`,
    /// `CreateTaskResult` without the payload): camelCase, RFC 3339 times.
    pub(crate) fn wire(&self, with_payload: bool) -> Map<String, Value> {
        let mut task = Map::new();
        task.insert("taskId".into(), json!(self.id));
        task.insert("status".into(), json!(self.status));
        if let Some(message) = &self.status_message {
            task.insert("statusMessage".into(), json!(message));
        }
        task.insert("createdAt".into(), json!(rfc3339(self.created_ms)));
        task.insert("lastUpdatedAt".into(), json!(rfc3339(self.updated_ms)));
        task.insert("ttlMs".into(), json!(self.ttl_ms));
        task.insert(
            "pollIntervalMs".into(),
            json!(POLL_INTERVAL.as_millis() as u64),
        );
        if with_payload {
            match self.status {
                Status::InputRequired => {
                    if let Some(requests) = &self.input_requests {
                        task.insert("inputRequests".into(), Value::Object(requests.clone()));
                    }
                }
                Status::Completed => {
                    if let Some(result) = &self.result {
                        task.insert("result".into(), result.clone());
                    }
                }
                Status::Failed => {
                    if let Some(error) = &self.error {
                        task.insert("error".into(), error.clone());
                    }
                }
                Status::Working | Status::Cancelled => {}
            }
        }
        task
    }
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}

fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parked() -> TaskRecord {
        let mut record = TaskRecord::new(
            "t".into(),
            None,
            "multi".into(),
            Map::new(),
            json!({}),
            Map::new(),
            Duration::from_secs(60),
            "a".into(),
        );
        record.end(RunEnd::NeedsInput {
            requests: json!({ "name": { "method": "elicitation/create" }, "ok": { "method": "elicitation/create" } }),
            answers: Map::new(),
        });
        record
    }

    #[test]
    fn answers_remove_only_what_they_answer_and_the_last_one_resumes_the_task_where_it_came() {
        let mut record = parked();
        let answer = |key: &str| {
            let mut map = Map::new();
            map.insert(key.into(), json!({ "action": "accept" }));
            map
        };
        assert!(!record.answer(answer("unknown"), "b"));
        assert!(!record.answer(answer("name"), "b"));
        assert_eq!(record.status, Status::InputRequired);
        assert_eq!(
            record
                .input_requests
                .as_ref()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            ["ok"]
        );
        assert!(record.answer(answer("ok"), "b"));
        assert_eq!(
            (record.status, record.runner.as_str()),
            (Status::Working, "b")
        );
        assert_eq!(record.answers.len(), 2);
        assert!(record.wire(true).get("inputRequests").is_none());
    }
}
