"""Tests for toolhost_plugin with plain CPython (no componentize-py bindings):

    python3 -m unittest discover -s sdk/python
"""

import contextlib
import enum
import io
import json
import unittest
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NotRequired, Optional, TypedDict

import toolhost_plugin as tp
from toolhost_plugin import Content, ToolError, call, registry, tool


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclass
class Place:
    """A place on Earth.

    Attributes:
        city: The city
        country: The country, if it matters
    """

    city: str
    country: str | None = None
    tags: list[str] = field(default_factory=list)


@dataclass
class Trip:
    origin: Place
    stops: list[Place]
    unit: Unit = Unit.CELSIUS
    note: Annotated[str, "A note for the driver"] = ""


class Filter(TypedDict):
    query: str
    limit: NotRequired[int]


class Loose(TypedDict, total=False):
    a: int
    b: str


@dataclass
class Report:
    """The result of a run."""

    ok: bool
    count: int
    warning: str | None = None


@dataclass
class Node:
    name: str
    children: list["Node"]


def walk(schema):
    """Every subschema, the root included."""
    yield schema
    for key, value in schema.items():
        if key in ("properties",):
            for child in value.values():
                yield from walk(child)
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            yield from walk(value)
        elif key == "anyOf":
            for child in value:
                yield from walk(child)


def assert_portable(test, schema):
    test.assertEqual(schema["type"], "object")
    for keyword in ("anyOf", "oneOf", "allOf", "not", "enum", "title", "$schema"):
        test.assertNotIn(keyword, schema)
    text = json.dumps(schema)
    for banned in ("$ref", "$defs", "null", "$schema"):
        test.assertNotIn(banned, text)
    for sub in walk(schema):
        test.assertNotIsInstance(sub.get("type"), list)


# Tools used by the tests (names prefixed to stay apart from the examples).

@tool
def t_scalars(s: str, i: int, f: float, b: bool) -> str:
    """Takes one of each scalar."""
    return f"{s}|{i}|{f!r}|{b}"


@tool(name="t.kinds", title="Kinds", read_only=True, open_world=False)
def t_kinds(
    items: list[int],
    table: dict[str, float],
    mode: Literal["fast", "slow"],
    unit: Unit,
    level: Level = Level.LOW,
    maybe: Optional[int] = None,
    other: int | None = None,
    bare: str | None = None,
    count: int = 5,
    anything: Any = None,
    either: int | str = 0,
) -> dict:
    """Takes every kind of parameter.

    It has a second paragraph, which is not part of the description.

    Args:
        items: Some numbers
            spread over two lines
        table (dict): Named weights
        mode: How to go

    Returns:
        Everything it got.
    """
    return {"items": items, "table": table, "mode": mode, "unit": unit, "level": level,
            "maybe": maybe, "other": other, "bare": bare, "count": count, "either": either}


@tool
def t_trip(trip: Trip, filters: list[Filter], loose: Loose | None = None) -> Report:
    """Plans a trip."""
    assert isinstance(trip, Trip) and isinstance(trip.origin, Place)
    assert all(isinstance(stop, Place) for stop in trip.stops)
    assert isinstance(trip.unit, Unit)
    return Report(ok=True, count=len(trip.stops) + len(filters))


@tool
def t_fail(kind: str) -> str:
    """Fails as asked."""
    if kind == "business":
        raise ToolError("OUT_OF_STOCK", "no more widgets", {"sku": 42, "unit": Unit.CELSIUS})
    if kind == "bug":
        return str(1 / 0)
    return "fine"


@tool
def t_blocks(kind: str):
    """Returns blocks."""
    if kind == "list":
        return [tp.text("a chart"), tp.image(b"\x89PNG", "image/png")]
    if kind == "content":
        return Content(tp.text("hi"), tp.link("https://example.com", "example"), structured={"n": 1})
    if kind == "none":
        return None
    return [1, 2]


