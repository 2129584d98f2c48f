"""A plugin asks its client for input, through the official MCP Python SDK 2.x.

    python_input.py <mode> <url>

<mode> is the client's `mode=`: "auto" (the stateless 2026-07-28 revision,
where the plugin's requests come back as input-required results and the SDK
calls again with the answers) or "legacy" (a 2025-11-25 session, where they
are server-to-client requests). The plugin is the same `conformance` plugin
either way; it never knows which.

It calls `test_elicitation` (a plain `elicit`), then
`test_input_required_result_multiple_inputs` (an elicitation, a sampling
request and the roots, asked together) and `test_input_required_result_prompt`
(a prompt that asks first), with callbacks that answer, and counts how many
times each callback ran. It prints one JSON line and exits non-zero on any
failure.
"""

import asyncio
import json
import sys

import mcp_types as types
from mcp import Client


async def exercise(url, mode):
    asked = {"elicitation": 0, "sampling": 0, "roots": 0}

    async def on_elicit(_context, params):
        asked["elicitation"] += 1
        properties = params.requested_schema.get("properties", {})
        content = {}
        for name, schema in properties.items():
            content[name] = {"string": "Ada", "boolean": True}.get(schema.get("type"), "x")
        if "username" in properties:
            content.update({"username": "ada", "email": "ada@example.com"})
        return types.ElicitResult(action="accept", content=content)

    async def on_sample(_context, params):
        asked["sampling"] += 1
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="Hello there!"),
            model="test-model",
            stop_reason="endTurn",
        )

    async def on_roots(_context):
        asked["roots"] += 1
        return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])

    async with Client(
        url,
        mode=mode,
        elicitation_callback=on_elicit,
        sampling_callback=on_sample,
        list_roots_callback=on_roots,
    ) as client:
        version = client.protocol_version
        elicited = await client.call_tool("test_elicitation", {"message": "Who are you?"})
        assert not elicited.is_error, elicited
        text = elicited.content[0].text
        assert '"username":"ada"' in text.replace(" ", ""), text

        several = await client.call_tool("test_input_required_result_multiple_inputs", {})
        assert not several.is_error, several
        assert several.content[0].text == "Name: Ada; Greeting: Hello there!; Roots: 1", several

        prompt = await client.get_prompt("test_input_required_result_prompt")
        said = prompt.messages[0].content.text
        assert said == "Prompt with context: Ada", said

        print(json.dumps({"mode": mode, "protocol_version": version, "asked": asked}))


if __name__ == "__main__":
    asyncio.run(asyncio.wait_for(exercise(sys.argv[2], sys.argv[1]), timeout=60))
