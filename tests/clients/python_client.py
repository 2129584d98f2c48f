"""Drives toolhost with the official MCP Python SDK 2.x `mcp.Client`.

    python_client.py <mode> stdio <toolhost> <plugin-dir> <cache-dir> <plugin-to-drop>
    python_client.py <mode> http <url> <plugin-dir> <plugin-to-drop>

<mode> is the client's own `mode=`: "auto" (its default: `server/discover`
and the stateless 2026-07-28 revision when the server offers it) or
"legacy" (the initialize handshake of the 2025 revisions).

It lists tools, calls one that succeeds, one with bad arguments (isError)
and an unknown one (a JSON-RPC -32602 error), then drops the math plugin
into the folder, waits for the tool list to change (a listen stream on
2026-07-28, notifications/tools/list_changed on a session), and makes a
structured call and a business error on it. It prints one JSON line with
what it saw and exits non-zero on any failure.
"""

import asyncio
import json
import os
import shutil
import sys
import time

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError


def drop(plugin_dir, source):
    """Drops a plugin the careful way: a temporary name, then a rename."""
    temporary = os.path.join(plugin_dir, ".math.wasm.tmp")
    shutil.copy(source, temporary)
    os.rename(temporary, os.path.join(plugin_dir, "math.wasm"))


async def exercise(server, mode, transport, plugin_dir, drop_source):
    list_changed = asyncio.Event()

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification):
            list_changed.set()

    async with Client(server, mode=mode, message_handler=on_message) as client:
        version = client.protocol_version
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert "echo" in names and "add" not in names, names

        greeting = "hello from " + transport
        ok = await client.call_tool("echo", {"text": greeting})
        assert not ok.is_error and ok.content[0].text == greeting, ok

        failed = await client.call_tool("echo", {"wrong": 1})
        assert failed.is_error, failed
        assert failed.content[0].text.startswith("Error: the arguments do not match"), failed

        try:
            await client.call_tool("no_such_tool", {})
            raise AssertionError("an unknown tool must be a JSON-RPC error")
        except MCPError as error:
            assert error.code == -32602, error.error

        started = time.monotonic()
        if version >= "2026-07-28":
            async with client.listen(tools_list_changed=True) as subscription:
                drop(plugin_dir, drop_source)
                async for _event in subscription:
                    break
        else:
            drop(plugin_dir, drop_source)
            await asyncio.wait_for(list_changed.wait(), timeout=15)
        elapsed = time.monotonic() - started

        names = [tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools]
        if version >= "2026-07-28":
            # Stateless: each request may reach another replica, which loads
            # the shared folder on its own clock. The change was heard from
            # one; every replica must show it within seconds (four lists in
            # a row, so that each replica behind the balancer answered).
            deadline, in_a_row = time.monotonic() + 15, 0
            while in_a_row < 4 and time.monotonic() < deadline:
                names = [t.name for t in (await client.list_tools(cache_mode="refresh")).tools]
                in_a_row = in_a_row + 1 if "add" in names else 0
                if in_a_row == 0:
                    await asyncio.sleep(0.1)
        assert "add" in names, names
        added = await client.call_tool("add", {"a": 2, "b": 3})
        assert not added.is_error and added.structured_content == {"result": 5.0}, added
        divided = await client.call_tool("divide", {"a": 1, "b": 0})
        assert divided.is_error, divided
        assert divided.structured_content is None or "DIVISION_BY_ZERO" in json.dumps(
            divided.structured_content
        ), divided

        print(json.dumps({
            "mode": mode,
            "transport": transport,
            "protocol_version": version,
            "list_changed_seconds": round(elapsed, 4),
        }))


async def main(argv):
    mode, transport = argv[1], argv[2]
    if transport == "stdio":
        toolhost, plugin_dir, cache_dir, drop_source = argv[3:7]
        server = StdioServerParameters(
            command=toolhost,
            args=["serve", "--stdio", "--plugins", plugin_dir, "--cache-dir", cache_dir],
            env={"TOOLHOST_LOG": "warn", "PATH": os.environ.get("PATH", "")},
        )
    else:
        server, plugin_dir, drop_source = argv[3:6]
    await asyncio.wait_for(exercise(server, mode, transport, plugin_dir, drop_source), timeout=60)


if __name__ == "__main__":
    asyncio.run(main(sys.argv))