class SchemaTest(unittest.TestCase):
    def test_scalars(self):
        schema = registry["t_scalars"].input_schema
        self.assertEqual(schema, {
            "type": "object",
            "properties": {"s": {"type": "string"}, "i": {"type": "integer"},
                           "f": {"type": "number"}, "b": {"type": "boolean"}},
            "required": ["s", "i", "f", "b"],
        })
        self.assertIsNone(registry["t_scalars"].output_schema)
        self.assertEqual(registry["t_scalars"].description, "Takes one of each scalar.")
        self.assertIsNone(registry["t_scalars"].annotations)

    def test_every_kind(self):
        spec = registry["t.kinds"]
        props = spec.input_schema["properties"]
        self.assertEqual(spec.description, "Takes every kind of parameter.")
        self.assertEqual(spec.title, "Kinds")
        self.assertEqual(spec.annotations, {"read_only": True, "destructive": None,
                                            "idempotent": None, "open_world": False})
        self.assertEqual(spec.input_schema["required"], ["items", "table", "mode", "unit"])
        self.assertEqual(props["items"], {"type": "array", "items": {"type": "integer"},
                                          "description": "Some numbers spread over two lines"})
        self.assertEqual(props["table"], {"type": "object", "additionalProperties": {"type": "number"},
                                          "description": "Named weights"})
        self.assertEqual(props["mode"], {"type": "string", "enum": ["fast", "slow"], "description": "How to go"})
        self.assertEqual(props["unit"], {"type": "string", "enum": ["celsius", "fahrenheit"]})
        self.assertEqual(props["level"], {"type": "integer", "enum": [1, 2], "default": 1})
        for name in ("maybe", "other"):
            self.assertEqual(props[name], {"type": "integer"})
        self.assertEqual(props["bare"], {"type": "string"})
        self.assertEqual(props["count"], {"type": "integer", "default": 5})
        self.assertEqual(props["anything"], {})
        self.assertEqual(props["either"], {"anyOf": [{"type": "integer"}, {"type": "string"}], "default": 0})
        assert_portable(self, spec.input_schema)

    def test_nested_objects(self):
        spec = registry["t_trip"]
        trip = spec.input_schema["properties"]["trip"]
        self.assertEqual(trip["required"], ["origin", "stops"])
        place = trip["properties"]["origin"]
        self.assertEqual(place["description"], "A place on Earth.")
        self.assertEqual(place["required"], ["city"])
        self.assertEqual(place["properties"]["city"], {"type": "string", "description": "The city"})
        self.assertEqual(place["properties"]["country"]["type"], "string")
        self.assertNotIn("default", place["properties"]["tags"])
        self.assertEqual(trip["properties"]["stops"]["items"], place)
        self.assertEqual(trip["properties"]["unit"]["default"], "celsius")
        self.assertEqual(trip["properties"]["note"]["description"], "A note for the driver")
        self.assertNotIn("description", trip)  # dataclass's generated docstring is not one
        filters = spec.input_schema["properties"]["filters"]["items"]
        self.assertEqual(filters["required"], ["query"])
        self.assertEqual(filters["properties"]["limit"], {"type": "integer"})
        loose = spec.input_schema["properties"]["loose"]
        self.assertNotIn("required", loose)
        self.assertEqual(spec.input_schema["required"], ["trip", "filters"])
        assert_portable(self, spec.input_schema)

    def test_output_schema_from_the_return_type(self):
        out = registry["t_trip"].output_schema
        self.assertEqual(out, {
            "type": "object",
            "properties": {"ok": {"type": "boolean"}, "count": {"type": "integer"},
                           "warning": {"type": "string"}},
            "required": ["ok", "count"],
            "description": "The result of a run.",
        })
        self.assertIsNone(registry["t.kinds"].output_schema)  # dict: no schema
        self.assertIsNone(registry["t_blocks"].output_schema)  # untyped

    def test_a_typeddict_output(self):
        @tool(name="t_td_out")
        def f() -> Filter:
            """Returns a filter."""
            return {"query": "q"}
        self.assertEqual(registry["t_td_out"].output_schema["required"], ["query"])
        self.assertEqual(call("t_td_out").structured, {"query": "q"})

    def test_build_time_errors(self):
        def nodoc(x: int) -> str:
            return ""
        with self.assertRaisesRegex(ValueError, "docstring"):
            tool(nodoc)

        def untyped(x) -> str:
            """Doc."""
        with self.assertRaisesRegex(TypeError, "'x' has no type hint"):
            tool(untyped)

        def recursive(node: Node) -> str:
            """Doc."""
        with self.assertRaisesRegex(TypeError, "recursive"):
            tool(recursive)

        def pair(p: tuple[int, str]) -> str:
            """Doc."""
        with self.assertRaisesRegex(TypeError, "tuple"):
            tool(pair)

        def unknown(p: complex) -> str:
            """Doc."""
        with self.assertRaisesRegex(TypeError, "no JSON Schema"):
            tool(unknown)

        with self.assertRaisesRegex(ValueError, "already"):
            tool(name="t_scalars")(t_scalars)
        with self.assertRaisesRegex(ValueError, "must match"):
            tool(name="has space")(t_scalars)
        for name in ("nodoc", "untyped", "recursive", "pair", "unknown", "has space"):
            self.assertNotIn(name, registry)

    def test_description_override_and_args_only_docstring(self):
        def f() -> str:
            """Args:
                none: nothing
            """
        with self.assertRaisesRegex(ValueError, "docstring"):
            tool(name="t_argsonly")(f)
        tool(name="t_described", description="Given")(f)
        self.assertEqual(registry["t_described"].description, "Given")


