"""Write toolhost plugins as typed Python functions (stdlib only, one file).

A tool is a function with type hints and a docstring: ``@tool`` derives its
input schema from the parameters, its output schema from the return type,
and ``Tools``, the export componentize-py looks for, serves every tool::

    from dataclasses import dataclass
    from toolhost_plugin import tool, ToolError, Tools  # Tools: the export

    @dataclass
    class Sum:
        total: float

    @tool(read_only=True)
    def add(a: float, b: float = 0) -> Sum:
        \"\"\"Adds two numbers.

        Args:
            a: The first number
            b: The second number
        \"\"\"
        return Sum(a + b)

Build: ``componentize-py -d wit -w full componentize -p . -p <folder of
this file> app -o app.wasm``. The app is imported at build time (and only
modules imported then exist at run time): a tool without a docstring or with
a type no schema describes fails the build, naming it.

A returned dataclass or TypedDict (the declared return type) is structured
content with an output schema, plus its JSON as text; ``str`` is one text
block; a ``dict`` is structured content without schema; blocks (``text``,
``image``, ...) or a ``Content`` are sent as they are. ``raise
ToolError("CODE", "message", details)`` is a business error; any other
exception is INTERNAL_ERROR, the end of its traceback in ``details``
(``error``, ``traceback``) and the whole of it in the host's log. Without the
bindings (plain CPython) tools run through ``call("add", {"a": 1})``.
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import dataclasses
import enum
import functools
import inspect
import json
import re
import sys
import traceback
import types
import typing
import urllib.parse
from http import HTTPStatus as _HTTPStatus
from typing import Annotated, Any, Literal, NamedTuple, Union, get_args, get_origin

try:  # Present only inside a component built by componentize-py.
    from componentize_py_types import Err as _Err
    from wit_world import exports as _exports
    from wit_world.exports import tools as _wit
    from wit_world.imports import client as _wit_client
    from wit_world.imports import config as _wit_config
except ImportError:
    _exports = _wit = _wit_client = _wit_config = _Err = None
try:  # Contract 0.2.0's world `full` (what `toolhost dev` and `push` build).
    from wit_world.exports import completion as _wit_completion
    from wit_world.exports import prompts as _wit_prompts
    from wit_world.exports import resources as _wit_resources
except ImportError:
    _wit_completion = _wit_prompts = _wit_resources = None
try:  # Views and tool details (the world `apps`).
    from wit_world.exports import tool_details as _wit_details
    from wit_world.exports import views as _wit_views
except ImportError:
    _wit_details = _wit_views = None
try:  # Asking several things at once, and for roots (contract 0.2.0's `input`).
    from wit_world.imports import input as _wit_input
except ImportError:
    _wit_input = None
try:  # Outbound HTTP: toolhost's Python runtime only (world `source-runtime`).
    from wit_world.imports import http as _wit_http
except ImportError:
    _wit_http = None

__all__ = [
    "tool", "ToolError", "Tools", "Content", "Block", "text", "image", "audio",
    "link", "resource", "config", "log", "progress", "create_message", "elicit",
    "ask", "list_roots", "Header", "ClientError", "call", "registry", "schema_of",
    "resource", "prompt", "Message", "user", "assistant", "Resources", "Prompts", "Completion",
    "read_resource", "get_prompt", "resources", "prompts",
    "http", "Response", "HTTPError", "HTTPRequestError", "install_urllib",
    "view", "views", "Views", "ToolDetails",
]

_NoneType = type(None)
_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean"}
_SEQUENCES = (list, set, frozenset, tuple, cabc.Sequence, cabc.Set, cabc.Iterable)
_MAPPINGS = (dict, cabc.Mapping)
_WRAPPERS = (typing.Required, typing.NotRequired, getattr(typing, "ReadOnly", typing.Required))
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class ToolError(Exception):
    """A business error: a stable UPPER_SNAKE_CASE ``code``, a sentence, and
    optional JSON-serialisable ``details``."""

    def __init__(self, code: str, message: str, details: Any = None):
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.details = code, message, details


# --- Content -----------------------------------------------------------------

class Block(NamedTuple):
    """One content block; ``fields`` are those of the WIT record."""
    kind: str  # text | image | audio | resource_link | resource
    fields: dict


def text(value: str) -> Block:
    """A text (or markdown) block."""
    return Block("text", {"text": str(value)})


def image(data: bytes, mime_type: str) -> Block:
    """An image block (base64 on the wire)."""
    return Block("image", {"data": bytes(data), "mime_type": mime_type})


def audio(data: bytes, mime_type: str) -> Block:
    """An audio block (base64 on the wire)."""
    return Block("audio", {"data": bytes(data), "mime_type": mime_type})


def link(uri: str, name: str, *, title: str | None = None, description: str | None = None,
         mime_type: str | None = None) -> Block:
    """A link to a resource the client may fetch or open."""
    return Block("resource_link", {"uri": uri, "name": name, "title": title,
                                   "description": description, "mime_type": mime_type})


def resource(uri: str, body: str | bytes | None = None, mime_type: str | None = None, *,
             name: str | None = None, title: str | None = None,
             description: str | None = None, complete: dict | None = None) -> Any:
    """With a ``body``: an embedded resource block (text, or bytes as a
    blob). Without: a decorator that serves the function as the resource
    at ``uri`` (contract 0.2.0, see ``_register_resource``)."""
    if body is None:
        return _register_resource(uri, name=name, title=title, description=description,
                                  mime_type=mime_type, complete=complete)
    return Block("resource", {"uri": uri, "mime_type": mime_type,
                              "body": body})


class Content:
    """A result: blocks in order, and optional structured data (an object)."""

    def __init__(self, *blocks: Block, structured: Any = None):
        self.blocks = list(blocks)
        self.structured = None if structured is None else _jsonable(structured)

    def texts(self) -> list[str]:
        return [b.fields["text"] for b in self.blocks if b.kind == "text"]


def _jsonable(value: Any) -> Any:
    """Dataclasses (their ``None`` fields left out: optional means absent),
    enums and containers, as plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)
                if getattr(value, f.name) is not None}
    if isinstance(value, enum.Enum):
        return _jsonable(value.value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    return value


# --- Schemas -----------------------------------------------------------------

class _Field(NamedTuple):
    name: str
    tp: Any
    required: bool   # must be given
    optional: bool   # None (missing) is passed when absent and no default
    has_default: bool
    default: Any
    description: str | None


def _doc(obj: Any) -> tuple[str, dict[str, str]]:
    """The first paragraph of a docstring and its ``Args:`` descriptions."""
    doc = inspect.cleandoc(obj.__doc__ or "") if isinstance(obj.__doc__, str) else ""
    if isinstance(obj, type) and dataclasses.is_dataclass(obj) and doc.startswith(obj.__name__ + "("):
        doc = ""  # the signature dataclass writes, not a description
    first = doc.split("\n\n")[0]
    first = "" if re.match(r"^\w+:$", first.split("\n")[0]) else " ".join(first.split())
    args: dict[str, str] = {}
    section, indent, current = False, None, None
    for line in doc.splitlines():
        stripped = line.strip()
        if not section:
            section = stripped in ("Args:", "Arguments:", "Parameters:", "Attributes:", "Fields:")
            continue
        if not stripped:
            continue
        depth = len(line) - len(line.lstrip())
        if depth == 0:
            break  # the next section
        indent = depth if indent is None else indent
        match = re.match(r"^\**(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", stripped)
        if depth == indent and match:
            current = match[1]
            args[current] = match[2]
        elif current:
            args[current] = (args[current] + " " + stripped).strip()
    return first, args


def _unwrap(tp: Any) -> tuple[Any, bool, str | None]:
    """``tp`` without ``Annotated``/``Optional``/``NotRequired``: (type,
    optional, description)."""
    optional, description = False, None
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            description = description or next((m for m in tp.__metadata__ if isinstance(m, str)), None)
            tp = get_args(tp)[0]
        elif origin in _WRAPPERS:
            tp = get_args(tp)[0]
        elif origin in (Union, types.UnionType) and _NoneType in get_args(tp):
            rest = [a for a in get_args(tp) if a is not _NoneType]
            optional, tp = True, rest[0] if len(rest) == 1 else Union[tuple(rest)]
        else:
            return tp, optional, description


def _is_object(tp: Any) -> bool:  # a dataclass or TypedDict class
    return isinstance(tp, type) and (dataclasses.is_dataclass(tp) or typing.is_typeddict(tp))


@functools.cache
def _fields(owner: Any) -> tuple[_Field, ...]:
    """The fields of a function's parameters, a dataclass or a TypedDict."""
    hints = typing.get_type_hints(owner, include_extras=True)
    docs = _doc(owner)[1]
    found = []
    if dataclasses.is_dataclass(owner):
        for f in dataclasses.fields(owner):
            if not f.init:
                continue
            has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            found.append((f.name, hints[f.name], has_default, f.default, f.metadata.get("description")))
    elif typing.is_typeddict(owner):
        for name, tp in hints.items():  # an absent key stays absent
            absent_ok = name not in owner.__required_keys__ or get_origin(tp) is typing.NotRequired
            found.append((name, tp, absent_ok, dataclasses.MISSING, None))
    else:
        for p in inspect.signature(owner).parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
                raise TypeError(f"{owner.__qualname__}: parameter {p.name!r}: tools take named parameters only")
            if p.name not in hints:
                raise TypeError(f"{owner.__qualname__}: parameter {p.name!r} has no type hint "
                                "(typing.Any accepts any JSON value)")
            has_default = p.default is not p.empty
            found.append((p.name, hints[p.name], has_default, p.default if has_default else dataclasses.MISSING, None))
    result = []
    for name, tp, has_default, default, description in found:
        optional = _unwrap(tp)[1]
        result.append(_Field(name, tp, not (optional or has_default), optional, has_default,
                             default, description or docs.get(name)))
    return tuple(result)


class Header(NamedTuple):
    """Marks a parameter that MCP 2026-07-28 clients also send as the
    ``Mcp-Param-<name>`` header (SEP-2243), for gateways that route on it:
    ``region: Annotated[str, Header("Region")]``. The server checks that
    the header and the argument agree."""
    name: str


def _header(tp: Any) -> Header | None:
    while get_origin(tp) is Annotated:
        found = next((m for m in tp.__metadata__ if isinstance(m, Header)), None)
        if found:
            return found
        tp = get_args(tp)[0]
    return None


def _object_schema(fields: tuple[_Field, ...], stack: tuple) -> dict:
    properties, required = {}, []
    for f in fields:
        schema = schema_of(f.tp, stack)
        header = _header(f.tp)
        if header:
            schema["x-mcp-header"] = header.name
        if f.description and "description" not in schema:
            schema["description"] = f.description
        if f.default is not None and f.default is not dataclasses.MISSING:
            with contextlib.suppress(TypeError, ValueError):  # not JSON: no default
                schema["default"] = json.loads(json.dumps(_jsonable(f.default)))
        properties[f.name] = schema
        if f.required:
            required.append(f.name)
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _enum(values: list) -> dict:
    kinds = {_SCALARS.get(type(v)) for v in values}
    schema = {"type": kinds.pop()} if len(kinds) == 1 and None not in kinds else {}
    return {**schema, "enum": values}


def schema_of(tp: Any, stack: tuple = ()) -> dict:
    """The portable JSON Schema of a type (``Optional`` is left to the
    caller: the schema of ``T | None`` is that of ``T``)."""
    tp, _, description = _unwrap(tp)
    origin, args = get_origin(tp), get_args(tp)
    if tp is Any:
        schema = {}
    elif tp in _SCALARS:
        schema = {"type": _SCALARS[tp]}
    elif origin is Literal:
        schema = _enum([v for v in args if v is not None])
    elif isinstance(tp, type) and issubclass(tp, enum.Enum):
        schema = _enum([m.value for m in tp])
    elif _is_object(tp):
        if tp in stack:
            raise TypeError(f"{tp.__name__} contains itself: a recursive type needs $ref, "
                            "which LLM APIs do not resolve")
        schema = _object_schema(_fields(tp), stack + (tp,))
        if _doc(tp)[0]:
            schema["description"] = _doc(tp)[0]
    elif tp in _SEQUENCES or origin in _SEQUENCES:
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            raise TypeError(f"{tp}: fixed-length tuples are not portable; use tuple[T, ...] or a dataclass")
        schema = {"type": "array"}
        if args:
            schema["items"] = schema_of(args[0], stack)
    elif tp in _MAPPINGS or origin in _MAPPINGS:
        schema = {"type": "object"}
        if args:
            if args[0] is not str:
                raise TypeError(f"{tp}: JSON object keys are strings; use dict[str, T]")
            schema["additionalProperties"] = schema_of(args[1], stack)
    elif origin in (Union, types.UnionType):
        schema = {"anyOf": [schema_of(a, stack) for a in args]}
    else:
        raise TypeError(f"no JSON Schema for the type {tp!r}: use str, int, float, bool, list, "
                        "dict, Literal, an Enum, a dataclass or a TypedDict")
    if description:
        schema["description"] = description
    return schema


# --- Arguments ---------------------------------------------------------------

def _invalid(path: str, why: str) -> ToolError:
    return ToolError("INVALID_ARGUMENTS", f"{path or 'arguments'}: {why}", {"path": path})


def _convert_fields(data: Any, fields: tuple[_Field, ...], path: str) -> dict:
    if not isinstance(data, dict):
        raise _invalid(path, "expected an object")
    known = {f.name for f in fields}
    for key in data:
        if key not in known:
            raise _invalid(f"{path}.{key}" if path else key, "unknown argument")
    out = {}
    for f in fields:
        here = f"{path}.{f.name}" if path else f.name
        value = data.get(f.name)  # null is "left out": the schema has no null
        if value is not None:
            out[f.name] = _convert(value, f.tp, here)
        elif f.required:
            raise _invalid(here, "required, and missing")
        elif not f.has_default:
            out[f.name] = None
    return out


def _convert(value: Any, tp: Any, path: str) -> Any:
    """``value`` (parsed JSON) as ``tp``: dataclasses and enums built."""
    tp, optional, _ = _unwrap(tp)
    origin, args = get_origin(tp), get_args(tp)
    if value is None:
        if optional or tp is Any:
            return None
        raise _invalid(path, "must not be null")
    if tp is Any:
        return value
    if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if tp is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if tp in _SCALARS:
        if isinstance(value, tp) and not (tp is int and isinstance(value, bool)):
            return value
        raise _invalid(path, f"expected {_SCALARS[tp]}")
    if origin is Literal:
        if value in args:
            return value
        raise _invalid(path, f"expected one of {list(args)}")
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            raise _invalid(path, f"expected one of {[m.value for m in tp]}") from None
    if _is_object(tp):
        return tp(**_convert_fields(value, _fields(tp), path))
    if tp in _SEQUENCES or origin in _SEQUENCES:
        if not isinstance(value, list):
            raise _invalid(path, "expected an array")
        items = [_convert(v, args[0], f"{path}[{i}]") for i, v in enumerate(value)] if args else value
        kind = origin or tp
        return kind(items) if kind in (set, frozenset, tuple) else items
    if tp in _MAPPINGS or origin in _MAPPINGS:
        if not isinstance(value, dict):
            raise _invalid(path, "expected an object")
        return {k: _convert(v, args[1], f"{path}.{k}") for k, v in value.items()} if args else value
    if origin in (Union, types.UnionType):
        for branch in args:
            try:
                return _convert(value, branch, path)
            except ToolError:
                pass
        raise _invalid(path, "matches none of the allowed types")
    return value


# --- Tools -------------------------------------------------------------------

@dataclasses.dataclass
class ToolSpec:
    name: str
    title: str | None
    description: str
    input_schema: dict
    output_schema: dict | None
    annotations: dict | None  # read_only, destructive, idempotent, open_world
    function: Any
    view: str | None = None  # the URI of a ``view(...)``
    visibility: tuple | None = None  # "model", "app"
    task: str | None = None  # "forbidden", "optional", "required"


registry: dict[str, ToolSpec] = {}


_TASKS = ("forbidden", "optional", "required")
_AUDIENCES = ("model", "app")


def tool(fn=None, /, *, name: str | None = None, title: str | None = None,
         description: str | None = None, read_only: bool | None = None,
         destructive: bool | None = None, idempotent: bool | None = None,
         open_world: bool | None = None, view: str | None = None,
         visibility: cabc.Iterable[str] | None = None, task: str | None = None):
    """Registers a function as a tool: ``@tool`` or ``@tool(read_only=True, ...)``.

    ``view="ui://..."`` shows its results in that ``view(...)`` (MCP Apps);
    ``visibility=["app"]`` leaves it out of an agent's list, callable by
    its view only; ``task="optional"`` or ``"required"`` runs it as an MCP
    task (a policy's ``[tasks]`` still overrides it)."""
    def register(fn):
        tool_name = name or fn.__name__
        where = f"tool {tool_name!r} ({fn.__module__}.{fn.__qualname__})"
        if not _NAME.match(tool_name):
            raise ValueError(f"{where}: a name must match {_NAME.pattern}")
        if view is not None and not (isinstance(view, str) and view.startswith("ui://")):
            raise ValueError(f"{where}: view= is a view's URI, ui://...")
        if task is not None and task not in _TASKS:
            raise ValueError(f"{where}: task= is one of {', '.join(_TASKS)}")
        audiences = None
        if visibility is not None:
            audiences = tuple(visibility) if not isinstance(visibility, str) else (visibility,)
            if not audiences or any(a not in _AUDIENCES for a in audiences):
                raise ValueError(f"{where}: visibility= is a list of \"model\" and \"app\"")
        if tool_name in registry:
            raise ValueError(f"{where}: there is already a tool with this name")
        text_ = description or _doc(fn)[0]
        if not text_:
            raise ValueError(f"{where}: needs a description: give the function a docstring")
        try:
            input_schema = _object_schema(_fields(fn), ())
            returns = _unwrap(typing.get_type_hints(fn, include_extras=True).get("return"))[0]
            output_schema = schema_of(returns) if _is_object(returns) else None
        except (TypeError, NameError) as error:
            raise TypeError(f"{where}: {error}") from error
        hints = {"read_only": read_only, "destructive": destructive,
                 "idempotent": idempotent, "open_world": open_world}
        registry[tool_name] = ToolSpec(tool_name, title, text_, input_schema, output_schema,
                                       hints if any(v is not None for v in hints.values()) else None, fn,
                                       view, audiences, task)
        return fn
    return register(fn) if fn is not None else register


def _result(value: Any) -> Content:
    if isinstance(value, Content):
        return value
    if isinstance(value, Block):
        return Content(value)
    if isinstance(value, list) and value and all(isinstance(b, Block) for b in value):
        return Content(*value)
    if value is None:
        return Content()
    if isinstance(value, str):
        return Content(text(value))
    data = _jsonable(value)
    rendered = _dumps(data)
    return Content(text(rendered), structured=data) if isinstance(data, dict) else Content(text(rendered))


def call(name: str, arguments: str | dict = "{}") -> Content:
    """Runs a tool as the host does (arguments as JSON text or a dict);
    raises ``ToolError``. For tests, and what ``Tools.call_tool`` runs."""
    spec = registry.get(name)
    if spec is None:
        raise ToolError("UNKNOWN_TOOL", f"there is no tool named {name!r}", {"tool": name})
    if isinstance(arguments, (str, bytes)):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError as error:
            raise ToolError("INVALID_ARGUMENTS", f"the arguments are not JSON: {error}") from None
    kwargs = _convert_fields(arguments, _fields(spec.function), "")
    return _guarded(lambda: _result(spec.function(**kwargs)))


def _guarded(run: Any, what: str | None = None) -> Any:
    """Runs a plugin's function: a ``ToolError`` passes, any other exception
    is ``INTERNAL_ERROR`` with the end of its traceback (the whole of it on
    stderr, the host's log), its message prefixed with ``what``."""
    try:
        return run()
    except ToolError:
        raise
    except Exception as error:
        lines = _print_traceback(error)
        details = {"error": type(error).__name__, "traceback": "".join(lines[-8:]).strip()}
        message = f"{type(error).__name__}: {error}"
        raise ToolError("INTERNAL_ERROR", f"{what}: {message}" if what else message, details) from error


def _print_traceback(error: BaseException) -> list[str]:
    """To stderr, the host's log; returns its lines, whose end goes back to
    the caller. A component has only the modules imported at build time, so
    this runs once then (below): traceback's own lazy imports are in the
    snapshot, and a failure here never becomes a trap."""
    try:
        lines = traceback.format_exception(error)
    except Exception:
        lines = [f"{type(error).__name__}: {error}\n"]
    print("".join(lines), file=sys.stderr, end="")
    return lines


for _fail in (lambda: 1 / 0, lambda: _no_such_name, lambda: (0).no_such_attribute):  # noqa: F821
    try:
        _fail()
    except Exception as _error:
        traceback.format_exception(_error)


# --- Resources and prompts (contract 0.2.0) --------------------------------------

_VARIABLE = re.compile(r"\{(\w+)\}")


class ResourceSpec(NamedTuple):
    uri: str  # a fixed URI, or a template with {name} parts
    name: str
    title: str | None
    description: str
    mime_type: str | None
    function: Any
    complete: dict  # variable -> function(typed) -> list[str]

    def matches(self, uri: str) -> dict | None:
        """The template's variables in ``uri``: each ``{name}`` stands for
        one or more characters other than ``/``, ``?`` and ``#``."""
        pattern = "".join(
            f"(?P<{part}>[^/?#]+)" if i % 2 else re.escape(part)
            for i, part in enumerate(_VARIABLE.split(self.uri)))
        found = re.fullmatch(pattern, uri)
        return None if found is None else found.groupdict()


class PromptSpec(NamedTuple):
    name: str
    title: str | None
    description: str
    arguments: list  # (name, description, required)
    function: Any
    complete: dict  # argument -> function(typed) -> list[str]


resources: dict[str, ResourceSpec] = {}
prompts: dict[str, PromptSpec] = {}


def _register_resource(uri: str, *, name: str | None, title: str | None,
                       description: str | None, mime_type: str | None, complete: dict | None):
    """``@resource(uri)``: registers a function as the resource at ``uri``;
    a URI with ``{name}`` parts is a template, and the function takes those
    names as ``str`` parameters. It returns ``str`` (text) or ``bytes`` (a
    blob). ``complete`` maps a variable to a function from what the user
    typed to suggestions."""
    def register(fn):
        where = f"resource {uri!r} ({fn.__module__}.{fn.__qualname__})"
        if uri in resources:
            raise ValueError(f"{where}: there is already a resource with this URI")
        text_ = description or _doc(fn)[0]
        if not text_:
            raise ValueError(f"{where}: needs a description: give the function a docstring")
        variables = _VARIABLE.findall(uri)
        parameters = list(inspect.signature(fn).parameters)
        if sorted(parameters) != sorted(variables):
            raise TypeError(f"{where}: its parameters must be the URI's variables {variables}")
        resources[uri] = ResourceSpec(uri, name or fn.__name__, title, text_, mime_type, fn,
                                      dict(complete or {}))
        return fn
    return register


def prompt(fn=None, /, *, name: str | None = None, title: str | None = None,
           description: str | None = None, complete: dict | None = None):
    """Registers a function as a prompt: ``@prompt`` or ``@prompt(name=...)``.
    Its parameters are the prompt's arguments (``str``; required unless they
    have a default), described by the docstring's ``Args:``; it returns
    ``str`` (one user message), a ``Block``, a ``Content``, or a list of
    blocks and ``Message``s (``user(...)``, ``assistant(...)``)."""
    def register(fn):
        prompt_name = name or fn.__name__
        where = f"prompt {prompt_name!r} ({fn.__module__}.{fn.__qualname__})"
        if not _NAME.match(prompt_name):
            raise ValueError(f"{where}: a name must match {_NAME.pattern}")
        if prompt_name in prompts:
            raise ValueError(f"{where}: there is already a prompt with this name")
        summary, described = _doc(fn)
        text_ = description or summary
        if not text_:
            raise ValueError(f"{where}: needs a description: give the function a docstring")
        arguments = [(p.name, described.get(p.name), p.default is inspect.Parameter.empty)
                     for p in inspect.signature(fn).parameters.values()]
        prompts[prompt_name] = PromptSpec(prompt_name, title, text_, arguments, fn,
                                          dict(complete or {}))
        return fn
    return register(fn) if fn is not None else register


class Message(NamedTuple):
    role: str  # user | assistant
    block: Block


def user(content: str | Block) -> Message:
    return Message("user", text(content) if isinstance(content, str) else content)


def assistant(content: str | Block) -> Message:
    return Message("assistant", text(content) if isinstance(content, str) else content)


def _messages(value: Any) -> list[Message]:
    if isinstance(value, str):
        return [user(value)]
    if isinstance(value, (Block, Message)):
        value = [value]
    if isinstance(value, Content):
        value = value.blocks
    return [m if isinstance(m, Message) else user(m) for m in value]


# --- Views (MCP Apps) ---------------------------------------------------------

class ViewSpec(NamedTuple):
    uri: str
    name: str
    title: str | None
    description: str | None
    html: str
    csp: dict | None  # connect_domains, resource_domains, frame_domains, base_uri_domains
    prefers_border: bool | None
    domain: str | None


views: dict[str, ViewSpec] = {}

_CSP_LISTS = ("connect_domains", "resource_domains", "frame_domains", "base_uri_domains")


def view(uri: str, html: str | None = None, *, file: str | None = None, name: str | None = None,
         title: str | None = None, description: str | None = None, csp: dict | None = None,
         prefers_border: bool | None = None, domain: str | None = None) -> str:
    """Declares a view (MCP Apps): HTML a client shows beside a tool's result,
    in a sandboxed frame, told the tool's input and result. Give the HTML
    as a string or as ``file=`` (a file of the tool's folder). ``csp`` names
    the origins it may reach: ``{"connect_domains": ["https://api.example.com"],
    "resource_domains": [...]}`` (camelCase keys too); none by default.
    Returns ``uri``, for ``@tool(view=...)``."""
    where = f"view {uri!r}"
    if not isinstance(uri, str) or not uri.startswith("ui://"):
        raise ValueError(f"{where}: a view's URI starts with ui://")
    if uri in views:
        raise ValueError(f"{where}: there is already a view with this URI")
    if (html is None) == (file is None):
        raise ValueError(f"{where}: give its HTML, or file= naming a file of the tool's folder")
    if file is not None:
        with open(file, encoding="utf-8") as handle:
            html = handle.read()
    lists = None
    if csp is not None:
        camel = {"connectDomains": "connect_domains", "resourceDomains": "resource_domains",
                 "frameDomains": "frame_domains", "baseUriDomains": "base_uri_domains"}
        lists = {}
        for key, origins in dict(csp).items():
            key = camel.get(key, key)
            if key not in _CSP_LISTS:
                raise ValueError(f"{where}: csp has no list {key!r} (it has {', '.join(_CSP_LISTS)})")
            if not isinstance(origins, (list, tuple)) or not all(isinstance(o, str) for o in origins):
                raise ValueError(f"{where}: csp {key} is a list of origins")
            lists[key] = list(origins)
    views[uri] = ViewSpec(uri, name or uri[len("ui://"):].strip("/") or uri, title, description,
                          html, lists, prefers_border, domain)
    return uri


def _find_resource(uri: str) -> tuple[ResourceSpec, dict]:
    spec = resources.get(uri)
    if spec is not None and not _VARIABLE.search(uri):
        return spec, {}
    for spec in resources.values():
        if _VARIABLE.search(spec.uri) and (values := spec.matches(uri)) is not None:
            return spec, values
    raise ToolError("NOT_FOUND", f"there is no resource at {uri}", {"uri": uri})




def _read(uri: str) -> tuple[ResourceSpec, str | bytes]:
    spec, values = _find_resource(uri)
    body = _guarded(lambda: spec.function(**values), f"resource {uri}")
    if not isinstance(body, (str, bytes, bytearray)):
        raise ToolError("INVALID_RESOURCE", f"resource {uri} must return str or bytes")
    return spec, body


def read_resource(uri: str) -> str | bytes:
    """Reads a resource as the host does; raises ``ToolError`` (``NOT_FOUND``)."""
    return _read(uri)[1]


def get_prompt(name: str, arguments: dict | None = None) -> list[Message]:
    """Gets a prompt as the host does; raises ``ToolError``."""
    spec = prompts.get(name)
    if spec is None:
        raise ToolError("NOT_FOUND", f"there is no prompt named {name!r}")
    return _messages(_guarded(lambda: spec.function(**(arguments or {})), f"prompt {name}"))


# --- The WIT glue --------------------------------------------------------------

def _wit_block(block: Block) -> Any:
    f = block.fields
    if block.kind == "text":
        return _wit.ContentBlock_Text(f["text"])
    if block.kind in ("image", "audio"):
        kind = _wit.ContentBlock_Image if block.kind == "image" else _wit.ContentBlock_Audio
        return kind(_wit.Media(**f))
    if block.kind == "resource_link":
        return _wit.ContentBlock_ResourceLink(_wit.ResourceLink(**f))
    body = f["body"]
    body = _wit.ResourceBody_Text(body) if isinstance(body, str) else _wit.ResourceBody_Blob(bytes(body))
    return _wit.ContentBlock_Resource(_wit.EmbeddedResource(f["uri"], f["mime_type"], body))


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


class Tools(_exports.Tools if _exports else object):
    """The ``tools`` export: every ``@tool`` function. An app re-exports it
    (``from toolhost_plugin import Tools``) for componentize-py to find."""

    def list_tools(self) -> list:
        return [_wit.Tool(
            name=s.name, title=s.title, description=s.description,
            input_schema=_dumps(s.input_schema),
            output_schema=None if s.output_schema is None else _dumps(s.output_schema),
            annotations=None if s.annotations is None else _wit.Annotations(**s.annotations),
        ) for s in registry.values()]

    def call_tool(self, name: str, arguments: str) -> Any:
        try:
            content = call(name, arguments)
        except ToolError as error:
            raise _wit_error(error) from None
        structured = None if content.structured is None else _dumps(content.structured)
        return _wit.Output(content=[_wit_block(b) for b in content.blocks], structured=structured)


def _wit_error(error: ToolError) -> Any:
    details = None if error.details is None else _dumps(_jsonable(error.details))
    return _Err(_wit.ToolError(code=error.code, message=error.message, details=details))


class Resources(getattr(_exports, "Resources", object)):
    """The ``resources`` export: every ``@resource`` function."""

    def list_resources(self) -> list:
        return [_wit_resources.Resource(s.uri, s.name, s.title, s.description, s.mime_type)
                for s in resources.values() if not _VARIABLE.search(s.uri)]

    def list_templates(self) -> list:
        return [_wit_resources.ResourceTemplate(s.uri, s.name, s.title, s.description, s.mime_type)
                for s in resources.values() if _VARIABLE.search(s.uri)]

    def read_resource(self, uri: str) -> list:
        try:
            spec, body = _read(uri)
        except ToolError as error:
            raise _wit_error(error) from None
        body = (_wit.ResourceBody_Text(body) if isinstance(body, str)
                else _wit.ResourceBody_Blob(bytes(body)))
        return [_wit_resources.Contents(uri, spec.mime_type, body)]


class Prompts(getattr(_exports, "Prompts", object)):
    """The ``prompts`` export: every ``@prompt`` function."""

    def list_prompts(self) -> list:
        return [_wit_prompts.Prompt(s.name, s.title, s.description, [
            _wit_prompts.PromptArgument(n, None, d, r) for n, d, r in s.arguments
        ]) for s in prompts.values()]

    def get_prompt(self, name: str, arguments: list) -> Any:
        try:
            messages = get_prompt(name, dict(arguments))
        except ToolError as error:
            raise _wit_error(error) from None
        roles = {"user": _wit_prompts.Role.USER, "assistant": _wit_prompts.Role.ASSISTANT}
        return _wit_prompts.PromptResult(None, [
            _wit_prompts.Message(roles[m.role], _wit_block(m.block)) for m in messages])


class Completion(getattr(_exports, "Completion", object)):
    """The ``completion`` export: the ``complete=`` functions of prompts and
    templates."""

    def complete(self, ref: Any, argument: str, value: str, context: list) -> Any:
        name = ref.value
        spec = prompts.get(name) if type(ref).__name__.endswith("Prompt") else resources.get(name)
        complete = spec.complete.get(argument) if spec else None
        try:
            values = [str(v) for v in complete(value)] if complete else []
        except Exception as error:
            _print_traceback(error)
            values = []
        return _wit_completion.Completions(values[:100], len(values), len(values) > 100)


class Views(getattr(_exports, "Views", object)):
    """The ``views`` export: every ``view(...)``."""

    def list_views(self) -> list:
        def csp(lists: dict | None) -> Any:
            if lists is None:
                return None
            return _wit_views.Csp(*(lists.get(key, []) for key in _CSP_LISTS))
        return [_wit_views.View(v.uri, v.name, v.title, v.description, v.html, csp(v.csp),
                                v.prefers_border, v.domain) for v in views.values()]


class ToolDetails(getattr(_exports, "ToolDetails", object)):
    """The ``tool-details`` export: each tool's view, visibility and task."""

    def list_tool_details(self) -> list:
        audiences = {"model": _wit_details.Audience.MODEL, "app": _wit_details.Audience.APP}
        tasks = {"forbidden": _wit_details.TaskSupport.FORBIDDEN,
                 "optional": _wit_details.TaskSupport.OPTIONAL,
                 "required": _wit_details.TaskSupport.REQUIRED}
        return [_wit_details.Detail(
            s.name, s.view,
            None if s.visibility is None else [audiences[a] for a in s.visibility],
            None if s.task is None else tasks[s.task],
        ) for s in registry.values() if s.view or s.visibility or s.task]


# An app built for the `full` or `apps` world must export every class of it;
# one that names only ``Tools`` (written before contract 0.2.0) gets the
# others from here, empty unless it declares resources, prompts or views.
if _wit_resources is not None and "app" in sys.modules:
    for _name, _export in (("Resources", Resources), ("Prompts", Prompts),
                           ("Completion", Completion), ("Views", Views),
                           ("ToolDetails", ToolDetails)):
        if not hasattr(sys.modules["app"], _name):
            setattr(sys.modules["app"], _name, _export)


# --- Host services ---------------------------------------------------------------

class _Config:
    def get(self, key: str) -> str | None:
        """The ``[config]`` value the plugin's policy grants, or None (always
        None outside a component)."""
        return _wit_config.get(key) if _wit_config else None


config = _Config()

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


def log(level: str, message: str) -> None:
    """MCP ``notifications/message`` at ``level`` (one of ``LOG_LEVELS``),
    if the client asked for it; outside a component, printed to stderr."""
    if level not in LOG_LEVELS:
        raise ValueError(f"log level {level!r} is not one of {LOG_LEVELS}")
    if _wit_client:
        _wit_client.log(_wit_client.LogLevel[level.upper()], str(message))
    else:
        print(f"[{level}] {message}", file=sys.stderr)


def progress(progress: float, total: float | None = None, message: str | None = None) -> None:
    """MCP ``notifications/progress``, when the request carried a progress
    token; ``progress`` should grow with every call. Otherwise nothing."""
    if _wit_client:
        _wit_client.progress(float(progress), None if total is None else float(total), message)


class ClientError(Exception):
    """The client did not serve a request (no MCP client behind the call, or
    it lacks the capability); the message says why."""


def _request(function: str, params: dict) -> dict:
    if not _wit_client:
        raise ClientError("not running inside toolhost: there is no MCP client")
    try:
        return json.loads(getattr(_wit_client, function)(_dumps(params)))
    except _Err as error:
        raise ClientError(str(error.value)) from None


def create_message(params: dict) -> dict:
    """An LLM completion: ``sampling/createMessage`` params and result."""
    return _request("create_message", params)


def elicit(params: dict) -> dict:
    """Input from the user: ``elicitation/create`` params and result."""
    return _request("elicit", params)


_METHODS = {"elicit": "elicitation/create", "create_message": "sampling/createMessage",
            "roots": "roots/list"}


def ask(**requests: tuple[str, dict]) -> dict[str, dict | ClientError]:
    """Asks several things at once, each under a key of yours:
    ``ask(name=("elicit", {...}), greeting=("create_message", {...}),
    roots=("roots", {}))``. A client of MCP 2026-07-28 gets them in one
    input-required result (and the call runs again with the answers). Each
    answer is the client's result, or a ``ClientError`` saying why there is
    none (such as a capability the client did not declare)."""
    keys = list(requests)
    for key in keys:
        kind = requests[key][0]
        if kind not in _METHODS:
            raise ValueError(f"ask({key}=...): {kind!r} is not one of {sorted(_METHODS)}")
    if not _wit_input:
        return {key: ClientError("not running inside toolhost: there is no MCP client")
                for key in keys}
    asked = [_wit_input.Request(key=key, method=_METHODS[requests[key][0]],
                                params=_dumps(requests[key][1])) for key in keys]
    answers = {}
    for key, answer in zip(keys, _wit_input.ask(asked)):
        value = getattr(answer, "value", answer)
        answers[key] = (ClientError(str(value)) if isinstance(answer, _Err)
                        else json.loads(value))
    return answers


_roots_asked = 0


def list_roots() -> dict:
    """The client's roots (``roots/list``): the result holds ``roots``."""
    global _roots_asked
    _roots_asked += 1
    answer = ask(**{f"roots-{_roots_asked}": ("roots", {})}).popitem()[1]
    if isinstance(answer, ClientError):
        raise answer
    return answer


# --- HTTP (toolhost's Python runtime) --------------------------------------------

_NO_RUNTIME = (
    "HTTP from toolhost_plugin runs in toolhost's Python runtime, which sends each request "
    "through the host: publish the source (app.py) to a toolhost server, or run it with "
    "`toolhost dev app.py` (plain Python, and a component built on its own, have no HTTP "
    "import; tests supply a transport with _set_http_transport_for_testing)")

_http_transport: (cabc.Callable[[str, str, list[tuple[str, str]], bytes | None, int | None, bool],
                                tuple[int, str, list[tuple[str, str]], bytes]] | None) = None


class HTTPRequestError(Exception):
    """No response: the host refused the request (an origin the plugin's
    policy does not allow, a bound reached) or it failed (DNS, connection,
    TLS, timeout). The message is the host's sentence, unchanged: it names
    the origin and where an admin grants it."""


class HTTPError(Exception):
    """A 4xx or 5xx status, from ``Response.raise_for_status()``;
    ``response`` is the response."""

    def __init__(self, message: str, response: Response):
        super().__init__(message)
        self.response = response


def _set_http_transport_for_testing(fn: cabc.Callable[..., tuple] | None) -> Any:
    """Sends every request (``http`` and an installed ``urlopen``) through
    ``fn(method, url, headers, body, timeout_ms, follow_redirects) -> (status,
    url, headers, body)``, which may raise ``HTTPRequestError``; ``None``
    goes back to the host. Returns the transport it replaces."""
    global _http_transport
    previous, _http_transport = _http_transport, fn
    return previous


def _send(method: str, url: str, headers: list[tuple[str, str]], body: bytes | None,
          timeout_ms: int | None, follow_redirects: bool) -> tuple[int, str, list[tuple[str, str]], bytes]:
    """One request through the host's ``http.send`` (or the testing
    transport): (status, final URL, headers, body)."""
    if _http_transport is not None:
        status, final_url, got, content = _http_transport(method, url, headers, body, timeout_ms,
                                                          follow_redirects)
    elif _wit_http is None:
        raise HTTPRequestError(_NO_RUNTIME)
    else:
        request = _wit_http.Request(method=method, url=url, headers=headers, body=body,
                                    timeout_ms=timeout_ms, follow_redirects=follow_redirects)
        try:
            answer = _wit_http.send(request)
        except _Err as error:
            raise HTTPRequestError(str(error.value)) from None
        status, final_url, got, content = answer.status, answer.url, answer.headers, answer.body
    return int(status), str(final_url), [(str(k), str(v)) for k, v in got], bytes(content)


def _pairs(value: Any) -> list[tuple[Any, Any]]:
    """A mapping's items or a list of pairs, as a list of pairs."""
    if value is None:
        return []
    if isinstance(value, cabc.Mapping):
        return list(value.items())
    return [(k, v) for k, v in value]


def _header_value(value: Any) -> str:
    return value.decode("latin-1") if isinstance(value, (bytes, bytearray)) else str(value)


def _reason(status: int) -> str:
    """The status's standard phrase (``Not Found``), or ``""``."""
    try:
        return _HTTPStatus(status).phrase
    except ValueError:
        return ""


def _with_params(url: str, params: Any) -> str:
    """``url`` with ``params`` url-encoded after its own query (a list value
    repeats the name; ``None`` values are left out)."""
    pairs = [(k, v) for k, v in _pairs(params) if v is not None]
    if not pairs:
        return url
    encoded = urllib.parse.urlencode(pairs, doseq=True)
    base, hash_, fragment = url.partition("#")
    separator = "" if base.endswith(("?", "&")) else "&" if "?" in base else "?"
    return f"{base}{separator}{encoded}{hash_}{fragment}"


def _body(json_value: Any, data: Any, headers: list[tuple[str, str]]) -> bytes | None:
    """The request's body; a JSON or form body adds its ``Content-Type`` to
    ``headers`` unless they have one."""
    if json_value is not None and data is not None:
        raise TypeError("http: give json= or data=, not both")
    if json_value is not None:
        content, kind = json.dumps(json_value, ensure_ascii=False).encode(), "application/json"
    elif data is None:
        return None
    elif isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    elif isinstance(data, str):
        return data.encode()
    elif isinstance(data, (cabc.Mapping, list, tuple)):
        content = urllib.parse.urlencode(_pairs(data), doseq=True).encode()
        kind = "application/x-www-form-urlencoded"
    else:
        raise TypeError(f"http: data= takes bytes, str or a dict, not {type(data).__name__}")
    if not any(name.lower() == "content-type" for name, _ in headers):
        headers.append(("Content-Type", kind))
    return content


def _timeout_ms(timeout: Any) -> int | None:
    """Seconds (a ``(connect, read)`` pair adds up) as milliseconds."""
    if isinstance(timeout, tuple):
        parts = [t for t in timeout if t is not None]
        timeout = sum(parts) if parts else None
    if timeout is None:
        return None
    seconds = float(timeout)
    if not seconds > 0:
        raise ValueError(f"http: timeout must be a positive number of seconds, not {timeout!r}")
    return max(1, round(min(seconds * 1000, 2**32 - 1)))


class ResponseHeaders(cabc.Mapping):
    """A response's headers: a read-only mapping whose names are
    case-insensitive. A repeated header's values are joined with ``", "``
    (as requests does); ``get_all(name)`` keeps them apart."""

    def __init__(self, pairs: cabc.Iterable[tuple[str, str]]):
        self._pairs = [(str(k), str(v)) for k, v in pairs]
        self._names: dict[str, str] = {}
        for name, _ in self._pairs:
            self._names.setdefault(name.lower(), name)

    def get_all(self, name: str) -> list[str]:
        """Every value of ``name``, in order (``[]`` when absent)."""
        lower = name.lower() if isinstance(name, str) else None
        return [v for k, v in self._pairs if k.lower() == lower]

    def __getitem__(self, name: str) -> str:
        values = self.get_all(name)
        if not values:
            raise KeyError(name)
        return ", ".join(values)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._names

    def __iter__(self) -> cabc.Iterator[str]:
        return iter(self._names.values())

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return f"ResponseHeaders({dict(self.items())!r})"


class Response:
    """An HTTP response, whole: ``status`` (``status_code``), ``url`` (after
    any redirects), ``headers``, ``content`` (bytes), ``text``, ``json()``."""

    def __init__(self, status: int, url: str, headers: cabc.Iterable[tuple[str, str]], content: bytes):
        self.status = int(status)
        self.url = url
        self.headers = ResponseHeaders(headers)
        self.content = bytes(content)

    @property
    def status_code(self) -> int:
        return self.status

    @property
    def ok(self) -> bool:
        """Whether the status is 200 to 399."""
        return 200 <= self.status < 400

    @property
    def reason(self) -> str:
        """The status's standard phrase (``Not Found``), or ``""``."""
        return _reason(self.status)

    @property
    def encoding(self) -> str | None:
        """The ``charset`` of ``Content-Type``, if it has one."""
        for part in self.headers.get("Content-Type", "").split(";")[1:]:
            key, _, value = part.partition("=")
            if key.strip().lower() == "charset" and value.strip().strip("\"'"):
                return value.strip().strip("\"'")
        return None

    @property
    def text(self) -> str:
        """``content`` decoded with the charset of ``Content-Type``, else
        UTF-8 (undecodable bytes replaced)."""
        try:
            return self.content.decode(self.encoding or "utf-8", errors="replace")
        except LookupError:  # a charset Python does not know
            return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body parsed as JSON (``json.JSONDecodeError`` if it is not)."""
        return json.loads(self.text if self.encoding else self.content)

    def raise_for_status(self) -> None:
        """Raises ``HTTPError`` unless ``ok``."""
        if not self.ok:
            kind = {4: "Client Error", 5: "Server Error"}.get(self.status // 100, "Error")
            reason = f": {self.reason}" if self.reason else ""
            raise HTTPError(f"{self.status} {kind}{reason} for url: {self.url}", self)

    def __repr__(self) -> str:
        return f"<Response [{self.status}{' ' + self.reason if self.reason else ''}] {self.url}>"


class _HTTP:
    """Outbound HTTP through the host, in toolhost's Python runtime: the
    host sends a request only to an origin the plugin's policy allows (an
    admin grants it with ``[http] allow``); anything else is
    ``HTTPRequestError`` with the host's sentence. ``headers`` and
    ``params`` are a dict or a list of pairs; ``timeout`` is in seconds."""

    def request(self, method: str, url: str, *, params: Any = None, headers: Any = None,
                json: Any = None, data: Any = None, timeout: float | None = None,
                allow_redirects: bool = True) -> Response:
        """Sends one request and returns the ``Response``, whatever its
        status (``raise_for_status()`` raises for 4xx and 5xx). ``json=`` is
        sent as JSON, ``data=`` as it is (bytes, str as UTF-8) or, a dict,
        form-encoded; either sets ``Content-Type`` unless ``headers`` do.
        Redirects are followed (to allowed origins) unless
        ``allow_redirects=False``."""
        sent = [(str(k), _header_value(v)) for k, v in _pairs(headers)]
        body = _body(json, data, sent)
        status, final_url, got, content = _send(
            method.upper(), _with_params(url, params), sent, body, _timeout_ms(timeout),
            bool(allow_redirects))
        return Response(status, final_url, got, content)

    def get(self, url: str, *, params: Any = None, headers: Any = None,
            timeout: float | None = None, allow_redirects: bool = True) -> Response:
        """``GET url``."""
        return self.request("GET", url, params=params, headers=headers, timeout=timeout,
                            allow_redirects=allow_redirects)

    def head(self, url: str, *, params: Any = None, headers: Any = None,
             timeout: float | None = None, allow_redirects: bool = False) -> Response:
        """``HEAD url`` (redirects not followed unless asked, as requests does)."""
        return self.request("HEAD", url, params=params, headers=headers, timeout=timeout,
                            allow_redirects=allow_redirects)

    def delete(self, url: str, *, params: Any = None, headers: Any = None,
               timeout: float | None = None, allow_redirects: bool = True) -> Response:
        """``DELETE url``."""
        return self.request("DELETE", url, params=params, headers=headers, timeout=timeout,
                            allow_redirects=allow_redirects)

    def post(self, url: str, *, params: Any = None, json: Any = None, data: Any = None,
             headers: Any = None, timeout: float | None = None, allow_redirects: bool = True) -> Response:
        """``POST url`` with a ``json=`` or ``data=`` body."""
        return self.request("POST", url, params=params, json=json, data=data, headers=headers,
                            timeout=timeout, allow_redirects=allow_redirects)

    def put(self, url: str, *, params: Any = None, json: Any = None, data: Any = None,
            headers: Any = None, timeout: float | None = None, allow_redirects: bool = True) -> Response:
        """``PUT url`` with a ``json=`` or ``data=`` body."""
        return self.request("PUT", url, params=params, json=json, data=data, headers=headers,
                            timeout=timeout, allow_redirects=allow_redirects)

    def patch(self, url: str, *, params: Any = None, json: Any = None, data: Any = None,
              headers: Any = None, timeout: float | None = None, allow_redirects: bool = True) -> Response:
        """``PATCH url`` with a ``json=`` or ``data=`` body."""
        return self.request("PATCH", url, params=params, json=json, data=data, headers=headers,
                            timeout=timeout, allow_redirects=allow_redirects)


http = _HTTP()


def install_urllib() -> Any:
    """Makes ``urllib.request.urlopen`` send ``http://`` and ``https://``
    through the same transport as ``http`` (toolhost's Python runtime calls
    this once, at start), so code written for urllib runs as it is: the
    opener honours a ``Request``'s method, headers and data and its
    ``timeout``, the host follows redirects (the opener does not again),
    a 4xx or 5xx is ``urllib.error.HTTPError`` as urllib's default, and a
    refusal or failure ``urllib.error.URLError`` (an ``HTTPRequestError``
    too) whose ``reason`` is the host's sentence. Returns the opener
    installed with ``urllib.request.install_opener``. (``urlopen`` given
    ``context=`` or ``cafile=`` builds urllib's own opener instead.)"""
    import io
    import urllib.error
    import urllib.request
    import urllib.response
    from http.client import HTTPMessage

    class URLError(HTTPRequestError, urllib.error.URLError):
        """The host refused the request or it failed; ``reason`` is the
        host's sentence."""

    class Reply(urllib.response.addinfourl):
        """What ``urlopen`` returns: ``read()``, ``status``, ``headers``,
        ``url``, as ``http.client.HTTPResponse`` has them."""

        def __init__(self, status: int, url: str, headers: list[tuple[str, str]], content: bytes):
            message = HTTPMessage()
            for name, value in headers:
                message[name] = value  # appends: a repeated header stays repeated
            super().__init__(io.BytesIO(content), message, url, status)
            self.reason = self.msg = _reason(status)

        def getheader(self, name: str, default: Any = None) -> Any:
            values = self.headers.get_all(name)
            return ", ".join(values) if values else default

        def getheaders(self) -> list[tuple[str, str]]:
            return self.headers.items()

    class HostHandler(urllib.request.BaseHandler):
        """``http_open``/``https_open`` through ``_send``."""

        def http_open(self, req: urllib.request.Request) -> Reply:
            headers = [(str(k), _header_value(v)) for k, v in req.header_items()]
            names = {name.lower() for name, _ in headers}
            for name, value in self.parent.addheaders:  # User-agent, as urllib sends it
                if name.lower() not in names:
                    headers.append((name, value))
            body = None
            if req.data is not None:
                data = req.data
                if isinstance(data, str):
                    raise TypeError("POST data should be bytes, an iterable of bytes, or a file "
                                    "object. It cannot be of type str.")
                if isinstance(data, (bytes, bytearray, memoryview)):
                    body = bytes(data)
                elif hasattr(data, "read"):
                    body = bytes(data.read())
                else:
                    body = b"".join(data)
                if "content-type" not in names:
                    headers.append(("Content-Type", "application/x-www-form-urlencoded"))
            timeout = req.timeout if isinstance(req.timeout, (int, float)) else None
            try:
                status, url, got, content = _send(req.get_method(), req.full_url, headers, body,
                                                  _timeout_ms(timeout), True)
            except HTTPRequestError as error:
                raise URLError(str(error)) from None
            return Reply(status, url, got, content)

        https_open = http_open

    opener = urllib.request.OpenerDirector()
    for handler in (HostHandler(), urllib.request.UnknownHandler(),
                    urllib.request.HTTPDefaultErrorHandler(), urllib.request.HTTPErrorProcessor(),
                    urllib.request.DataHandler()):
        opener.add_handler(handler)
    urllib.request.install_opener(opener)
    return opener
