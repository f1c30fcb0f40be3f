"""A hostile MCP server on the official Python SDK, over stdio: besides one honest tool (`echo`), it serves the
schemas a malicious or broken server could send a client to compile and check values against.

Usage: hostile_server.py <mode>
  schemas: `echo` plus tools whose input schema is a validation bomb (a chain of `$ref`s each used twice under
           `allOf`), a `$ref` cycle, a `$ref` to a remote URL, a schema of 200 KB, and one nested 100 deep.
  many:    `echo` plus 5,000 more tools.
  abyss:   `echo` plus a tool whose schema nests 300 levels deep, past what a JSON reader takes at all.
  elicit:  `echo` plus `nag`, which asks its caller 50 elicitations at once during one call and answers with how
           many were accepted, declined and cancelled (as JSON text).
"""

import asyncio
import json
import sys

import mcp.server.stdio
import mcp.types as types
from mcp.server.lowlevel import Server


def bomb(links):
    defs = {f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]} for i in range(links)}
    defs[f"d{links}"] = {"type": "string"}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": defs}


def deep(levels):
    schema = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


HOSTILE = {
    "bomb": bomb(40),
    "cycle": {
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/a"}},
        "$defs": {"a": {"allOf": [{"$ref": "#/$defs/b"}]}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}},
    },
    "remote": {"type": "object", "properties": {"x": {"$ref": "http://127.0.0.1:9/schema.json"}}},
    "giant": {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "x" * 100} for i in range(2000)}},
    "deep": deep(40),
}

ECHO = types.Tool(
    name="echo",
    description="Says the text back.",
    inputSchema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
)


def tools(mode):
    if mode == "schemas":
        return [ECHO] + [types.Tool(name=name, description="hostile", inputSchema=schema) for name, schema in HOSTILE.items()]
    if mode == "abyss":
        return [ECHO, types.Tool(name="abyss", inputSchema=deep(300))]
    if mode == "elicit":
        return [ECHO, types.Tool(name="nag", inputSchema={"type": "object"})]
    if mode == "many":
        return [ECHO] + [types.Tool(name=f"t{i}", inputSchema={"type": "object"}) for i in range(5000)]
    raise SystemExit(f"unknown mode {mode!r}")


async def main(mode):
    server = Server("hostile")
    listed = tools(mode)

    @server.list_tools()
    async def list_tools():
        return listed

    @server.call_tool(validate_input=False)
    async def call_tool(name, arguments):
        if name == "nag":
            session = server.request_context.session
            request = server.request_context.request_id
            form = {"type": "object", "properties": {"ok": {"type": "boolean", "default": True}}}
            asks = [session.elicit_form(f"question {i}", form, related_request_id=request) for i in range(50)]
            answers = await asyncio.gather(*asks, return_exceptions=True)
            counts = {"accept": 0, "decline": 0, "cancel": 0, "error": 0}
            for answer in answers:
                counts["error" if isinstance(answer, BaseException) else answer.action] += 1
            return [types.TextContent(type="text", text=json.dumps(counts))]
        if name != "echo":
            raise ValueError(f"{name} is not for calling")
        return [types.TextContent(type="text", text=arguments.get("text", ""))]

    async with mcp.server.stdio.stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
