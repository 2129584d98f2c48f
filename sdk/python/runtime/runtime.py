"""toolhost's Python runtime: CPython, the helper library and the modules
of ``modules.txt`` (imported as it is built, so they cost nothing at a
call), built once (``make runtimes``), that runs an author's
``app.py`` as a plugin. The host hands each instance the source through the
``source`` import; it is compiled and run as the module ``app`` at the
instance's first export call, and its ``@tool``s (resources, prompts)
served by the helper library's exports, as a component built from the same
``app.py`` would serve them. The rest of CPython's standard library and the
room's packages are read from folders the host hands each instance
read-only; the host answers an import found in none of them before
anything runs.
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
from toolhost_plugin import ToolDetails as _ToolDetails
from toolhost_plugin import Tools as _Tools
from toolhost_plugin import Views as _Views
from wit_world.imports import source as _source

with open(os.path.join(os.path.dirname(__file__), "modules.txt")) as _listed:
    MODULES = [
        line.strip()
        for line in _listed
        if line.strip() and not line.startswith("#")
    ]
for _name in MODULES:
    importlib.import_module(_name)

# `urllib.request.urlopen` goes through the host's `http` import, like the
# helper's `http`: the same allowlist, limits and accounting.
toolhost_plugin.install_urllib()

_app = None
# Whether this instance has begun a caller's work. An instance may start
# from an image of another that ran the module (the host takes one per
# source version): what that instance drew at random is reseeded here, once,
# so no two calls share a random sequence.
_begun = False


# Where the host hands this runtime the rest of CPython's standard library
# and the room's packages (`toolhost packages add`), read-only; and a tool
# that is a folder: its own modules and data files.
_STDLIB = "/toolhost/stdlib"
_PACKAGES = "/toolhost/packages"
_APP = "/toolhost/app"

# Set as the runtime is built, so a call pays nothing for them: the folders
# on the module search path (a folder the host does not hand over is simply
# not there), and each package imported now (`xml`, `email`) also looking
# for its other modules in the standard library's folder.
sys.path[:0] = [_APP, _PACKAGES]
sys.path.append(_STDLIB)
_SEARCHED = [_APP, _PACKAGES, _STDLIB]
for _name, _module in list(sys.modules.items()):
    _paths = getattr(_module, "__path__", None)
    if isinstance(_paths, list):
        _on_disk = os.path.join(_STDLIB, *_name.split("."))
        _paths.append(_on_disk)
        _SEARCHED.append(_on_disk)


def _load():
    """The author's module, run once per instance."""
    global _app
    if _app is None:
        # Those folders were not there as the runtime was built: forget
        # that (a dictionary's entries, no file system call).
        for path in _SEARCHED:
            sys.path_importer_cache.pop(path, None)
        name, text = _source.read()
        if not name:
            raise RuntimeError("toolhost gave this runtime no source to run")
        module = types.ModuleType("app")
        module.__file__ = name
        if os.path.isdir(_APP):
            # Its data files open beside it, as they would from its folder.
            module.__file__ = os.path.join(_APP, name)
            os.chdir(_APP)
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


def _begin():
    """Once per instance, before a caller's first request."""
    global _begun
    if not _begun:
        _begun = True
        drawn = sys.modules.get("random")
        if drawn is not None:
            drawn.seed()
        # Temporary names are drawn from a generator made at first use.
        temporary = sys.modules.get("tempfile")
        if temporary is not None:
            temporary._name_sequence = None


class Tools(_Tools):
    def list_tools(self):
        _load()
        return super().list_tools()

    def call_tool(self, name, arguments):
        _load()
        _begin()
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
        _begin()
        return super().read_resource(uri)


class Prompts(_Prompts):
    def list_prompts(self):
        _load()
        return super().list_prompts()

    def get_prompt(self, name, arguments):
        _load()
        _begin()
        return super().get_prompt(name, arguments)


class Completion(_Completion):
    def complete(self, reference, argument, value, context):
        _load()
        _begin()
        return super().complete(reference, argument, value, context)


class Views(_Views):
    def list_views(self):
        _load()
        return super().list_views()


class ToolDetails(_ToolDetails):
    def list_tool_details(self):
        _load()
        return super().list_tool_details()
