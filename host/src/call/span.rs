//! A tool call's `tracing` span, `call` (tool, plugin, front; at its end
//! outcome, duration, CPU, fuel and peak memory), made only when something
//! will read it.
//!
//! Debug logs and OTLP traces follow everything inside a call, so when the
//! subscriber could take anything at `debug` (`TOOLHOST_LOG` at `debug`
//! for any target, traces on, span filters) the span is made as the call
//! starts and the call runs in it. Otherwise it is made only for a line
//! logged in the call: what the plugin printed, the warn line of a failure
//! the host detected, a BUSY refusal. It holds the same fields, so the
//! line reads as it would in a span made up front. At the default level a
//! call logs nothing, and making, entering and formatting a span on every
//! call cost about 8 µs of a REST echo's CPU (bench/README.md).
//!
//! One line reads differently: `outbound HTTP denied`, logged by the
//! sandbox while the plugin runs, carries its plugin and URI but, at
//! `info`, not the call's span.

use std::sync::OnceLock;

use tracing::Span;
use tracing::level_filters::LevelFilter;

/// A call's span, made now or when first asked for.
pub(crate) struct CallSpan<'a> {
    tool: &'a str,
    plugin: Option<&'a str>,
    front: &'static str,
    span: OnceLock<Span>,
    /// Whether the span was made as the call started, so that the call
    /// runs in it.
    up_front: bool,
}

impl<'a> CallSpan<'a> {
    /// The span of a call of `tool` (of `plugin`, if it serves) through
    /// `front` (`rest`, `mcp`, ...): made now if debug logs or traces may
    /// read it.
    pub(crate) fn new(tool: &'a str, plugin: Option<&'a str>, front: &'static str) -> Self {
        let call = CallSpan {
            tool,
            plugin,
            front,
            span: OnceLock::new(),
            up_front: LevelFilter::current() >= LevelFilter::DEBUG,
        };
        if call.up_front {
            let _ = call.span.set(call.make());
        }
        call
    }

    /// The span to run the call in: the call's if it was made up front,
    /// else none.
    pub(crate) fn running(&self) -> Span {
        self.span.get().cloned().unwrap_or_else(Span::none)
    }

    /// The span to log a line of the call in: none when the call already
    /// runs in its span (entering it again would count as idle time in
    /// its trace), else the call's, made now if it was not.
    pub(crate) fn for_lines(&self) -> Span {
        if self.up_front {
            return Span::none();
        }
        self.span.get_or_init(|| self.make()).clone()
    }

    fn make(&self) -> Span {
        tracing::info_span!(
            target: "toolhost::call::invoke",
            "call",
            tool = self.tool,
            plugin = self.plugin,
            front = self.front,
            outcome = tracing::field::Empty,
            duration_ms = tracing::field::Empty,
            cpu_ms = tracing::field::Empty,
            fuel = tracing::field::Empty,
            peak_memory_bytes = tracing::field::Empty,
        )
    }
}

#[cfg(test)]
mod tests {
    use tracing::Level;

    use super::*;
    use crate::runtime::logged_at;

    #[test]
    fn made_up_front_only_when_debug_may_read_it() {
        // At info, a call that logs nothing makes no span; a line logged
        // in it gets one, with the fields a span made up front has.
        let text = logged_at(Level::INFO, || {
            let quiet = CallSpan::new("echo", Some("echo"), "rest");
            assert!(quiet.span.get().is_none());
            assert!(quiet.running().is_none());
            let failing = CallSpan::new("panic", Some("misbehave"), "mcp");
            failing.for_lines().in_scope(|| tracing::warn!("trapped"));
        });
        assert!(
            text.contains(r#"call{tool="panic" plugin="misbehave" front="mcp"}: "#)
                && text.contains("trapped"),
            "{text}"
        );

        // At debug (or with traces on), the call runs in its span.
        let text = logged_at(Level::DEBUG, || {
            let call = CallSpan::new("echo", Some("echo"), "rest");
            let running = call.running();
            assert!(!running.is_none());
            // A line is logged in the span the call runs in, not in a
            // second one or the same one entered again.
            assert!(call.for_lines().is_none());
            running.in_scope(|| call.for_lines().in_scope(|| tracing::warn!("trapped")));
        });
        assert!(
            text.contains(r#"call{tool="echo" plugin="echo" front="rest"}: "#)
                && text.contains("trapped"),
            "{text}"
        );
    }
}
