//! Tool lists built once per registry snapshot, not once per request: the
//! REST manifest as the bytes of its JSON body, and MCP's tools as rmcp
//! values, cut into pages that `tools/list` serves with cursors.
//!
//! With 10,000 tools, building the 2.8 MB manifest took ~45 ms a request,
//! on an async worker; the registry changes rarely (a plugin loaded,
//! replaced, removed), so each list is made on the first request after a
//! change and reused until the next one. A list holds no reference to its
//! snapshot (only a weak one, to tell whether it is still current), so a
//! replaced plugin's memory is never kept alive by a cached list.
//!
//! A caller with a tool set (`registry/view.rs`) gets the lists of their
//! view, made once per snapshot and view: callers with equal sets (the
//! same group) share one, so a room of thirty makes thirty small lists
//! per change, not one per request. At most [`VIEWS_KEPT`] views' lists
//! are kept per snapshot; sessions compare digests of their view's list
//! ([`ToolLists::digest`]) to tell whether a change touched it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use arc_swap::ArcSwapOption;
use bytes::Bytes;
use rmcp::model::Tool;
use serde_json::{Value, json};

use crate::registry::Snapshot;
use crate::registry::view::View;

/// How many views' lists are kept for one snapshot; past it, one is
/// dropped for each new one (a bound on memory, not a working limit).
const VIEWS_KEPT: usize = 1024;

/// How many tools one `tools/list` page holds. Large enough that any
/// server people run answers in one page (clients that ignore
/// `nextCursor` still see every tool), small enough that 10,000 tools
/// never make one 3 MB answer.
pub(crate) const TOOLS_PAGE: usize = 1000;

/// What a cursor starts with; the rest is the last tool name of the page
/// before. Tool names are sorted and unique, so the next page starts after
/// that name even if tools came or went in between.
const CURSOR_PREFIX: &str = "after:";

/// The lists of the current snapshot, shared by every request of a front.
#[derive(Default)]
pub(crate) struct ToolLists {
    manifest: Memo<Bytes>,
    mcp: Memo<Vec<Tool>>,
    viewed_manifest: ViewMemo<Bytes>,
    viewed_mcp: ViewMemo<Vec<Tool>>,
    viewed_digest: ViewMemo<u64>,
}

impl ToolLists {
    /// `GET /tools`: each tool `view` sees as MCP describes it, plus where
    /// to call it, as a JSON body.
    pub(crate) fn manifest(&self, snapshot: &Arc<Snapshot>, view: &View) -> Bytes {
        let make = |snapshot: &Snapshot| {
            Bytes::from(serde_json::to_vec(&manifest(snapshot, view)).unwrap_or_default())
        };
        let bytes = match view.key() {
            None => self.manifest.get(snapshot, make),
            Some(key) => self.viewed_manifest.get(snapshot, key, make),
        };
        Bytes::clone(&bytes)
    }

    /// One `tools/list` page of what `view` sees: the tools after
    /// `cursor` (from the first without one), and the cursor of the next
    /// page if there is one. `None` for a cursor this server never gave.
    pub(crate) fn mcp_page(
        &self,
        snapshot: &Arc<Snapshot>,
        cursor: Option<&str>,
        view: &View,
    ) -> Option<(Vec<Tool>, Option<String>)> {
        let tools = self.mcp_tools(snapshot, view);
        let start = match cursor {
            None => 0,
            Some(cursor) => {
                let after = cursor.strip_prefix(CURSOR_PREFIX)?;
                if !crate::registry::tools::is_valid_tool_name(after) {
                    return None;
                }
                tools.partition_point(|tool| tool.name.as_ref() <= after)
            }
        };
        let page: Vec<Tool> = tools.iter().skip(start).take(TOOLS_PAGE).cloned().collect();
        let next = (start + page.len() < tools.len())
            .then(|| {
                page.last()
                    .map(|tool| format!("{CURSOR_PREFIX}{}", tool.name))
            })
            .flatten();
        Some((page, next))
    }
}

impl ToolLists {
    /// Every tool `view` sees, as `tools/list` gives them.
    fn mcp_tools(&self, snapshot: &Arc<Snapshot>, view: &View) -> Arc<Vec<Tool>> {
        let make = |snapshot: &Snapshot| -> Vec<Tool> {
            snapshot
                .tools()
                .filter(|entry| view.sees(&entry.plugin.id))
                .filter_map(|entry| {
                    serde_json::from_value(Value::Object(entry.tool.listing())).ok()
                })
                .collect()
        };
        match view.key() {
            None => self.mcp.get(snapshot, make),
            Some(key) => self.viewed_mcp.get(snapshot, key, make),
        }
    }

