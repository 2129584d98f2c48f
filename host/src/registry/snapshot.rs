//! One immutable state of the registry: every plugin file with the version
//! that serves and the newest rejection, and which plugin holds each tool
//! name. The registry (`mod.rs`) builds a new snapshot for each change and
//! swaps it in whole; the rules for tool names live here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use crate::registry::plugin::{LoadError, LoadedPlugin, Version};
use crate::registry::report::PluginReport;
use crate::registry::tools::Tool;
use crate::registry::view::View;

/// An immutable view of the registry.
#[derive(Clone, Default)]
pub struct Snapshot {
    plugins: BTreeMap<String, PluginRecord>,
    tools: BTreeMap<String, ServedTool>,
}

/// A tool together with the plugin version that serves it.
#[derive(Clone)]
pub struct ServedTool {
    pub plugin: Arc<LoadedPlugin>,
    pub tool: Arc<Tool>,
}

/// One plugin file and what became of it.
#[derive(Clone)]
pub(crate) struct PluginRecord {
    pub(crate) file: PathBuf,
    /// The version serving calls, if any.
    pub(crate) serving: Option<Arc<LoadedPlugin>>,
    /// Set when the newest version of the file was refused.
    pub(crate) rejected: Option<Rejection>,
}

#[derive(Clone)]
pub(crate) struct Rejection {
    pub(crate) version: Version,
    pub(crate) reason: Arc<LoadError>,
    pub(crate) at: SystemTime,
    /// A version that is valid but waits for a tool name held by another
    /// plugin; it is admitted when the name frees up.
    pub(super) waiting: Option<Arc<LoadedPlugin>>,
}

/// What `candidate` claims that `holder` claims too, as `candidate`'s
/// refusal: a tool name, then a prompt name or URI.
fn conflict(candidate: &LoadedPlugin, holder: &LoadedPlugin) -> Option<LoadError> {
    let tool = candidate
        .tools
        .iter()
        .find(|tool| holder.tools.iter().any(|t| t.name == tool.name));
    if let Some(tool) = tool {
        return Some(LoadError::NameTaken {
            tool: tool.name.clone(),
            holder: holder.id.clone(),
        });
    }
    catalog_conflict(candidate, holder)
}

fn catalog_conflict(candidate: &LoadedPlugin, holder: &LoadedPlugin) -> Option<LoadError> {
    let (what, same) = candidate.catalog.overlap(&holder.catalog)?;
    let holder = holder.id.clone();
    Some(if same {
        LoadError::Taken { what, holder }
    } else {
        LoadError::Overlaps { what, holder }
    })
}

/// Whether `a` goes before `b` for a name or URI both claim.
fn goes_first(a: &LoadedPlugin, b: &LoadedPlugin) -> bool {
    a.claim_order() < b.claim_order()
}

impl Snapshot {
    pub fn tool(&self, name: &str) -> Option<&ServedTool> {
        self.tools.get(name)
    }

    /// Every serving tool, by name.
    pub(crate) fn tools(&self) -> impl Iterator<Item = &ServedTool> {
        self.tools.values()
    }

    /// Whether `other` lists the same tools, in the same order, as clients
    /// see them: to tell whether a change altered the tool list. Compared
    /// in place, without building 10,000 listings twice per change.
    pub(super) fn lists_tools_as(&self, other: &Snapshot) -> bool {
        self.tools.len() == other.tools.len()
            && self.tools().zip(other.tools()).all(|(mine, theirs)| {
                Arc::ptr_eq(&mine.tool, &theirs.tool) || mine.tool.lists_as(&theirs.tool)
            })
    }

    /// Every plugin file, by id.
    pub(crate) fn plugins(&self) -> impl Iterator<Item = (&String, &PluginRecord)> {
        self.plugins.iter()
    }

    /// The content hashes of every version this snapshot knows: serving,
    /// or refused (waiting for a name, held for approval).
    pub(crate) fn content_hashes(&self) -> std::collections::HashSet<&str> {
        self.plugins
            .values()
            .flat_map(|record| {
                let serving = record
                    .serving
                    .as_ref()
                    .map(|plugin| plugin.version.content_hash.as_str());
                let refused = record
                    .rejected
                    .as_ref()
                    .map(|rejection| rejection.version.content_hash.as_str());
                serving.into_iter().chain(refused)
            })
            .collect()
    }

    /// Every plugin file and its state, as `GET /plugins` and `toolhost list`
    /// report it.
    pub(super) fn plugins_report(&self) -> Vec<PluginReport> {
        self.plugins
            .keys()
            .filter_map(|id| self.plugin_report(id))
            .collect()
    }

    /// The report on one plugin file, as `/plugins` shows it (without a
    /// load in progress).
    pub(super) fn plugin_report(&self, id: &str) -> Option<PluginReport> {
        let record = self.plugins.get(id)?;
        let file = record.file.display().to_string();
        let serving = record.serving.as_deref();
        match (&record.rejected, serving) {
            (Some(rejection), serving) if rejection.reason.held().is_some() => {
                let held = rejection.reason.held()?;
                Some(PluginReport::pending(
                    id,
                    &file,
                    held,
                    &rejection.version.content_hash,
                    rejection.at,
                    serving,
                ))
            }
            (Some(rejection), serving) => Some(PluginReport::rejected(
                id,
                &file,
                &rejection.reason.to_string(),
                &rejection.version.content_hash,
                rejection.at,
                serving,
            )),
            (None, Some(serving)) => Some(PluginReport::loaded(serving)),
            // A record is made by admitting or rejecting a version.
            (None, None) => None,
        }
    }

