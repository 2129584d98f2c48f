"""An MCP session that listens through a workshop, with the official MCP
Python SDK (1.x `ClientSession` over Streamable HTTP).

    workshop_listener.py <url> <token>

It initializes, prints "ready" once its session is open, then counts
notifications/tools/list_changed and calls the instructor's `echo` tool
every 100 ms until stdin closes. Then it lists the tools and prints one
JSON line: {"listChanged": n, "calls": n, "failedCalls": n, "tools": [...]}.
"""

import asyncio
import json
import sys

import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


async def main(url, token):
    changes = 0

    async def on_message(message):
        nonlocal changes
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ToolListChangedNotification
        ):
            changes += 1

    headers = {"Authorization": "Bearer " + token}
    async with streamablehttp_client(url, headers=headers) as (read, write, _):
        async with ClientSession(read, write, message_handler=on_message) as session:
            await session.initialize()
            print("ready", flush=True)
            closed = asyncio.ensure_future(
                asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
            )
            calls = failed = 0
            while not closed.done():
                result = await session.call_tool("echo", {"text": "still here"})
                calls += 1
                if result.isError or result.content[0].text != "still here":
                    failed += 1
                await asyncio.sleep(0.1)
            # The last notifications may still be on their way.
            await asyncio.sleep(1.0)
            tools = [tool.name for tool in (await session.list_tools()).tools]
            print(
                json.dumps(
                    {
                        "listChanged": changes,
                        "calls": calls,
                        "failedCalls": failed,
                        "tools": tools,
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
