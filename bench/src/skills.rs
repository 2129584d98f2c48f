//! Section 18 of the harness: 1,000 skills over 300 namespaces (a
//! `SKILL.md` and one file each), listed over MCP.
//!
//! Rows, each with its target beside it in bench/README.md: every page of
//! `skills/list` walked, and the first page's p50 at c=1 for a caller who
//! sees every skill and for one whose set holds one namespace.

use std::path::Path;

use serde_json::json;

use super::options::BenchOptions;
use super::probes::{Spawned, wrk_as};
use super::report::Report;
use super::wire::{exchange, wait_until};

/// Skills: 1,000 skills over 300 namespaces (a `SKILL.md` and one file
/// each), `skills/list`'s first page (100 entries) p50 at c=1 for a
/// caller who sees them all and for one whose set holds one namespace
/// (three or four skills), and the walk through every page.
pub(super) fn section(
    options: &BenchOptions,
    work: &Path,
    duration: &str,
    report: &mut Report,
) -> anyhow::Result<()> {
    const ALL: &str = "bench-skills-all-0123456789";
    const ONE: &str = "bench-skills-one-0123456789";
    let (count, namespaces) = if options.quick { (30, 9) } else { (1000, 300) };
    let dir = work.join("skills");
    for index in 0..count {
        let name = format!("skill-{index:04}");
        let skill = dir
            .join(format!("ns{:03}", index % namespaces))
            .join("skills")
            .join(&name);
        std::fs::create_dir_all(skill.join("references"))?;
        std::fs::write(
            skill.join("SKILL.md"),
            format!(
                "---\nname: {name}\ndescription: What skill {index} teaches, and when to load it.\n---\n\
                 # {name}\n\nCall the tools in this order, then read references/NOTES.md.\n"
            ),
        )?;
        std::fs::write(skill.join("references/NOTES.md"), "# Notes\nOne line.\n")?;
    }
    let tokens = work.join("skills-tokens.toml");
    std::fs::write(
        &tokens,
        format!(
            "[[token]]\nname = \"all\"\nsecret = \"{ALL}\"\nrole = \"caller\"\n\
             [[token]]\nname = \"one\"\nsecret = \"{ONE}\"\nrole = \"caller\"\ntools = [\"ns000/*\"]\n"
        ),
    )?;
    let server = Spawned::serve(
        &dir,
        &work.join("cache-skills"),
        &["--tokens", tokens.to_str().unwrap_or_default()],
    )?;
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{}}"#;
    wait_until(|| {
        exchange(
            server.address,
            "POST",
            "/mcp",
            list,
            &format!("Authorization: Bearer {ALL}\r\n"),
        )
        .is_ok_and(|answer| answer.matches("\"uri\":\"skill://").count() >= count.min(100))
    })?;
    let (walk, pages) = super::scale::walk_pages(
        server.address,
        "skills/list",
        "skills",
        &format!("Authorization: Bearer {ALL}\r\n"),
        count,
    )?;
    let section = "Skills";
    report.record(
        section,
        &format!("skills listed over {namespaces} namespaces, every page walked ms (pages)"),
        json!({ "skills": count, "walk_ms": walk.as_secs_f64() * 1e3, "pages": pages }),
        format!("{count}: {:.1} ({pages})", walk.as_secs_f64() * 1e3),
    );
    for (label, token) in [
        ("a caller who sees all", ALL),
        ("a set of one namespace", ONE),
    ] {
        let page = wrk_as(
            work,
            server.child.id(),
            server.address,
            ("POST", "/mcp", list),
            Some(token),
            1,
            duration,
        )?;
        report.record(
            section,
            &format!("skills/list first page p50 ms, {label}"),
            json!(page.p50_ms),
            format!("{:.2}", page.p50_ms),
        );
    }
    Ok(())
}
