//! The build line of every replica sharing one store (`shared.rs`): each
//! replica's builds run where they were published, and each keeps its own
//! line in Redis (`toolhost:line:<replica>`, expiring unless refreshed, so
//! a replica that died leaves no line behind) and says so on a channel
//! (`toolhost:line`); every replica hears it, reads the others' lines, and
//! its page and `GET /publishes` show the room's whole line.
//!
//! Nothing here is durable: a line is what is building now. A replica
//! with no build says nothing, and hears only when another one moves (its
//! subscription is made again after a quiet minute, so a connection that
//! died silently is found). A replica that stops takes its line out.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use redis::AsyncCommands;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::shared::Shared;
use crate::builds::Builds;
use crate::builds::line::LineView;

/// The channel a replica's move is said on.
const CHANNEL: &str = "toolhost:line";
/// The replicas that have said a line.
const REPLICAS: &str = "toolhost:line:replicas";
/// How often a replica with builds says its line again (the seconds
/// shown move on), and how long a line said lasts.
const REFRESH: Duration = Duration::from_secs(5);
const LASTS: Duration = Duration::from_secs(20);
/// How long a quiet subscription is trusted before it is made again (a
/// connection that died silently says nothing).
const QUIET_AT_MOST: Duration = Duration::from_secs(60);
/// The most entries one replica's line is read with.
const MAX_ENTRIES: usize = 1_000;

fn key_of(replica: &str) -> String {
    format!("{CHANNEL}:{replica}")
}

/// Shares this replica's line and hears the others' until `shutdown`;
/// then its line is taken out of the store.
pub(crate) fn share(shared: Arc<Shared>, builds: Arc<Builds>, shutdown: CancellationToken) {
    let told = tokio::spawn(tell(shared.clone(), builds.clone()));
    let heard = tokio::spawn(hear(shared.clone(), builds));
    tokio::spawn(async move {
        shutdown.cancelled().await;
        told.abort();
        heard.abort();
        let mut connection = shared.connection();
        let _: redis::RedisResult<()> = redis::pipe()
            .del(key_of(shared.replica()))
            .srem(REPLICAS, shared.replica())
            .publish(CHANNEL, shared.replica())
            .query_async(&mut connection)
            .await;
    });
}

/// Says this replica's line each time it moves, and every [`REFRESH`]
/// while it has builds.
async fn tell(shared: Arc<Shared>, builds: Arc<Builds>) {
    let mut moves = builds.events();
    let mut connection = shared.connection();
    let key = key_of(shared.replica());
    let mut said_empty = true;
    loop {
        let line = builds.own_line();
        let empty = line.entries.is_empty();
        if !(empty && said_empty) {
            let told: redis::RedisResult<()> = if empty {
                redis::pipe()
                    .del(&key)
                    .srem(REPLICAS, shared.replica())
                    .publish(CHANNEL, shared.replica())
                    .query_async(&mut connection)
                    .await
            } else {
                let text = serde_json::to_string(&line).expect("serialises");
                redis::pipe()
                    .pset_ex(&key, text, LASTS.as_millis() as u64)
                    .sadd(REPLICAS, shared.replica())
                    .publish(CHANNEL, shared.replica())
                    .query_async(&mut connection)
                    .await
            };
            match told {
                Ok(()) => said_empty = empty,
                Err(error) => tracing::debug!(%error, "the build line cannot be shared now"),
            }
        }
        let closed = if empty && said_empty {
            matches!(moves.recv().await, Err(RecvError::Closed))
        } else {
            matches!(
                tokio::time::timeout(REFRESH, moves.recv()).await,
                Ok(Err(RecvError::Closed))
            )
        };
        if closed {
            return;
        }
    }
}

/// Hears the other replicas' moves and reads their lines; again after
/// Redis was away, and every [`REFRESH`] while some line is known (one
/// whose replica died expires).
async fn hear(shared: Arc<Shared>, builds: Arc<Builds>) {
    let client = match redis::Client::open(shared.url.as_str()) {
        Ok(client) => client,
        Err(error) => {
            tracing::error!(%error, "cannot hear the other replicas' build lines");
            return;
        }
    };
    let mut connection = shared.connection();
    loop {
        let subscribed = async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(CHANNEL).await?;
            Ok::<_, redis::RedisError>(pubsub)
        };
        let mut pubsub = match tokio::time::timeout(LASTS, subscribed).await {
            Ok(Ok(pubsub)) => pubsub,
            _ => {
                builds.set_elsewhere(LineView::default());
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let mut messages = pubsub.on_message();
        let mut known = read_others(&mut connection, &shared, &builds).await;
        loop {
            let wait = if known { REFRESH } else { QUIET_AT_MOST };
            match tokio::time::timeout(wait, messages.next()).await {
                // Quiet for long: subscribe again (a dead connection is
                // found so).
                Err(_) if !known => break,
                // The connection dropped: subscribe again, after a pause.
                Ok(None) => {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    break;
                }
                Ok(Some(message))
                    if message.get_payload::<String>().ok().as_deref()
                        == Some(shared.replica()) => {}
                _ => known = read_others(&mut connection, &shared, &builds).await,
            }
        }
    }
}

/// Reads every other replica's line into `builds`; whether any is there.
async fn read_others(
    connection: &mut redis::aio::ConnectionManager,
    shared: &Shared,
    builds: &Builds,
) -> bool {
    let read = async {
        let replicas: Vec<String> = connection.smembers(REPLICAS).await?;
        let others: Vec<String> = replicas
            .into_iter()
            .filter(|replica| replica != shared.replica())
            .collect();
        let mut view = LineView::default();
        let mut any = false;
        for replica in others {
            let text: Option<String> = connection.get(key_of(&replica)).await?;
            match text.as_deref().map(serde_json::from_str::<LineView>) {
                Some(Ok(mut line)) => {
                    any = true;
                    line.entries.truncate(MAX_ENTRIES);
                    view = view.with(&line);
                }
                Some(Err(_)) => {
                    tracing::warn!(%replica, "a build line in the shared store does not read; skipped")
                }
                // Expired: its replica is gone.
                None => {
                    let _: () = connection.srem(REPLICAS, &replica).await?;
                }
            }
        }
        Ok::<_, redis::RedisError>((view, any))
    };
    match read.await {
        Ok((view, any)) => {
            builds.set_elsewhere(view);
            any
        }
        Err(error) => {
            tracing::debug!(%error, "the other replicas' build lines cannot be read now");
            builds.set_elsewhere(LineView::default());
            false
        }
    }
}
