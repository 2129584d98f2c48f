//! The results of a run: rows for the printed table and the same values,
//! keyed "section: measure", for the JSON file.

use serde_json::{Value, json};

use crate::probes::WrkResult;

/// The results so far: rows for the printed table, and the same values
/// keyed "section: measure" for the JSON file.
#[derive(Default)]
pub(crate) struct Report {
    pub(crate) rows: Vec<(String, String, String)>,
    pub(crate) json: serde_json::Map<String, Value>,
}

impl Report {
    pub(crate) fn record(&mut self, section: &str, name: &str, value: Value, shown: String) {
        self.rows
            .push((section.to_string(), name.to_string(), shown));
        self.json.insert(format!("{section}: {name}"), value);
    }

    pub(crate) fn requests_per_second(&mut self, section: &str, label: &str, run: &WrkResult) {
        let name = format!("{label} req/s");
        self.record(section, &name, json!(run.rps), format!("{:.0}", run.rps));
    }

    pub(crate) fn latency(&mut self, section: &str, name: &str, run: &WrkResult) {
        let shown = format!("{:.2} / {:.2}", run.p50_ms, run.p99_ms);
        self.record(section, name, json!([run.p50_ms, run.p99_ms]), shown);
    }

    /// Throughput and latency of one wrk run, as two rows.
    pub(crate) fn load(&mut self, section: &str, label: &str, run: &WrkResult) {
        self.requests_per_second(section, label, run);
        self.latency(section, &format!("{label} p50/p99 ms"), run);
    }

    pub(crate) fn ratio(&mut self, section: &str, name: &str, ratio: f64) {
        self.record(
            section,
            name,
            json!(ratio),
            format!("{:.0}%", 100.0 * ratio),
        );
    }
}
