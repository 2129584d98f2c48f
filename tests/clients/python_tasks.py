"""Runs a tool as a task with the official MCP Python SDK's task helpers
(mcp 1.x, `session.experimental`: the 2025-11-25 revision's tasks), as an
agent embedding it would.

    python python_tasks.py <url> <token> <tool> <arguments-json>

Calls <tool> with `call_tool_as_task`, follows it with `poll_task` until it
ends, reads its result with `get_task_result`, and prints one JSON line:
each status seen, the result's text, and how long it took. Exits non-zero
on any failure.
"""

import asyncio
import json
import sys
import time

from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client


async def main(url: str, token: str, tool: str, arguments: dict) -> dict:
    headers = {"Authorization": f"Bearer {token}"}
    async with streamablehttp_client(url, headers=headers) as (read, write, _):
        async with ClientSession(read, write) as session:
            initialized = await session.initialize()
            started = time.monotonic()
            created = await session.experimental.call_tool_as_task(tool, arguments, ttl=600000)
            task_id = created.task.taskId
            statuses = []
            async for status in session.experimental.poll_task(task_id):
                statuses.append(status.status)
            result = await session.experimental.get_task_result(task_id, types.CallToolResult)
            return {
                "protocolVersion": initialized.protocolVersion,
                "capability": initialized.capabilities.model_dump(mode="json", exclude_none=True).get("tasks"),
                "created": created.task.status,
                "statuses": sorted(set(statuses), key=statuses.index),
                "text": result.content[0].text if result.content else None,
                "isError": result.isError,
                "seconds": time.monotonic() - started,
            }


if __name__ == "__main__":
    url, token, tool, arguments = sys.argv[1:5]
    print(json.dumps(asyncio.run(main(url, token, tool, json.loads(arguments)))))
