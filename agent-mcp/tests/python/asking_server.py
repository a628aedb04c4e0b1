"""An MCP server (the official MCP Python SDK's MCPServer, over stdio) whose tools ask the
client: `summarize` sends `sampling/createMessage`, `book` sends `elicitation/create`, `plan`
sends two, one after the other, `capabilities` tells what the client declared.

    python asking_server.py               (stdio)
    python asking_server.py --http PORT   (streamable HTTP at http://127.0.0.1:PORT/mcp)

Each tool returns one JSON object the Rust tests assert on: what the client answered,
or `{"error": ...}` with the client's JSON-RPC error.
"""

import json
import sys
import warnings

import mcp_types as types
from pydantic import BaseModel, Field

from mcp.server.mcpserver import Context, MCPServer

warnings.simplefilter("ignore")

server = MCPServer("asking-server")


@server.tool()
async def summarize(text: str, ctx: Context) -> str:
    """Summarizes the text with the client's model."""
    try:
        result = await ctx.session.create_message(
            [
                types.SamplingMessage(role="user", content=types.TextContent(type="text", text="Earlier question")),
                types.SamplingMessage(role="assistant", content=types.TextContent(type="text", text="Earlier answer")),
                types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text)),
            ],
            max_tokens=64,
            system_prompt="Summarize in five words.",
            related_request_id=ctx.request_id,
        )
    except Exception as e:  # the client's JSON-RPC error
        return json.dumps({"error": str(e)})
    content = result.content
    return json.dumps(
        {
            "role": result.role,
            "model": result.model,
            "stop_reason": result.stop_reason,
            "text": content.text if content.type == "text" else None,
        }
    )


@server.tool()
async def capabilities(ctx: Context) -> str:
    """What the client declared at the handshake: its sampling and elicitation
    capabilities and the protocol version."""
    caps = ctx.session.client_capabilities
    params = ctx.session.client_params
    dump = lambda c: None if c is None else c.model_dump(mode="json", by_alias=True, exclude_none=True)
    return json.dumps(
        {
            "sampling": dump(caps.sampling) if caps else None,
            "elicitation": dump(caps.elicitation) if caps else None,
            "protocol_version": params.protocol_version if params else None,
        }
    )


class Booking(BaseModel):
    date: str = Field(description="The day, as YYYY-MM-DD.")
    guests: int = Field(description="How many people.", ge=1)


@server.tool()
async def book(ctx: Context) -> str:
    """Books a table, asking the client for the date and the number of guests."""
    try:
        result = await ctx.elicit("Which day, and for how many?", schema=Booking)
    except Exception as e:
        return json.dumps({"error": str(e)})
    if result.action == "accept":
        return json.dumps({"action": "accept", "data": result.data.model_dump()})
    return json.dumps({"action": result.action})


class Day(BaseModel):
    date: str = Field(description="The day, as YYYY-MM-DD.")


class Guests(BaseModel):
    guests: int = Field(description="How many people.", ge=1)


@server.tool()
async def plan(ctx: Context) -> str:
    """Asks two questions, one after the other, and returns both answers (or the first
    action that was not `accept`)."""
    answers = {}
    for message, schema in (("Which day?", Day), ("For how many?", Guests)):
        try:
            result = await ctx.elicit(message, schema=schema)
        except Exception as e:
            return json.dumps({"error": str(e)})
        if result.action != "accept":
            return json.dumps({"action": result.action, "answers": answers})
        answers.update(result.data.model_dump())
    return json.dumps({"action": "accept", "answers": answers})


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
