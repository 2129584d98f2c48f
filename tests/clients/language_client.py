"""Calls the Python and JavaScript examples with the official MCP Python SDK
2.x `mcp.Client` in its default mode, over Streamable HTTP.

    language_client.py <url>

Lists the tools (the output schemas must be there), makes a structured call
on each language's plugin and a business error on each, and prints one JSON
line with what it saw; exits non-zero on any failure.
"""

import asyncio
import json
import sys

from mcp import Client


async def main(url):
    async with Client(url) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        for name in ("word_stats", "slugify", "change_case", "find_all"):
            assert name in tools, sorted(tools)
        assert tools["word_stats"].output_schema["properties"]["top_words"]["type"] == "array"
        assert tools["find_all"].output_schema["required"] == ["count", "matches"]

        stats = await client.call_tool("word_stats", {"text": "to be or not to be", "top": 1})
        assert not stats.is_error, stats
        found = await client.call_tool("find_all", {"text": "a1 b22", "pattern": "\\d+"})
        assert not found.is_error, found

        slug = await client.call_tool("slugify", {"text": "?!"})
        assert slug.is_error, slug
        pattern = await client.call_tool("find_all", {"text": "x", "pattern": "("})
        assert pattern.is_error, pattern

        print(json.dumps({
            "protocol": client.protocol_version,
            "word_stats": stats.structured_content,
            "find_all": found.structured_content,
            "slugify_error": slug.content[0].text,
            "find_all_error": pattern.content[0].text,
        }))


asyncio.run(main(sys.argv[1]))