    /// Whether some version of plugin `id` serves.
    pub(super) fn is_serving(&self, id: &str) -> bool {
        self.plugins
            .get(id)
            .is_some_and(|record| record.serving.is_some())
    }

    /// Every serving plugin that claims something `candidate` claims (a
    /// tool name, a prompt name, a URI either would serve), each with the
    /// refusal `candidate` would get for it.
    fn conflicts(&self, candidate: &LoadedPlugin) -> Vec<(Arc<LoadedPlugin>, LoadError)> {
        let id = &candidate.id;
        let mut found: Vec<(Arc<LoadedPlugin>, LoadError)> = Vec::new();
        for tool in &candidate.tools {
            let Some(holder) = self.tools.get(&tool.name) else {
                continue;
            };
            if holder.plugin.id != *id && !found.iter().any(|(p, _)| p.id == holder.plugin.id) {
                found.push((
                    holder.plugin.clone(),
                    LoadError::NameTaken {
                        tool: tool.name.clone(),
                        holder: holder.plugin.id.clone(),
                    },
                ));
            }
        }
        if candidate.catalog.is_empty() {
            return found;
        }
        for other in self.serving().filter(|other| other.id != *id) {
            if found.iter().any(|(p, _)| p.id == other.id) {
                continue;
            }
            if let Some(reason) = catalog_conflict(candidate, other) {
                found.push((other.clone(), reason));
            }
        }
        found
    }

    /// The version of plugin `id` that serves, if one does.
    pub(super) fn serving_of(&self, id: &str) -> Option<&Arc<LoadedPlugin>> {
        self.plugins.get(id)?.serving.as_ref()
    }

    /// Every serving plugin version.
    pub(crate) fn serving(&self) -> impl Iterator<Item = &Arc<LoadedPlugin>> {
        self.plugins
            .values()
            .filter_map(|record| record.serving.as_ref())
    }

    /// The plugin that serves resource `uri` and the URI it declared for
    /// it (its own, which it is asked by): a fixed URI first, then the
    /// first template that matches it. Plugins' URIs never overlap (see
    /// [`Snapshot::admit`]), so at most one serves any URI.
    pub(crate) fn resource(&self, uri: &str) -> Option<(Arc<LoadedPlugin>, String)> {
        self.resource_seen(uri, &View::all())
    }

    /// [`Snapshot::resource`] among the plugins `view` sees: one outside
    /// it is looked for the same way as one that does not exist (not
    /// found first and dropped after), so neither answer nor time tells.
    pub(crate) fn resource_seen(
        &self,
        uri: &str,
        view: &View,
    ) -> Option<(Arc<LoadedPlugin>, String)> {
        self.serving()
            .filter(|plugin| view.sees(&plugin.id))
            .find_map(|plugin| Some((plugin.clone(), plugin.catalog.declared_uri(uri)?)))
    }

    /// The plugin that serves prompt `name` (as clients name it), among
    /// those `view` sees.
    pub(crate) fn prompt(&self, name: &str, view: &View) -> Option<Arc<LoadedPlugin>> {
        self.serving()
            .filter(|plugin| view.sees(&plugin.id))
            .find(|plugin| plugin.catalog.prompt(name).is_some())
            .cloned()
    }

    /// The resources, templates and prompts as clients see them, to tell
    /// whether a change altered one of the lists.
    pub(super) fn catalog_fingerprint(
        &self,
    ) -> [Vec<&serde_json::Map<String, serde_json::Value>>; 2] {
        let catalogs = || self.serving().map(|plugin| &plugin.catalog);
        [
            catalogs()
                .flat_map(|c| c.resources.iter().map(|r| &r.listing))
                .chain(catalogs().flat_map(|c| c.templates.iter().map(|t| &t.listing)))
                .collect(),
            catalogs()
                .flat_map(|c| c.prompts.iter().map(|p| &p.listing))
                .collect(),
        ]
    }

