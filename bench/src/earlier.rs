//! Section 17 of the harness: REST beside an earlier build of toolhost
//! (`--earlier DIR`: its `toolhost`, the `echo.wasm` built from the same
//! commit, and `rev` naming the commit; `make bench` builds 229c921 there
//! once). Both serve their own echo with a fresh instance per call; wrk at
//! c=16 takes five pairs of rounds, one on each, in turn's order (this
//! build first, then the earlier one first, ...). Each build's median round
//! is kept, with the server CPU each request cost, and the ratio is the
//! median of the pairs' ratios: a pair sees the same minute of this
//! machine, whose rate drifts by ±10 % within minutes, and neither build
//! always goes first. A change that costs CPU per call shows here as a
//! falling ratio.

use std::path::Path;

use serde_json::json;

use crate::probes::{Spawned, WrkResult, percentile, toolhost_binary, wrk_echo};
use crate::report::Report;

const SECTION: &str = "REST against an earlier build";
const PAIRS: usize = 5;

pub(crate) fn section(
    earlier: &Path,
    work: &Path,
    echo: &Path,
    duration: &str,
    report: &mut Report,
) -> anyhow::Result<()> {
    let rev = std::fs::read_to_string(earlier.join("rev"))?;
    let rev = rev.trim();
    let serve = |binary: &Path, echo: &Path, name: &str| -> anyhow::Result<Spawned> {
        let dir = work.join(format!("earlier-{name}"));
        std::fs::create_dir_all(&dir)?;
        std::fs::copy(echo, dir.join("echo.wasm"))?;
        Spawned::serve_with(binary, &dir, &work.join(format!("cache-{name}")), &[])
    };
    let now = serve(&toolhost_binary(), echo, "now")?;
    let then = serve(&earlier.join("toolhost"), &earlier.join("echo.wasm"), rev)?;
    let measure = |server: &Spawned| wrk_echo(work, server, "/tools/echo", duration);
    let (mut nows, mut thens, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for pair in 0..PAIRS {
        let (this, that) = if pair % 2 == 0 {
            let this = measure(&now)?;
            (this, measure(&then)?)
        } else {
            let that = measure(&then)?;
            (measure(&now)?, that)
        };
        ratios.push(this.rps / that.rps);
        nows.push(this);
        thens.push(that);
    }
    let median = |runs: &mut Vec<WrkResult>| {
        runs.sort_by(|a, b| a.rps.total_cmp(&b.rps));
        runs.swap_remove(runs.len() / 2)
    };
    let (now, then) = (median(&mut nows), median(&mut thens));
    report.record(
        SECTION,
        &format!("c=16 req/s this build / {rev}"),
        json!([now.rps, then.rps]),
        format!("{:.0} / {:.0}", now.rps, then.rps),
    );
    report.record(
        SECTION,
        &format!("c=16 server CPU us/request this build / {rev}"),
        json!([now.server_cpu_us, then.server_cpu_us]),
        format!("{:.1} / {:.1}", now.server_cpu_us, then.server_cpu_us),
    );
    report.ratio(
        SECTION,
        &format!("req/s ratio to {rev}, median of {PAIRS} alternating pairs"),
        percentile(&ratios, 50.0),
    );
    Ok(())
}
