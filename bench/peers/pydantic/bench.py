"""PydanticAI (and its own client's floor) in the peer benchmarks.

Same command line and output as the Rust binaries (see bench/peers/common/src/lib.rs):

    python bench.py FRAMEWORK inproc --runs N [--warmup N]
    python bench.py FRAMEWORK http   --url URL --concurrency C [--seconds S] [--warmup-seconds S]
    python bench.py FRAMEWORK parked --url URL --runs N [--warmup-url URL]

FRAMEWORK is `pydantic-ai` (an Agent with output_type=Triage and one async tool) or
`openai-py` (the floor: the bare `openai` SDK client PydanticAI sends through, sending
the same two requests, no agent).

The scenario mapping: turn 1 calls `lookup_order` (an async tool registered with
`@agent.tool_plain`; PydanticAI validates its arguments with pydantic), turn 2 calls
PydanticAI's output tool `final_result` whose arguments PydanticAI validates into
`Triage`. In-process, `FunctionModel` answers statelessly (a tool call when the
history holds no tool return, else the output tool); over HTTP, `OpenAIChatModel`
with `OpenAIProvider(base_url=...)` talks to the shared Rust mock server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any, Awaitable, Callable, Literal

import httpx2
from openai import AsyncOpenAI
from pydantic import BaseModel, Field
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.usage import RequestUsage

SYSTEM_PROMPT = 'You triage support tickets. Look the order up, then submit your decision.'
INPUT = 'Ticket #4821: my order A-1001 has not arrived yet, where is it?'
TOOL_ARGS = {'order_id': 'A-1001'}
OUTPUT_ARGS = {
    'severity': 2,
    'queue': 'shipping',
    'summary': 'Order A-1001 is late; the customer asks when it will arrive.',
}


class Triage(BaseModel):
    """Triage decision for one support ticket."""

    severity: int = Field(ge=1, le=4, description='Severity from 1 (lowest) to 4 (critical).')
    queue: Literal['billing', 'shipping', 'technical', 'other'] = Field(
        description='The queue that handles the ticket.'
    )
    summary: str = Field(description='A one-sentence summary of the ticket.')


def order(order_id: str) -> dict[str, Any]:
    return {
        'order_id': order_id,
        'status': 'in_transit',
        'carrier': 'DHL',
        'eta_days': 2,
        'total_cents': 4599,
    }


def check(triage: Triage) -> None:
    if not (triage.severity == 2 and triage.queue == 'shipping' and triage.summary):
        raise RuntimeError(f'unexpected output {triage!r}')


def make_agent(model: Any) -> Agent[None, Triage]:
    agent = Agent(model, output_type=Triage, system_prompt=SYSTEM_PROMPT)

    @agent.tool_plain
    async def lookup_order(order_id: str) -> dict[str, Any]:
        """Look up an order by its id."""
        return order(order_id)

    return agent


def two_turn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The stateless two-turn model for FunctionModel."""
    has_result = any(
        isinstance(m, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in m.parts) for m in messages
    )
    if has_result:
        part = ToolCallPart(info.output_tools[0].name, dict(OUTPUT_ARGS), tool_call_id='call_2')
    else:
        part = ToolCallPart('lookup_order', dict(TOOL_ARGS), tool_call_id='call_1')
    return ModelResponse(parts=[part], usage=RequestUsage(input_tokens=120, output_tokens=24))


def http_client() -> httpx2.AsyncClient:
    # The same pool for both Python clients: no connection cap (10,000 runs park at
    # once), PydanticAI's default timeouts but a long connect timeout (the accept
    # backlog of the mock server is finite).
    return httpx2.AsyncClient(
        limits=httpx2.Limits(max_connections=None, max_keepalive_connections=None),
        timeout=httpx2.Timeout(600, connect=60),
    )


def pydantic_http_run(url: str) -> Callable[[], Awaitable[None]]:
    provider = OpenAIProvider(base_url=url, api_key='sk-bench', http_client=http_client())
    agent = make_agent(OpenAIChatModel('mock', provider=provider))

    async def run() -> None:
        result = await agent.run(INPUT)
        check(result.output)

    return run


def openai_http_run(url: str) -> Callable[[], Awaitable[None]]:
    client = AsyncOpenAI(base_url=url, api_key='sk-bench', http_client=http_client())
    tools = [
        {
            'type': 'function',
            'function': {
                'name': 'lookup_order',
                'description': 'Look up an order by its id.',
                'parameters': {
                    'type': 'object',
                    'properties': {'order_id': {'type': 'string'}},
                    'required': ['order_id'],
                },
            },
        },
        {
            'type': 'function',
            'function': {
                'name': 'final_result',
                'description': Triage.__doc__,
                'parameters': Triage.model_json_schema(),
            },
        },
    ]

    async def run() -> None:
        messages: list[dict[str, Any]] = [
            {'role': 'system', 'content': SYSTEM_PROMPT},
            {'role': 'user', 'content': INPUT},
        ]
        first = await client.chat.completions.create(
            model='mock', messages=messages, tools=tools, tool_choice='auto', max_tokens=4096
        )
        call = first.choices[0].message.tool_calls[0]
        result = order(json.loads(call.function.arguments)['order_id'])
        messages.append(first.choices[0].message.model_dump(exclude_none=True))
        messages.append({'role': 'tool', 'tool_call_id': call.id, 'content': json.dumps(result)})
        second = await client.chat.completions.create(
            model='mock', messages=messages, tools=tools, tool_choice='auto', max_tokens=4096
        )
        output = json.loads(second.choices[0].message.tool_calls[0].function.arguments)
        if not (output['severity'] == 2 and output['queue'] == 'shipping'):
            raise RuntimeError(f'unexpected output {output!r}')

    return run


