//! The call slots every call takes before its plugin runs (a tool call, a
//! resource read, a prompt, a completion): the plugin's own share
//! (`max_concurrent`, or half of `--max-calls`), and its person's share
//! over all their plugins (`--max-calls-per-person`), so that one person
//! never takes the room's slots. A call past either waits briefly, then is
//! refused as `BUSY`; the host's own slots (`--max-calls`) are the
//! runtime's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::json;
use tokio::sync::Semaphore;

use crate::call::envelope::Envelope;
use crate::call::errors::ErrorCode;
use crate::registry::layout;
use crate::registry::plugin::LoadedPlugin;

/// How long a call waits for a free slot of a plugin that is at its
/// `max_concurrent` limit (or of its person) before it is refused.
pub(crate) const BUSY_WAIT: std::time::Duration = crate::runtime::QUEUE_WAIT;

/// Each namespace's call slots, made when first needed and kept for as
/// long as the server runs (one per namespace folder there has been).
pub(crate) struct CallShares {
    per_person: usize,
    slots: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl CallShares {
    /// Each person's share: the policy's `max_calls`, else a quarter of
    /// the host's `max_calls`, at least one.
    pub(crate) fn new(
        shares: &crate::registry::shares::PersonShares,
        max_calls: usize,
    ) -> CallShares {
        CallShares {
            per_person: shares.max_calls.unwrap_or((max_calls / 4).max(1)),
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// How many calls one namespace may run at once.
    pub(crate) fn per_person(&self) -> usize {
        self.per_person
    }

    /// The call slots of `namespace`, made on its first call.
    fn of(&self, namespace: &str) -> Arc<Semaphore> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slots) = slots.get(namespace) {
            return slots.clone();
        }
        let made = Arc::new(Semaphore::new(self.per_person));
        slots.insert(namespace.to_string(), made.clone());
        made
    }
}

/// The call slots a call of `plugin` holds while it runs: its person's
/// (namespace's) share, if it is in one, and the plugin's own.
pub(crate) struct Slots {
    _person: Option<tokio::sync::OwnedSemaphorePermit>,
    _plugin: tokio::sync::OwnedSemaphorePermit,
}

/// The slots for one call of `plugin` if both are free now, without a
/// clock: the common case, for which [`slots`] would make a timer.
pub(crate) fn try_slots(shares: &CallShares, plugin: &LoadedPlugin) -> Option<Slots> {
    let person = match layout::namespace_of(&plugin.id) {
        Some(namespace) => Some(shares.of(namespace).try_acquire_owned().ok()?),
        None => None,
    };
    Some(Slots {
        _person: person,
        _plugin: plugin.permits.clone().try_acquire_owned().ok()?,
    })
}

/// Takes the slots for one call of `plugin` (every kind: a tool, a
/// resource read, a prompt, a completion), or the BUSY envelope.
pub(crate) async fn slots(shares: &CallShares, plugin: &LoadedPlugin) -> Result<Slots, Envelope> {
    // A person (a namespace) runs calls up to their share over all their
    // plugins, so that others' calls still find slots; a plugin up to its
    // own (`max_concurrent`). A call over either waits briefly, then is
    // refused as BUSY.
    let deadline = Instant::now() + BUSY_WAIT;
    let mut person_permit = None;
    if let Some(namespace) = layout::namespace_of(&plugin.id) {
        person_permit = Some(match slot(&shares.of(namespace), deadline).await {
            Some(permit) => permit,
            None => {
                let share = shares.per_person();
                tracing::warn!(code = %ErrorCode::Busy, "namespace is at its share of {share} calls");
                let busy = Envelope::host_error(
                    ErrorCode::Busy,
                    format!(
                        "{namespace:?}'s tools are already running their share of {share} calls at once; try again"
                    ),
                    Some(json!({
                        "plugin": plugin.id,
                        "namespace": namespace,
                        "maxCalls": share,
                        "retryAfterMs": BUSY_WAIT.as_millis(),
                    })),
                );
                return Err(busy);
            }
        });
    }
    let Some(permit) = slot(&plugin.permits, deadline).await else {
        tracing::warn!(
            code = %ErrorCode::Busy,
            "plugin is at its maximum of {} calls",
            plugin.max_concurrent
        );
        let busy = Envelope::host_error(
            ErrorCode::Busy,
            format!(
                "plugin {:?} is already running its maximum of {} calls; try again",
                plugin.id, plugin.max_concurrent
            ),
            Some(json!({ "plugin": plugin.id, "retryAfterMs": BUSY_WAIT.as_millis() })),
        );
        return Err(busy);
    };
    Ok(Slots {
        _person: person_permit,
        _plugin: permit,
    })
}

/// A permit of `slots`, waiting until `deadline` at most.
async fn slot(
    slots: &Arc<tokio::sync::Semaphore>,
    deadline: Instant,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    tokio::time::timeout_at(deadline.into(), slots.clone().acquire_owned())
        .await
        .ok()?
        .ok()
}
