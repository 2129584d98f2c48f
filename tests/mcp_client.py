"""Drives toolhost with the official MCP Python SDK (the `mcp` package).

    mcp_client.py stdio <toolhost> <plugin-dir> <cache-dir> <plugin-to-drop>
    mcp_client.py http <url> <plugin-dir> <plugin-to-drop>
    mcp_client.py pages <url> <expected-tool-count>

Over the given transport it lists tools, calls one that succeeds and one that
fails, checks that an unknown tool is a JSON-RPC error, then drops a plugin
into the folder and waits for notifications/tools/list_changed. It prints
one JSON line with what it measured and exits non-zero on any failure.

`pages` lists every tool the way a client does on a large server: page by
page, following nextCursor, and checks that each tool comes exactly once
and that a made-up cursor is refused as invalid params.
"""

import asyncio
import json
import os
import shutil
import sys
import time

import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError


async def exercise(read, write, plugin_dir, drop_source, transport):
    list_changed = asyncio.Event()

    async def on_message(message):
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ToolListChangedNotification
        ):
            list_changed.set()

    async with ClientSession(read, write, message_handler=on_message) as session:
        init = await session.initialize()
        assert init.capabilities.tools.listChanged is True, init.capabilities

        names = [tool.name for tool in (await session.list_tools()).tools]
        assert "echo" in names and "add" not in names, names

        ok = await session.call_tool("echo", {"text": "hello from " + transport})
        assert not ok.isError and ok.content[0].text == "hello from " + transport, ok

        failed = await session.call_tool("echo", {"wrong": 1})
        assert failed.isError, failed
        assert failed.content[0].text.startswith("Error: the arguments do not match"), failed

        try:
            await session.call_tool("no_such_tool", {})
            raise AssertionError("an unknown tool must be a JSON-RPC error")
        except McpError as error:
            assert error.error.code == -32602, error.error

        # Drop a plugin the careful way (temporary name, then rename) and
        # time the notification.
        temporary = os.path.join(plugin_dir, ".math.wasm.tmp")
        shutil.copy(drop_source, temporary)
        started = time.monotonic()
        os.rename(temporary, os.path.join(plugin_dir, "math.wasm"))
        await asyncio.wait_for(list_changed.wait(), timeout=15)
        elapsed = time.monotonic() - started

        names = [tool.name for tool in (await session.list_tools()).tools]
        assert "add" in names, names
        added = await session.call_tool("add", {"a": 2, "b": 3})
        assert added.structuredContent == {"result": 5.0}, added

        print(json.dumps({"transport": transport, "list_changed_seconds": round(elapsed, 4)}))


async def pages(url, expected):
    async with streamablehttp_client(url) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            names, sizes, cursor = [], [], None
            while True:
                page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
                names += [tool.name for tool in page.tools]
                sizes.append(len(page.tools))
                cursor = page.nextCursor
                if not cursor:
                    break
            assert len(names) == expected, (len(names), expected)
            assert len(set(names)) == len(names), "a tool came twice"
            assert names == sorted(names), "pages are not in name order"
            try:
                await session.list_tools(params=types.PaginatedRequestParams(cursor="not-a-cursor"))
                raise AssertionError("a made-up cursor must be refused")
            except McpError as error:
                assert error.error.code == -32602, error.error
            print(json.dumps({"tools": len(names), "pages": sizes}))


async def main(argv):
    transport = argv[1]
    if transport == "pages":
        await pages(argv[2], int(argv[3]))
        return
    if transport == "stdio":
        toolhost, plugin_dir, cache_dir, drop_source = argv[2:6]
        server = StdioServerParameters(
            command=toolhost,
            args=["serve", "--stdio", "--plugins", plugin_dir, "--cache-dir", cache_dir],
            env={"TOOLHOST_LOG": "warn", "PATH": os.environ.get("PATH", "")},
        )
        async with stdio_client(server) as (read, write):
            await exercise(read, write, plugin_dir, drop_source, transport)
    else:
        url, plugin_dir, drop_source = argv[2:5]
        async with streamablehttp_client(url) as (read, write, _):
            await exercise(read, write, plugin_dir, drop_source, transport)


if __name__ == "__main__":
    asyncio.run(main(sys.argv))