def rss_kib() -> tuple[int, int]:
    """(VmRSS, VmHWM) of this process, KiB."""
    fields = {}
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith(('VmRSS:', 'VmHWM:')):
                key, value = line.split(':', 1)
                fields[key] = int(value.split()[0])
    return fields.get('VmRSS', 0), fields.get('VmHWM', 0)


async def bench_inproc(run: Callable[[], Awaitable[None]], runs: int, warmup: int) -> dict[str, Any]:
    errors, first_error = 0, None
    for _ in range(warmup):
        try:
            await run()
        except Exception as e:  # noqa: BLE001 - every failure is counted and reported
            errors += 1
            first_error = first_error or repr(e)
    started = time.perf_counter()
    for _ in range(runs):
        try:
            await run()
        except Exception as e:  # noqa: BLE001
            errors += 1
            first_error = first_error or repr(e)
    elapsed = time.perf_counter() - started
    return {'runs': runs, 'us_per_run': elapsed * 1e6 / max(runs, 1), 'errors': errors, 'first_error': first_error}


async def bench_http(
    run: Callable[[], Awaitable[None]], concurrency: int, seconds: float, warmup_seconds: float
) -> dict[str, Any]:
    state = {'done': 0, 'errors': 0, 'first_error': None, 'stop': False}

    async def worker() -> None:
        while not state['stop']:
            try:
                await run()
                state['done'] += 1
            except Exception as e:  # noqa: BLE001
                state['errors'] += 1
                state['first_error'] = state['first_error'] or repr(e)
                await asyncio.sleep(0.01)

    tasks = [asyncio.create_task(worker()) for _ in range(concurrency)]
    await asyncio.sleep(warmup_seconds)
    start_count, started = state['done'], time.perf_counter()
    await asyncio.sleep(seconds)
    end_count, elapsed = state['done'], time.perf_counter() - started
    state['stop'] = True
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    runs = end_count - start_count
    return {
        'concurrency': concurrency,
        'runs': runs,
        'seconds': elapsed,
        'runs_per_s': runs / elapsed,
        'errors': state['errors'],
        'first_error': state['first_error'],
    }


async def bench_parked(run: Callable[[], Awaitable[None]], runs: int) -> dict[str, Any]:
    idle_kib, _ = rss_kib()
    started = time.perf_counter()
    results = await asyncio.gather(*(run() for _ in range(runs)), return_exceptions=True)
    wall = time.perf_counter() - started
    _, peak_kib = rss_kib()
    failures = [r for r in results if isinstance(r, BaseException)]
    return {
        'runs': runs,
        'ok': runs - len(failures),
        'errors': len(failures),
        'first_error': repr(failures[0]) if failures else None,
        'wall_s': wall,
        'idle_kib': idle_kib,
        'peak_kib': peak_kib,
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument('framework', choices=['pydantic-ai', 'openai-py'])
    parser.add_argument('scenario', choices=['inproc', 'http', 'parked'])
    parser.add_argument('--runs', type=int, default=None)
    parser.add_argument('--warmup', type=int, default=None)
    parser.add_argument('--url')
    parser.add_argument('--concurrency', type=int, default=1)
    parser.add_argument('--seconds', type=float, default=3.0)
    parser.add_argument('--warmup-seconds', type=float, default=1.0)
    parser.add_argument('--warmup-url')
    args = parser.parse_args()

    if args.scenario == 'inproc':
        if args.framework != 'pydantic-ai':
            fields: dict[str, Any] = {'pending': 'no in-process mode'}
        else:
            agent = make_agent(FunctionModel(two_turn))

            async def run() -> None:
                result = await agent.run(INPUT)
                check(result.output)

            runs = args.runs if args.runs is not None else 1000
            warmup = args.warmup if args.warmup is not None else runs // 10
            fields = await bench_inproc(run, runs, warmup)
    else:
        if not args.url:
            sys.exit('--url is required')
        make = pydantic_http_run if args.framework == 'pydantic-ai' else openai_http_run
        run = make(args.url)
        if args.scenario == 'http':
            fields = await bench_http(run, args.concurrency, args.seconds, args.warmup_seconds)
        else:
            if args.warmup_url:
                await make(args.warmup_url)()
            fields = await bench_parked(run, args.runs if args.runs is not None else 10_000)
    fields = {**fields, 'framework': args.framework, 'scenario': args.scenario}
    print(json.dumps(fields), flush=True)


if __name__ == '__main__':
    asyncio.run(main())
