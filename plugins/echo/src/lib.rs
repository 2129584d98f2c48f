//! `echo`: the smallest useful toolhost plugin, and the template to copy.
//! One tool, `echo`, answers with the text it was given.

use toolhost_plugin::prelude::*;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// What to echo back
    text: String,
}

fn echo(args: Args) -> Result<String, ToolError> {
    Ok(args.text)
}

fn tools() -> Tools {
    Tools::new().tool(
        Tool::new("echo", "Answers with the text it is given.", echo)
            .title("Echo")
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false),
    )
}

toolhost_plugin::export!(tools);