class CallTest(unittest.TestCase):
    def test_scalars_and_text_result(self):
        result = call("t_scalars", '{"s": "x", "i": 2.0, "f": 3, "b": true}')
        self.assertEqual(result.texts(), ["x|2|3.0|True"])
        self.assertIsNone(result.structured)

    def test_conversion_and_dict_result(self):
        result = call("t.kinds", {"items": [1], "table": {"a": 0.5}, "mode": "fast",
                                  "unit": "fahrenheit", "level": 2, "other": None, "either": "x"})
        expected = {"items": [1], "table": {"a": 0.5}, "mode": "fast", "unit": "fahrenheit",
                    "level": 2, "count": 5, "either": "x"}
        self.assertEqual(result.structured, {**expected, "maybe": None, "other": None, "bare": None})
        self.assertEqual(json.loads(result.texts()[0]), result.structured)

    def test_enum_arguments_become_members(self):
        seen = {}

        @tool(name="t_enum")
        def f(unit: Unit, level: Level = Level.LOW) -> str:
            """Doc."""
            seen.update(unit=unit, level=level)
            return ""
        call("t_enum", {"unit": "celsius", "level": 2})
        self.assertIs(seen["unit"], Unit.CELSIUS)
        self.assertIs(seen["level"], Level.HIGH)

    def test_dataclass_arguments_and_structured_result(self):
        result = call("t_trip", {
            "trip": {"origin": {"city": "Oslo"}, "stops": [{"city": "Bergen", "tags": ["x"]}]},
            "filters": [{"query": "a"}],
        })
        self.assertEqual(result.structured, {"ok": True, "count": 2})  # None left out
        self.assertEqual(json.loads(result.texts()[0]), {"ok": True, "count": 2})

    def test_typeddict_arguments_stay_dicts(self):
        seen = []

        @tool(name="t_td_in")
        def f(filters: list[Filter], loose: Loose) -> str:
            """Doc."""
            seen.extend([*filters, loose])
            return ""
        call("t_td_in", {"filters": [{"query": "a"}, {"query": "b", "limit": 2.0}], "loose": {"b": "x"}})
        self.assertEqual(seen, [{"query": "a"}, {"query": "b", "limit": 2}, {"b": "x"}])
        self.assertIsInstance(seen[1]["limit"], int)

    def test_invalid_arguments(self):
        cases = [
            ({"s": "x", "i": 1, "f": 1.0}, "b: required"),
            ({"s": "x", "i": "1", "f": 1.0, "b": True}, "i: expected integer"),
            ({"s": "x", "i": True, "f": 1.0, "b": True}, "i: expected integer"),
            ({"s": "x", "i": 1, "f": 1.0, "b": True, "z": 1}, "z: unknown"),
        ]
        for arguments, message in cases:
            with self.assertRaises(ToolError) as caught:
                call("t_scalars", arguments)
            self.assertEqual(caught.exception.code, "INVALID_ARGUMENTS")
            self.assertIn(message, caught.exception.message)
        for arguments in ("not json", "[1]"):
            with self.assertRaises(ToolError) as caught:
                call("t_scalars", arguments)
            self.assertEqual(caught.exception.code, "INVALID_ARGUMENTS")
        with self.assertRaises(ToolError) as caught:
            call("t_trip", {"trip": {"origin": {}, "stops": []}, "filters": []})
        self.assertIn("trip.origin.city", caught.exception.message)
        with self.assertRaises(ToolError) as caught:
            call("t.kinds", {"items": [], "table": {}, "mode": "medium", "unit": "kelvin"})
        self.assertIn("mode: expected one of", caught.exception.message)

    def test_errors(self):
        with self.assertRaises(ToolError) as caught:
            call("nope", "{}")
        self.assertEqual(caught.exception.code, "UNKNOWN_TOOL")
        with self.assertRaises(ToolError) as caught:
            call("t_fail", {"kind": "business"})
        error = caught.exception
        self.assertEqual((error.code, error.message), ("OUT_OF_STOCK", "no more widgets"))
        self.assertEqual(error.details, {"sku": 42, "unit": Unit.CELSIUS})
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr), self.assertRaises(ToolError) as caught:
            call("t_fail", {"kind": "bug"})
        self.assertEqual(caught.exception.code, "INTERNAL_ERROR")
        self.assertEqual(caught.exception.message, "ZeroDivisionError: division by zero")
        self.assertIn("Traceback", stderr.getvalue())
        # The end of the traceback travels back to the caller too.
        self.assertEqual(caught.exception.details["error"], "ZeroDivisionError")
        self.assertIn("ZeroDivisionError: division by zero", caught.exception.details["traceback"])

    def test_blocks(self):
        result = call("t_blocks", {"kind": "list"})
        self.assertEqual([b.kind for b in result.blocks], ["text", "image"])
        self.assertEqual(result.blocks[1].fields, {"data": b"\x89PNG", "mime_type": "image/png"})
        result = call("t_blocks", {"kind": "content"})
        self.assertEqual([b.kind for b in result.blocks], ["text", "resource_link"])
        self.assertEqual(result.structured, {"n": 1})
        self.assertEqual(call("t_blocks", {"kind": "none"}).blocks, [])
        self.assertEqual(call("t_blocks", {"kind": "other"}).texts(), ["[1,2]"])


