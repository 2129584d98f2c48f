"""__NAME__: a toolhost plugin in Python.

Live while you edit: `toolhost dev` (rebuilds on save and serves it).
Build once: componentize-py -d wit -w full componentize -p . app -o target/__ID__.wasm
Test: python3 -m unittest

A tool is a typed function with a docstring: the parameters' type hints
become the input schema, a dataclass return type the output schema (see
toolhost_plugin.py). Only modules imported at build time are in the
component: import what a tool needs at the top of the file.
"""

from dataclasses import dataclass

from toolhost_plugin import ToolError, Tools, prompt, tool  # noqa: F401 (Tools is the export)


@dataclass
class Greeting:
    greeting: str


@tool(name="__NAME__", read_only=True)
def greet(name: str) -> Greeting:
    """Greets someone by name.

    Args:
        name: Who to greet
    """
    if not name.strip():
        raise ToolError("EMPTY_NAME", "name must not be empty")
    return Greeting(greeting=f"Hello, {name}!")


@prompt(name="__NAME___prompt")
def greeting_prompt(name: str) -> str:
    """Asks the model for a warm greeting.

    Args:
        name: Who to greet

    Prompts (and resources, ``@resource("notes://{day}")``) are typed
    functions too: contract 0.2.0.
    """
    return f"Write a short, warm greeting for {name}."