    /// Puts a valid version in service, unless a plugin that goes before
    /// it ([`goes_first`]) holds one of its tool names, prompt names or
    /// URIs: then it waits, naming the holder, and is admitted by itself
    /// once that is free. Plugins it goes before that hold what it claims
    /// are taken out of service (they wait in turn); their ids are
    /// returned. Load order never decides: the top level goes first, then
    /// the plugin published first.
    pub(super) fn admit(&mut self, candidate: Arc<LoadedPlugin>) -> Vec<String> {
        let id = candidate.id.clone();
        let mut conflicts = self.conflicts(&candidate);
        let blocker = conflicts
            .iter()
            .enumerate()
            .filter(|(_, (holder, _))| goes_first(holder, &candidate))
            .min_by(|(_, (a, _)), (_, (b, _))| a.claim_order().cmp(&b.claim_order()))
            .map(|(index, _)| index);
        if let Some(index) = blocker {
            let (_, reason) = conflicts.swap_remove(index);
            self.wait(&candidate, reason);
            return Vec::new();
        }
        let mut displaced = Vec::new();
        for (holder, _) in conflicts {
            // The holder now waits for the newcomer, as a newcomer would.
            let reason = conflict(&holder, &candidate).unwrap_or(LoadError::Taken {
                what: "what it serves".into(),
                holder: id.clone(),
            });
            tracing::warn!(plugin = %holder.id, by = %id, "plugin taken out of service: a plugin that goes first claims what it serves");
            self.unlist(&holder.id);
            if let Some(record) = self.plugins.get_mut(&holder.id) {
                record.serving = None;
            }
            self.wait(&holder, reason);
            displaced.push(holder.id.clone());
        }
        self.unlist(&id);
        let record = self
            .plugins
            .entry(id.clone())
            .or_insert_with(|| PluginRecord {
                file: candidate.file.clone(),
                serving: None,
                rejected: None,
            });
        record.serving = Some(candidate.clone());
        record.rejected = None;
        for tool in &candidate.tools {
            let entry = ServedTool {
                plugin: candidate.clone(),
                tool: tool.clone(),
            };
            self.tools.insert(tool.name.clone(), entry);
        }
        displaced
    }

    /// Records `candidate` as valid but waiting for what `reason` names.
    fn wait(&mut self, candidate: &Arc<LoadedPlugin>, reason: LoadError) {
        let record = self
            .plugins
            .entry(candidate.id.clone())
            .or_insert_with(|| PluginRecord {
                file: candidate.file.clone(),
                serving: None,
                rejected: None,
            });
        record.rejected = Some(Rejection {
            version: candidate.version.clone(),
            reason: Arc::new(reason),
            at: SystemTime::now(),
            waiting: Some(candidate.clone()),
        });
    }

    pub(super) fn reject(
        &mut self,
        id: &str,
        file: &Path,
        version: Version,
        reason: Arc<LoadError>,
    ) {
        let record = self
            .plugins
            .entry(id.to_string())
            .or_insert_with(|| PluginRecord {
                file: file.to_path_buf(),
                serving: None,
                rejected: None,
            });
        record.rejected = Some(Rejection {
            version,
            reason,
            at: SystemTime::now(),
            waiting: None,
        });
    }

    pub(super) fn remove(&mut self, id: &str) {
        self.unlist(id);
        self.plugins.remove(id);
    }

    /// Takes `id`'s tools off the list: the tools of the version it
    /// serves, the only ones `admit` lists for it, found by name rather
    /// than by a walk over every tool (at startup, a thousand plugins'
    /// admissions walked 10,000 tools each).
    fn unlist(&mut self, id: &str) {
        let Some(serving) = self
            .plugins
            .get(id)
            .and_then(|record| record.serving.clone())
        else {
            return;
        };
        for tool in &serving.tools {
            if self
                .tools
                .get(&tool.name)
                .is_some_and(|entry| entry.plugin.id == id)
            {
                self.tools.remove(&tool.name);
            }
        }
    }

    /// Retries versions that wait for a name or URI, the one that goes
    /// first first, until none more can be admitted; returns the ids
    /// admitted and the ids taken out of service meanwhile.
    pub(super) fn admit_waiting(&mut self) -> (Vec<String>, Vec<String>) {
        let mut admitted_ids = Vec::new();
        let mut displaced_ids = Vec::new();
        // Each round admits one plugin, and only ever over plugins that go
        // after it; the bound is a guard, not a rule.
        for _ in 0..=2 * self.plugins.len() {
            let mut waiting: Vec<Arc<LoadedPlugin>> = self
                .plugins
                .values()
                .filter_map(|record| record.rejected.as_ref()?.waiting.clone())
                .collect();
            waiting.sort_by_key(|plugin| plugin.claim_order());
            let admitted = waiting.into_iter().find(|candidate| {
                !self
                    .conflicts(candidate)
                    .iter()
                    .any(|(holder, _)| goes_first(holder, candidate))
            });
            let Some(candidate) = admitted else { break };
            admitted_ids.push(candidate.id.clone());
            displaced_ids.extend(self.admit(candidate));
        }
        admitted_ids.retain(|id| self.is_serving(id));
        displaced_ids.retain(|id| !self.is_serving(id));
        displaced_ids.dedup();
        (admitted_ids, displaced_ids)
    }

    /// Whether this version (plugin and policy bytes) is what the plugin
    /// already serves or already refused, so loading it again would change
    /// nothing.
    pub(super) fn already_judged(&self, id: &str, version: &Version) -> bool {
        let Some(record) = self.plugins.get(id) else {
            return false;
        };
        match &record.rejected {
            // A held version is judged again: it may have been approved.
            Some(rejection) if rejection.reason.held().is_some() => false,
            Some(rejection) => rejection.version == *version,
            None => record
                .serving
                .as_ref()
                .is_some_and(|serving| serving.version == *version),
        }
    }
}