class HostServicesTest(unittest.TestCase):
    def test_without_a_host(self):
        self.assertIsNone(tp.config.get("key"))
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            tp.log("info", "hello")
        self.assertEqual(stderr.getvalue(), "[info] hello\n")
        with self.assertRaises(ValueError):
            tp.log("loud", "x")
        tp.progress(1, 2, "half")
        with self.assertRaises(tp.ClientError):
            tp.create_message({"messages": [], "maxTokens": 1})


@tp.resource("test://static", mime_type="text/plain")
def t_static() -> str:
    """A fixed resource."""
    return "static"


@tp.resource("test://item/{id}/data")
def t_item(id: str) -> bytes:
    """A template."""
    if id == "boom":
        raise KeyError(id)
    return id.encode()


@tp.prompt(complete={"style": lambda typed: [s for s in ("short", "long") if s.startswith(typed)]})
def t_prompt(topic: str, style: str = "short") -> list:
    """A prompt.

    Args:
        topic: What about
        style: How long
    """
    return [tp.user(f"{style} text on {topic}"), tp.assistant(tp.image(b"png", "image/png"))]


class CatalogTest(unittest.TestCase):
    def test_resources_read_by_uri_and_template(self):
        self.assertEqual(tp.read_resource("test://static"), "static")
        self.assertEqual(tp.read_resource("test://item/42/data"), b"42")
        for missing in ("test://item//data", "test://item/1/2/data", "test://nope"):
            with self.assertRaises(tp.ToolError) as error:
                tp.read_resource(missing)
            self.assertEqual(error.exception.code, "NOT_FOUND", missing)
        with self.assertRaises(tp.ToolError) as error:
            tp.read_resource("test://item/boom/data")
        self.assertEqual(error.exception.code, "INTERNAL_ERROR")
        self.assertIn("resource test://item/boom/data: KeyError", error.exception.message)

    def test_prompts_take_their_parameters_as_arguments(self):
        spec = tp.prompts["t_prompt"]
        self.assertEqual(spec.arguments, [("topic", "What about", True), ("style", "How long", False)])
        messages = tp.get_prompt("t_prompt", {"topic": "rust"})
        self.assertEqual([m.role for m in messages], ["user", "assistant"])
        self.assertEqual(messages[0].block.fields["text"], "short text on rust")
        self.assertEqual(spec.complete["style"]("l"), ["long"])

    def test_a_resource_needs_its_variables_as_parameters(self):
        with self.assertRaises(TypeError):
            tp.resource("test://x/{a}", description="x")(lambda b: "x")



