"""__NAME__: a toolhost plugin in Python.

Live while you edit: `toolhost dev` (rebuilds on save and serves it), or
`toolhost dev --server URL` onto a server that builds Python.
Publish once: `toolhost push . --server URL`.
Test: python3 -m unittest

A tool is a typed function with a docstring: the parameters' type hints
become the input schema, a dataclass return type the output schema (see
toolhost_plugin.py). Only modules imported at build time are in the
component: import what a tool needs at the top of the file.
"""

from dataclasses import dataclass

from toolhost_plugin import ToolError, Tools, tool  # noqa: F401 (Tools is the export)


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


# A prompt (a template a client offers its user) is a typed function too;
# import `prompt` from toolhost_plugin and add one when you want it:
#
# @prompt(name="__NAME___prompt")
# def greeting_prompt(name: str) -> str:
#     """Asks the model for a warm greeting.
#
#     Args:
#         name: Who to greet
#     """
#     return f"Write a short, warm greeting for {name}."