    /// A digest of the tool list as `view` shows it: equal digests, the
    /// same list (to tell a session whether a change touched what it
    /// sees). Made once per snapshot and view, from that view's list.
    pub(crate) fn digest(&self, snapshot: &Arc<Snapshot>, view: &View) -> u64 {
        let make = |_: &Snapshot| {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            serde_json::to_string(&*self.mcp_tools(snapshot, view))
                .unwrap_or_default()
                .hash(&mut hasher);
            hasher.finish()
        };
        let key = view.key().cloned().unwrap_or_else(|| Arc::from(""));
        *self.viewed_digest.get(snapshot, &key, make)
    }
}

/// The tools manifest: each tool `view` sees as MCP describes it, plus
/// where to call it.
pub(crate) fn manifest(snapshot: &Snapshot, view: &View) -> Value {
    let tools: Vec<Value> = snapshot
        .tools()
        .filter(|entry| view.sees(&entry.plugin.id))
        .map(|entry| {
            let mut tool = entry.tool.listing();
            tool.insert(
                "endpoint".into(),
                json!(format!("/tools/{}", entry.tool.name)),
            );
            // `method` stays POST (every tool takes it, and seed 002's
            // agent sends arguments only with POST); a read-only tool also
            // answers GET with its arguments in the query.
            tool.insert("method".into(), json!("POST"));
            if entry.tool.is_read_only() {
                tool.insert("methods".into(), json!(["GET", "POST"]));
            }
            Value::Object(tool)
        })
        .collect();
    Value::Array(tools)
}

/// A value made from one snapshot, kept until the snapshot is replaced.
/// Two requests right after a change may both make it; the last one made
/// is kept.
struct Memo<T> {
    cell: ArcSwapOption<(Weak<Snapshot>, Arc<T>)>,
}

impl<T> Default for Memo<T> {
    fn default() -> Self {
        Memo {
            cell: ArcSwapOption::empty(),
        }
    }
}

impl<T> Memo<T> {
    fn get(&self, snapshot: &Arc<Snapshot>, make: impl FnOnce(&Snapshot) -> T) -> Arc<T> {
        if let Some(held) = self.cell.load().as_ref()
            && std::ptr::eq(held.0.as_ptr(), Arc::as_ptr(snapshot))
        {
            return held.1.clone();
        }
        let made = Arc::new(make(snapshot));
        self.cell
            .store(Some(Arc::new((Arc::downgrade(snapshot), made.clone()))));
        made
    }
}

/// Values made from one snapshot for each view (by its key), kept until
/// the snapshot is replaced or [`VIEWS_KEPT`] views have one.
struct ViewMemo<T> {
    cell: Mutex<Made<T>>,
}

/// The snapshot the values were made from, and each view's value.
type Made<T> = (Weak<Snapshot>, HashMap<Arc<str>, Arc<T>>);

impl<T> Default for ViewMemo<T> {
    fn default() -> Self {
        ViewMemo {
            cell: Mutex::new((Weak::new(), HashMap::new())),
        }
    }
}

impl<T> ViewMemo<T> {
    fn get(
        &self,
        snapshot: &Arc<Snapshot>,
        key: &Arc<str>,
        make: impl FnOnce(&Snapshot) -> T,
    ) -> Arc<T> {
        {
            let held = self.cell.lock().unwrap_or_else(|e| e.into_inner());
            if std::ptr::eq(held.0.as_ptr(), Arc::as_ptr(snapshot))
                && let Some(made) = held.1.get(key)
            {
                return made.clone();
            }
        }
        // Made outside the lock: one slow list holds up no other view.
        let made = Arc::new(make(snapshot));
        let mut held = self.cell.lock().unwrap_or_else(|e| e.into_inner());
        if !std::ptr::eq(held.0.as_ptr(), Arc::as_ptr(snapshot)) {
            *held = (Arc::downgrade(snapshot), HashMap::new());
        }
        if held.1.len() >= VIEWS_KEPT
            && let Some(dropped) = held.1.keys().next().cloned()
        {
            held.1.remove(&dropped);
        }
        held.1.insert(key.clone(), made.clone());
        made
    }
}