class HeaderTest(unittest.TestCase):
    def test_a_header_parameter_is_marked_in_the_schema(self):
        from typing import Annotated

        @tp.tool
        def routed(region: Annotated[str, tp.Header("Region"), "Where"]) -> str:
            """Routed by region."""
            return region

        schema = tp.registry["routed"].input_schema
        self.assertEqual(schema["properties"]["region"]["x-mcp-header"], "Region")
        self.assertEqual(schema["properties"]["region"]["description"], "Where")

    def test_ask_outside_a_component_says_why_for_each_key(self):
        answers = tp.ask(name=("elicit", {"message": "Name?"}), roots=("roots", {}))
        self.assertEqual(sorted(answers), ["name", "roots"])
        self.assertTrue(all(isinstance(a, tp.ClientError) for a in answers.values()))
        with self.assertRaises(ValueError):
            tp.ask(x=("telepathy", {}))


class FakeHost:
    """A transport for ``_set_http_transport_for_testing``: records each
    request and answers with ``reply`` (or raises ``refuse``)."""

    def __init__(self, status=200, headers=(), body=b"", url=None, refuse=None):
        self.status, self.headers, self.body, self.url, self.refuse = status, list(headers), body, url, refuse
        self.sent = []

    def __call__(self, method, url, headers, body, timeout_ms, follow_redirects):
        self.sent.append({"method": method, "url": url, "headers": list(headers), "body": body,
                          "timeout_ms": timeout_ms, "follow_redirects": follow_redirects})
        if self.refuse:
            raise tp.HTTPRequestError(self.refuse)
        return self.status, self.url or url, self.headers, self.body

    @property
    def last(self):
        return self.sent[-1]

    def header(self, name):
        return [v for k, v in self.last["headers"] if k.lower() == name.lower()]


REFUSAL = ('http://x:1 is not allowed for ns/plugin: an admin grants it with '
           '[http] allow = ["http://x:1"] in plugins/ns/plugin.toml')


