"""The official MCP Python SDK's client against agent-mcp's McpService.

    python serve_client.py MODE --http URL
    python serve_client.py MODE --stdio COMMAND [--env NAME=VALUE ...]

MODE is the client's connect mode: `legacy` (the initialize handshake) or `auto` (the
SDK's default: `server/discover`, falling back to initialize). Prints one JSON report on
stdout; the Rust test asserts on it.
"""

import json
import sys

import anyio
from mcp import Client, MCPError, StdioServerParameters


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def main() -> None:
    mode = sys.argv[1]
    if sys.argv[2] == "--http":
        server = sys.argv[3]
    else:
        env = dict(arg.split("=", 1) for arg in sys.argv[5::2]) if len(sys.argv) > 4 else {}
        server = StdioServerParameters(command=sys.argv[3], env=env)
    report = {}
    async with Client(server, mode=mode) as client:
        report["protocol_version"] = client.protocol_version
        report["server_name"] = client.server_info.name if client.server_info else None
        report["tools"] = [dump(t) for t in (await client.list_tools()).tools]

        progress = []

        async def on_progress(value, total, message):
            progress.append({"progress": value, "total": total, "message": message})

        result = await client.call_tool(
            "triage", {"input": "My parcel NW-10231 is late."}, progress_callback=on_progress
        )
        report["answer"] = dump(result)
        report["progress"] = progress

        report["exhausted"] = dump(await client.call_tool("exhausted", {"input": "hi"}))
        report["leaky"] = dump(await client.call_tool("leaky", {"input": "hi"}))
        report["add"] = dump(await client.call_tool("add", {"a": 2, "b": 3}))

        errors = {}
        for name, tool, args in [
            ("unknown_tool", "no_such_tool", {}),
            ("wrong_type", "triage", {"input": 7}),
            ("missing", "triage", {}),
            ("not_integer", "add", {"a": 1.5, "b": 2}),
        ]:
            try:
                await client.call_tool(tool, args)
                errors[name] = None
            except MCPError as e:
                errors[name] = {"code": e.code, "message": e.error.message}
        report["errors"] = errors

        # Cancellation: the call is abandoned once its run has made its first LLM
        # call (its first progress notification), which sends notifications/cancelled.
        started = anyio.Event()

        async def on_stuck_progress(value, total, message):
            started.set()

        cancelled = {"returned": False}
        async with anyio.create_task_group() as group:

            async def stuck(scope):
                with scope:
                    await client.call_tool(
                        "stuck", {"input": "wait"}, progress_callback=on_stuck_progress
                    )
                    cancelled["returned"] = True

            scope = anyio.CancelScope()
            group.start_soon(stuck, scope)
            await started.wait()
            scope.cancel()
        report["cancelled"] = cancelled

        # The server is alive and serves the next call.
        report["after"] = dump(await client.call_tool("add", {"a": 40, "b": 2}))
    print(json.dumps(report))


anyio.run(main)
