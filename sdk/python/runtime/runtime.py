"""toolhost's Python runtime: CPython, the helper library and the modules
of ``modules.txt``, built once (``make runtimes``), that runs an author's
``app.py`` as a plugin. The host hands each instance the source through the
``source`` import; it is compiled and run as the module ``app`` at the
instance's first export call, and its ``@tool``s (resources, prompts)
served by the helper library's exports, as a component built from the same
``app.py`` would serve them. A module not imported here is not in the
runtime: the host answers an import outside the set before anything runs.
"""

import importlib
import linecache
import os
import sys
import traceback
import types

import toolhost_plugin
from toolhost_plugin import Completion as _Completion
from toolhost_plugin import Prompts as _Prompts
from toolhost_plugin import Resources as _Resources
from toolhost_plugin import Tools as _Tools
from wit_world.imports import source as _source

with open(os.path.join(os.path.dirname(__file__), "modules.txt")) as _listed:
    MODULES = [
        line.strip()
        for line in _listed
        if line.strip() and not line.startswith("#")
    ]
for _name in MODULES:
    importlib.import_module(_name)

_app = None


def _load():
    """The author's module, run once per instance."""
    global _app
    if _app is None:
        name, text = _source.read()
        if not name:
            raise RuntimeError("toolhost gave this runtime no source to run")
        module = types.ModuleType("app")
        module.__file__ = name
        sys.modules["app"] = module
        # Tracebacks show the author's lines, as they would from a file.
        linecache.cache[name] = (len(text), None, text.splitlines(True), name)
        try:
            exec(compile(text, name, "exec"), module.__dict__)
        except BaseException:
            # The host reads the author's line from this, as from a build.
            traceback.print_exc()
            raise
        _app = module
    return _app


class Tools(_Tools):
    def list_tools(self):
        _load()
        return super().list_tools()

    def call_tool(self, name, arguments):
        _load()
        return super().call_tool(name, arguments)


class Resources(_Resources):
    def list_resources(self):
        _load()
        return super().list_resources()

    def list_templates(self):
        _load()
        return super().list_templates()

    def read_resource(self, uri):
        _load()
        return super().read_resource(uri)


class Prompts(_Prompts):
    def list_prompts(self):
        _load()
        return super().list_prompts()

    def get_prompt(self, name, arguments):
        _load()
        return super().get_prompt(name, arguments)


class Completion(_Completion):
    def complete(self, reference, argument, value, context):
        _load()
        return super().complete(reference, argument, value, context)
