//! One immutable state of the registry: every plugin file with the version
//! that serves and the newest rejection, and which plugin holds each tool
//! name. The registry (`mod.rs`) builds a new snapshot for each change and
//! swaps it in whole; the rules for tool names live here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use crate::registry::loader::{LoadError, LoadedPlugin, Version};
use crate::registry::report::PluginReport;
use crate::registry::tools::Tool;

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

impl Snapshot {
    pub fn tool(&self, name: &str) -> Option<&ServedTool> {
        self.tools.get(name)
    }

    /// Every serving tool, by name.
    pub(crate) fn tools(&self) -> impl Iterator<Item = &ServedTool> {
        self.tools.values()
    }

    /// The tool list as clients see it, to tell whether a change altered it.
    pub(super) fn tool_list_fingerprint(&self) -> Vec<serde_json::Map<String, serde_json::Value>> {
        self.tools().map(|entry| entry.tool.listing()).collect()
    }

    pub(crate) fn tool_names(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }

    /// Every plugin file, by id.
    pub(crate) fn plugins(&self) -> impl Iterator<Item = (&String, &PluginRecord)> {
        self.plugins.iter()
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

    /// What another serving plugin already holds of `candidate`'s tool
    /// names, resource URIs, URI templates and prompt names, if anything.
    fn conflict(&self, candidate: &LoadedPlugin) -> Option<LoadError> {
        let id = &candidate.id;
        let tool = candidate.tools.iter().find_map(|tool| {
            let holder = self.tools.get(&tool.name)?;
            (holder.plugin.id != *id).then(|| LoadError::NameTaken {
                tool: tool.name.clone(),
                holder: holder.plugin.id.clone(),
            })
        });
        if tool.is_some() || candidate.catalog.is_empty() {
            return tool;
        }
        let claims: Vec<String> = candidate.catalog.claims().collect();
        self.serving()
            .filter(|other| other.id != *id)
            .find_map(|other| {
                let what = other.catalog.claims().find(|c| claims.contains(c))?;
                Some(LoadError::Taken {
                    what,
                    holder: other.id.clone(),
                })
            })
    }

    /// Every serving plugin version.
    pub(crate) fn serving(&self) -> impl Iterator<Item = &Arc<LoadedPlugin>> {
        self.plugins
            .values()
            .filter_map(|record| record.serving.as_ref())
    }

    /// The plugin that serves resource `uri`: a fixed URI first, then
    /// the first template that matches it.
    pub(crate) fn resource(&self, uri: &str) -> Option<Arc<LoadedPlugin>> {
        let fixed =
            |plugin: &&Arc<LoadedPlugin>| plugin.catalog.resources.iter().any(|r| r.uri == uri);
        let templated = |plugin: &&Arc<LoadedPlugin>| {
            plugin
                .catalog
                .templates
                .iter()
                .any(|template| template.matches(uri).is_some())
        };
        self.serving()
            .find(fixed)
            .or_else(|| self.serving().find(templated))
            .cloned()
    }

    /// The plugin that serves prompt `name` (as clients name it).
    pub(crate) fn prompt(&self, name: &str) -> Option<Arc<LoadedPlugin>> {
        self.serving()
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

    /// Puts a valid version in service, unless one of its tool names (or
    /// resource URIs, templates, prompt names) is held by another plugin.
    pub(super) fn admit(&mut self, candidate: Arc<LoadedPlugin>) {
        let id = candidate.id.clone();
        let conflict = self.conflict(&candidate);
        let record = self
            .plugins
            .entry(id.clone())
            .or_insert_with(|| PluginRecord {
                file: candidate.file.clone(),
                serving: None,
                rejected: None,
            });
        if let Some(reason) = conflict {
            record.rejected = Some(Rejection {
                version: candidate.version.clone(),
                reason: Arc::new(reason),
                at: SystemTime::now(),
                waiting: Some(candidate),
            });
            return;
        }
        record.serving = Some(candidate.clone());
        record.rejected = None;
        self.tools.retain(|_, entry| entry.plugin.id != id);
        for tool in &candidate.tools {
            let entry = ServedTool {
                plugin: candidate.clone(),
                tool: tool.clone(),
            };
            self.tools.insert(tool.name.clone(), entry);
        }
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
        self.plugins.remove(id);
        self.tools.retain(|_, entry| entry.plugin.id != id);
    }

    /// Retries versions that waited for a tool name, oldest first, until
    /// none more can be admitted; returns the ids admitted.
    pub(super) fn admit_waiting(&mut self) -> Vec<String> {
        let mut admitted_ids = Vec::new();
        loop {
            let mut waiting: Vec<(SystemTime, Arc<LoadedPlugin>)> = self
                .plugins
                .values()
                .filter_map(|record| {
                    let rejection = record.rejected.as_ref()?;
                    Some((rejection.at, rejection.waiting.clone()?))
                })
                .collect();
            waiting.sort_by_key(|(at, _)| *at);
            let admitted = waiting
                .into_iter()
                .find(|(_, candidate)| self.conflict(candidate).is_none());
            match admitted {
                Some((_, candidate)) => {
                    admitted_ids.push(candidate.id.clone());
                    self.admit(candidate);
                }
                None => return admitted_ids,
            }
        }
    }

    /// Whether this version (plugin and policy bytes) is what the plugin
    /// already serves or already refused, so loading it again would change
    /// nothing.
    pub(super) fn already_judged(&self, id: &str, version: &Version) -> bool {
        let Some(record) = self.plugins.get(id) else {
            return false;
        };
        match &record.rejected {
            Some(rejection) => rejection.version == *version,
            None => record
                .serving
                .as_ref()
                .is_some_and(|serving| serving.version == *version),
        }
    }
}
