"""An MCP client on the official Python SDK whose user accepts every elicitation it is asked, at once: the
scripted client (or host that auto-accepts) an operator must not let approve its own risky calls.

Usage: accepting_client.py <url of a streamable HTTP MCP endpoint> <tool>

Connects, calls <tool> with no arguments and prints one JSON object per line on stdout, flushed as it happens:
{"kind": "asked", "message": ...} for each elicitation (accepted), {"kind": "log", ...} for each log line,
{"kind": "result", ...} or {"kind": "refused", ...} for the call, then {"kind": "done", "asked": <count>}.
"""

import asyncio
import json
import sys

import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError


def say(kind, **data):
    print(json.dumps({"kind": kind, **data}), flush=True)


async def main(url, tool):
    asked = 0

    async def accept_everything(_context, params):
        nonlocal asked
        asked += 1
        say("asked", message=params.message)
        return types.ElicitResult(action="accept", content={})

    async def log(params):
        say("log", level=params.level, data=params.data)

    async with streamable_http_client(url) as (read, write, _session_id):
        async with ClientSession(
            read, write, elicitation_callback=accept_everything, logging_callback=log
        ) as session:
            await session.initialize()
            try:
                result = await session.call_tool(tool, {})
                text = " ".join(block.text for block in result.content if block.type == "text")
                say("result", is_error=bool(result.isError), text=text)
            except McpError as error:
                say("refused", code=error.error.code, message=error.error.message, data=error.error.data)
    say("done", asked=asked)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
