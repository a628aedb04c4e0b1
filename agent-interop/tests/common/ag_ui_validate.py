"""Validates AG-UI events against the official AG-UI types (ag-ui-protocol 1.0.0,
generated from https://ag-ui.com/spec/1.0/schema.json).

Reads one JSON event per line on stdin; prints one line per event: {"ok": TYPE} when
it validates as the protocol's Event union with no member the schema lacks, else
{"error": ...}.
"""
import json
import sys

from pydantic import BaseModel, TypeAdapter

from ag_ui.core import Event

adapter = TypeAdapter(Event)


def extras(model, path="$"):
    """Members the schema does not define (the models keep them rather than fail)."""
    found = [f"{path}.{k}" for k in (model.model_extra or {})]
    for name in type(model).model_fields:
        value = getattr(model, name)
        items = value if isinstance(value, list) else [value]
        for i, item in enumerate(items):
            if isinstance(item, BaseModel):
                found += extras(item, f"{path}.{name}[{i}]")
    return found


for line in sys.stdin:
    if not line.strip():
        continue
    try:
        event = adapter.validate_python(json.loads(line))
        unknown = extras(event)
        if unknown:
            print(json.dumps({"error": f"members the schema lacks: {unknown}"}), flush=True)
        else:
            print(json.dumps({"ok": event.type.value}), flush=True)
    except Exception as error:
        print(json.dumps({"error": f"{type(error).__name__}: {error}"}), flush=True)
