"""The official A2A Python SDK (a2a-sdk 1.3.0) as a client of agent-interop's server.

    python a2a_client.py URL card
    python a2a_client.py URL send TEXT (stream|block)
    python a2a_client.py URL resume TASK_ID DECISIONS_JSON (stream|block)
    python a2a_client.py URL get TASK_ID
    python a2a_client.py URL cancel TASK_ID

Prints one JSON line per thing received (each StreamResponse, a task, the card), as
the SDK parsed it (protobuf -> dict), or a line {"error": TYPE, "message": ...}.
"""
import asyncio
import json
import sys

import httpx
from google.protobuf import json_format, struct_pb2

from a2a.client import ClientConfig, ClientFactory
from a2a.types import a2a_pb2
from a2a.utils.proto_utils import _validate_proto_required_fields_internal


def emit(message):
    """One line: the message as a dict, with `__violations` when a field the
    specification marks REQUIRED is missing (the SDK's own check)."""
    line = json_format.MessageToDict(message)
    violations = _validate_proto_required_fields_internal(message)
    if violations:
        line["__violations"] = [v["field"] for v in violations]
    print(json.dumps(line), flush=True)


async def main():
    url, command, *rest = sys.argv[1:]
    async with httpx.AsyncClient(timeout=60) as http:
        streaming = rest[-1] == "stream" if rest else True
        config = ClientConfig(streaming=streaming, httpx_client=http)
        client = await ClientFactory(config).create_from_url(url)
        try:
            if command == "card":
                # Strict: every member of the served card is a field of AgentCard.
                raw = (await http.get(url.rstrip("/") + "/.well-known/agent-card.json")).json()
                emit(json_format.ParseDict(raw, a2a_pb2.AgentCard()))
            elif command in ("send", "resume"):
                if command == "send":
                    message = a2a_pb2.Message(
                        message_id="m-1",
                        role=a2a_pb2.ROLE_USER,
                        parts=[a2a_pb2.Part(text=rest[0])],
                    )
                else:
                    data = struct_pb2.Value()
                    json_format.ParseDict({"decisions": json.loads(rest[1])}, data)
                    message = a2a_pb2.Message(
                        message_id="m-2",
                        task_id=rest[0],
                        role=a2a_pb2.ROLE_USER,
                        parts=[a2a_pb2.Part(data=data)],
                    )
                request = a2a_pb2.SendMessageRequest(message=message)
                async for event in client.send_message(request):
                    emit(event)
            elif command == "get":
                emit(await client.get_task(a2a_pb2.GetTaskRequest(id=rest[0])))
            elif command == "cancel":
                emit(await client.cancel_task(a2a_pb2.CancelTaskRequest(id=rest[0])))
        except Exception as error:  # the test reads the error's type and message
            print(json.dumps({"error": type(error).__name__, "message": str(error)}), flush=True)
        finally:
            await client.close()


asyncio.run(main())