class HTTPTest(unittest.TestCase):
    def host(self, **reply):
        fake = FakeHost(**reply)
        previous = tp._set_http_transport_for_testing(fake)
        self.addCleanup(tp._set_http_transport_for_testing, previous)
        return fake

    def test_params_are_merged_into_the_query(self):
        host = self.host()
        tp.http.get("https://api.example/v1/search?q=old#top",
                    params={"lang": "en", "tag": ["a b", "c"], "skip": None})
        self.assertEqual(host.last["url"], "https://api.example/v1/search?q=old&lang=en&tag=a+b&tag=c#top")
        self.assertEqual(host.last["method"], "GET")
        self.assertIsNone(host.last["body"])
        tp.http.get("https://api.example/", params=[("a", 1), ("a", 2)])
        self.assertEqual(host.last["url"], "https://api.example/?a=1&a=2")
        tp.http.get("https://api.example/x")
        self.assertEqual(host.last["url"], "https://api.example/x")

    def test_json_and_form_bodies_set_their_content_type(self):
        host = self.host()
        tp.http.post("https://api.example/items", json={"name": "ü", "n": [1, 2]})
        self.assertEqual(json.loads(host.last["body"]), {"name": "ü", "n": [1, 2]})
        self.assertEqual(host.header("content-type"), ["application/json"])
        tp.http.post("https://api.example/items", data={"a": "1 2", "b": "&"})
        self.assertEqual(host.last["body"], b"a=1+2&b=%26")
        self.assertEqual(host.header("content-type"), ["application/x-www-form-urlencoded"])
        tp.http.put("https://api.example/items", json=[1], headers={"content-type": "application/merge+json"})
        self.assertEqual(host.header("content-type"), ["application/merge+json"])
        self.assertEqual(host.last["method"], "PUT")
        tp.http.request("patch", "https://api.example/items", data="héllo", timeout=2.5,
                        allow_redirects=False, headers=[("X-A", "1"), ("X-A", "2")])
        self.assertEqual((host.last["method"], host.last["body"]), ("PATCH", "héllo".encode()))
        self.assertEqual(host.header("content-type"), [])
        self.assertEqual(host.header("x-a"), ["1", "2"])
        self.assertEqual((host.last["timeout_ms"], host.last["follow_redirects"]), (2500, False))
        tp.http.delete("https://api.example/items/1")
        self.assertEqual((host.last["method"], host.last["timeout_ms"], host.last["follow_redirects"]),
                         ("DELETE", None, True))
        with self.assertRaises(TypeError):
            tp.http.post("https://api.example/", json={}, data=b"x")

    def test_headers_are_case_insensitive(self):
        self.host(headers=[("Content-Type", "text/plain"), ("Set-Cookie", "a=1"), ("set-cookie", "b=2")])
        response = tp.http.get("https://api.example/")
        self.assertEqual(response.headers["content-type"], "text/plain")
        self.assertEqual(response.headers.get("CONTENT-TYPE"), "text/plain")
        self.assertEqual(response.headers["Set-Cookie"], "a=1, b=2")
        self.assertEqual(response.headers.get_all("SET-COOKIE"), ["a=1", "b=2"])
        self.assertIn("set-cookie", response.headers)
        self.assertEqual(response.headers.get("X-Missing", "none"), "none")
        self.assertEqual(sorted(response.headers), ["Content-Type", "Set-Cookie"])
        with self.assertRaises(TypeError):
            response.headers["X"] = "y"

    def test_text_is_decoded_by_the_charset(self):
        self.host(headers=[("Content-Type", 'text/plain; charset="ISO-8859-1"')], body="café".encode("latin-1"))
        self.assertEqual(tp.http.get("https://api.example/").text, "café")
        self.host(headers=[("Content-Type", "text/plain")], body="café".encode() + b"\xff")
        self.assertEqual(tp.http.get("https://api.example/").text, "café\ufffd")
        self.host(headers=[("Content-Type", "text/plain; charset=no-such-codec")], body=b"ok")
        self.assertEqual(tp.http.get("https://api.example/").text, "ok")

    def test_json_status_and_repr(self):
        self.host(status=201, url="https://api.example/final", body=b'{"id": 7}',
                  headers=[("Content-Type", "application/json")])
        response = tp.http.post("https://api.example/start", json={})
        self.assertEqual(response.json(), {"id": 7})
        self.assertEqual((response.status, response.status_code, response.ok), (201, 201, True))
        self.assertEqual(response.url, "https://api.example/final")
        self.assertEqual(response.content, b'{"id": 7}')
        self.assertEqual(repr(response), "<Response [201 Created] https://api.example/final>")
        response.raise_for_status()

    def test_raise_for_status(self):
        self.host(status=404, body=b"no such item")
        response = tp.http.get("https://api.example/items/9")
        self.assertFalse(response.ok)
        with self.assertRaises(tp.HTTPError) as error:
            response.raise_for_status()
        self.assertIs(error.exception.response, response)
        self.assertEqual(str(error.exception), "404 Client Error: Not Found for url: https://api.example/items/9")
        self.host(status=599)
        with self.assertRaises(tp.HTTPError) as error:
            tp.http.get("https://api.example/").raise_for_status()
        self.assertEqual(str(error.exception), "599 Server Error for url: https://api.example/")
        self.host(status=302)
        self.assertTrue(tp.http.head("https://api.example/").ok)

    def test_the_hosts_refusal_reaches_the_caller_unchanged(self):
        self.host(refuse=REFUSAL)
        with self.assertRaises(tp.HTTPRequestError) as error:
            tp.http.get("http://x:1/")
        self.assertEqual(str(error.exception), REFUSAL)

    def test_through_the_wit_import(self):
        @dataclass
        class Request:
            method: str
            url: str
            headers: list
            body: Optional[bytes]
            timeout_ms: Optional[int]
            follow_redirects: bool

        @dataclass
        class Response:
            status: int
            url: str
            headers: list
            body: bytes

        class Err(Exception):  # as componentize_py_types.Err: the sentence is its value
            def __init__(self, *, value):
                self.value = value

        sent = []

        def send(request):
            sent.append(request)
            if "x:1" in request.url:
                raise Err(value=REFUSAL)
            return Response(200, request.url, [("Content-Type", "application/json")], b"[1]")

        wit = type("wit_http", (), {"Request": Request, "Response": Response, "send": staticmethod(send)})
        for name, value in (("_wit_http", wit), ("_Err", Err), ("_http_transport", None)):
            previous = getattr(tp, name)
            setattr(tp, name, value)
            self.addCleanup(setattr, tp, name, previous)
        self.assertEqual(tp.http.post("https://api.example/", json={}, timeout=0.25).json(), [1])
        self.assertEqual(sent[-1], Request("POST", "https://api.example/", [("Content-Type", "application/json")],
                                           b"{}", 250, True))
        with self.assertRaises(tp.HTTPRequestError) as error:
            tp.http.get("http://x:1/")
        self.assertEqual(str(error.exception), REFUSAL)

    def test_without_the_runtime(self):
        previous = tp._set_http_transport_for_testing(None)
        self.addCleanup(tp._set_http_transport_for_testing, previous)
        with self.assertRaises(tp.HTTPRequestError) as error:
            tp.http.get("https://api.example/")
        self.assertIn("toolhost's Python runtime", str(error.exception))
        self.assertIn("toolhost dev app.py", str(error.exception))


