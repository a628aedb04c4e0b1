"""The official A2A Python SDK (a2a-sdk 1.3.0) as a server for agent-interop's client.

    python a2a_server.py MODE

Serves on 127.0.0.1 at a free port, prints `PORT <n>` once listening. MODE:
  answer  completes each task with a data artifact {"echo": INPUT}
  input   asks for input first (input-required, text "Which order?"), then completes
          with a text artifact "got: REPLY"
  hang    never answers (the task stays working)
"""
import asyncio
import socket
import sys

import uvicorn
from google.protobuf import json_format, struct_pb2
from starlette.applications import Starlette

from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2

MODE = sys.argv[1]


class Executor(AgentExecutor):
    async def execute(self, context, event_queue):
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        text = context.get_user_input()
        if MODE == "hang":
            await updater.start_work()
            await asyncio.sleep(3600)
        elif MODE == "input" and task.status.state != a2a_pb2.TASK_STATE_INPUT_REQUIRED:
            await updater.requires_input(
                updater.new_agent_message([a2a_pb2.Part(text="Which order?")])
            )
        elif MODE == "input":
            await updater.add_artifact([a2a_pb2.Part(text=f"got: {text}")], name="reply")
            await updater.complete()
        else:
            data = struct_pb2.Value()
            json_format.ParseDict({"echo": text}, data)
            await updater.add_artifact([a2a_pb2.Part(data=data)], name="output")
            await updater.complete()

    async def cancel(self, context, event_queue):
        task = context.current_task
        if task is not None:
            await TaskUpdater(event_queue, task.id, task.context_id).cancel()


def main():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    card = a2a_pb2.AgentCard(
        name=f"sdk-{MODE}",
        description="The A2A SDK's test server.",
        supported_interfaces=[
            a2a_pb2.AgentInterface(
                url=f"http://127.0.0.1:{port}/",
                protocol_binding="JSONRPC",
                protocol_version="1.0",
            )
        ],
        version="1.0.0",
        capabilities=a2a_pb2.AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["application/json"],
        skills=[a2a_pb2.AgentSkill(id="echo", name="echo", description="Echoes.", tags=["test"])],
    )
    handler = DefaultRequestHandler(Executor(), InMemoryTaskStore(), card)
    routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, "/")
    app = Starlette(routes=routes)
    config = uvicorn.Config(app, log_level="warning")
    server = uvicorn.Server(config)
    print(f"PORT {port}", flush=True)
    asyncio.run(server.serve(sockets=[sock]))


main()