class URLOpenTest(unittest.TestCase):
    def setUp(self):
        import urllib.request
        self.urllib = urllib.request
        self.addCleanup(urllib.request.install_opener, None)
        tp.install_urllib()

    def host(self, **reply):
        fake = FakeHost(**reply)
        previous = tp._set_http_transport_for_testing(fake)
        self.addCleanup(tp._set_http_transport_for_testing, previous)
        return fake

    def test_get(self):
        host = self.host(url="https://api.example/after", body=b"hello",
                         headers=[("Content-Type", "text/plain"), ("X-N", "1"), ("x-n", "2")])
        response = self.urllib.urlopen("https://api.example/before", timeout=3)
        self.assertEqual(response.read(), b"hello")
        self.assertEqual((response.status, response.getcode(), response.reason), (200, 200, "OK"))
        self.assertEqual((response.geturl(), response.url), ("https://api.example/after",) * 2)
        self.assertEqual(response.headers["content-type"], "text/plain")
        self.assertEqual(response.headers.get_all("X-N"), ["1", "2"])
        self.assertEqual(response.getheader("x-n"), "1, 2")
        self.assertEqual((host.last["method"], host.last["url"], host.last["body"]),
                         ("GET", "https://api.example/before", None))
        self.assertEqual((host.last["timeout_ms"], host.last["follow_redirects"]), (3000, True))
        self.assertTrue(host.header("user-agent")[0].startswith("Python-urllib/"))

    def test_post_through_a_request(self):
        host = self.host(status=201)
        request = self.urllib.Request("https://api.example/items", data=b'{"a": 1}',
                                      headers={"Content-Type": "application/json", "X-Key": "k"})
        response = self.urllib.urlopen(request)
        self.assertEqual(response.status, 201)
        self.assertEqual((host.last["method"], host.last["body"]), ("POST", b'{"a": 1}'))
        self.assertEqual(host.header("content-type"), ["application/json"])
        self.assertEqual(host.header("x-key"), ["k"])
        self.assertIsNone(host.last["timeout_ms"])
        self.urllib.urlopen(self.urllib.Request("https://api.example/items/1", method="DELETE"))
        self.assertEqual((host.last["method"], host.last["body"]), ("DELETE", None))
        self.urllib.urlopen("http://api.example/form", data=b"a=1")
        self.assertEqual((host.last["method"], host.last["url"]), ("POST", "http://api.example/form"))
        self.assertEqual(host.header("content-type"), ["application/x-www-form-urlencoded"])

    def test_a_404_raises_urllibs_http_error(self):
        import urllib.error
        self.host(status=404, body=b"not here", headers=[("Content-Type", "text/plain")])
        with self.assertRaises(urllib.error.HTTPError) as error:
            self.urllib.urlopen("https://api.example/missing")
        self.assertEqual(error.exception.code, 404)
        self.assertEqual(error.exception.read(), b"not here")
        self.assertEqual(error.exception.headers["Content-Type"], "text/plain")

    def test_a_redirect_is_not_followed_again(self):
        import urllib.error
        host = self.host(status=302, headers=[("Location", "https://elsewhere.example/")])
        with self.assertRaises(urllib.error.HTTPError) as error:
            self.urllib.urlopen("https://api.example/")
        self.assertEqual(error.exception.code, 302)
        self.assertEqual(len(host.sent), 1)

    def test_with_urlopen(self):
        self.host(body=b"body")
        with self.urllib.urlopen("https://api.example/") as response:
            self.assertEqual(response.read(), b"body")
        self.assertTrue(response.fp is None or response.fp.closed)

    def test_a_refusal_is_a_url_error_with_the_hosts_sentence(self):
        import urllib.error
        self.host(refuse=REFUSAL)
        with self.assertRaises(urllib.error.URLError) as error:
            self.urllib.urlopen("http://x:1/")
        self.assertEqual(error.exception.reason, REFUSAL)
        self.assertIsInstance(error.exception, tp.HTTPRequestError)



class TestViews(unittest.TestCase):
    def setUp(self):
        tp.registry.clear()
        tp.views.clear()

    def test_a_view_and_its_tools_details(self):
        uri = tp.view("ui://chart", "<p>chart</p>", prefers_border=True,
                      csp={"connectDomains": ["https://api.example"]})
        self.assertEqual(uri, "ui://chart")
        spec = tp.views["ui://chart"]
        self.assertEqual(spec.name, "chart")
        self.assertEqual(spec.csp, {"connect_domains": ["https://api.example"]})

        @tp.tool(view=uri, task="optional", visibility=["model", "app"])
        def chart(n: int) -> dict:
            """Draws.

            Args:
                n: How many
            """
            return {"n": n}

        listed = tp.registry["chart"]
        self.assertEqual((listed.view, listed.task, listed.visibility),
                         ("ui://chart", "optional", ("model", "app")))

    def test_mistakes_are_named(self):
        with self.assertRaisesRegex(ValueError, "starts with ui://"):
            tp.view("https://x", "<p>")
        with self.assertRaisesRegex(ValueError, "give its HTML"):
            tp.view("ui://none")
        with self.assertRaisesRegex(ValueError, "csp has no list 'script'"):
            tp.view("ui://x", "<p>", csp={"script": []})
        with self.assertRaisesRegex(ValueError, "task= is one of"):
            tp.tool(name="t", task="sometimes")(lambda: None)
        with self.assertRaisesRegex(ValueError, "visibility="):
            tp.tool(name="t", visibility=["everyone"])(lambda: None)

    def test_a_view_from_a_file(self):
        import tempfile, os
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "v.html")
            with open(path, "w", encoding="utf-8") as handle:
                handle.write("<p>from a file</p>")
            tp.view("ui://f", file=path)
        self.assertEqual(tp.views["ui://f"].html, "<p>from a file</p>")

if __name__ == "__main__":
    unittest.main()
