"""What `make runtimes` packs for the binary to embed, zstd-compressed.

    python pack.py stdlib COMPONENTIZE_PY_MODULE OUT.tar.zst OUT-modules.txt LEFT-OUT.txt
    python pack.py compress IN OUT.zst

`stdlib` writes the Python runtime's standard library beside it, for
toolhost to hand the runtime read-only. componentize-py carries
CPython's standard library (the same version its runtime is built from) as
a zstd-compressed tar inside its native module; only what the runtime
imports as it is built ends up in the runtime's snapshot. This finds that
tar, checks it is the standard library of the runtime's CPython, and writes
it out zstd-compressed, without the modules no source may import
(left-out.txt), with the list of all its top-level modules.
`compress` compresses one file (a runtime component) as FRAMES frames of
equal parts, and ends it with a skippable frame holding the SHA-256 of
what it compressed, by which host/build.rs knows the copy is of the
runtime beside it (file times say nothing once a folder is copied or
restored).
"""

import ast
import hashlib
import io
import struct
import sys
import tarfile

import zstandard

MAGIC = b"\x28\xb5\x2f\xfd"
# A skippable frame's magic number (zstd's format: 0x184D2A50 to 5F):
# decoders pass over it, and a one-frame decoder never reaches it.
DIGEST_FRAME = 0x184D2A5E
# A runtime is compressed as this many frames, each with its size, which
# toolhost decodes side by side into one buffer (languages/runtimes.rs):
# unpacked on every core as a server starts.
FRAMES = 4


def frames(data):
    start = data.find(MAGIC)
    while start != -1:
        yield start
        start = data.find(MAGIC, start + 1)


def main(module, out, listing, left_out):
    data = open(module, "rb").read()
    for start in frames(data):
        try:
            tar_bytes = zstandard.ZstdDecompressor().decompressobj().decompress(data[start:])
        except zstandard.ZstdError:
            continue
        if tar_bytes[257:262] != b"ustar":
            continue
        names = tarfile.open(fileobj=io.BytesIO(tar_bytes)).getnames()
        if "zoneinfo/__init__.py" in names and "os.py" in names:
            break
    else:
        sys.exit(f"{module}: no standard library found in it")
    with open(out, "wb") as file:
        file.write(zstandard.ZstdCompressor(level=19).compress(without(tar_bytes, left_out)))
    top = sorted({name.split("/")[0].removesuffix(".py") for name in names
                  if name.endswith(".py") and "-" not in name.split("/")[0]})
    with open(listing, "w") as file:
        file.write("\n".join(top) + "\n")


def module_level_imports(text):
    """The top-level names a module imports as it runs (not in its
    functions)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    found = set()
    for statement in tree.body:
        nodes = [statement]
        if isinstance(statement, (ast.If, ast.Try)):
            nodes = [node for node in ast.walk(statement)
                     if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found


def without(tar_bytes, left_out):
    """The tar without the top-level packages and modules `left_out` (a
    file, one name a line) names, which no source may import, but those a
    module the tar keeps imports as it runs (`logging.config` imports
    `socketserver`, `unittest.mock` imports `asyncio`)."""
    names = {line.strip() for line in open(left_out)
             if line.strip() and not line.startswith("#")}
    source = tarfile.open(fileobj=io.BytesIO(tar_bytes))
    members = source.getmembers()
    top = lambda member: member.name.split("/")[0].removesuffix(".py")
    imports = {}
    for member in members:
        if member.isfile() and member.name.endswith(".py"):
            imports.setdefault(top(member), set()).update(
                module_level_imports(source.extractfile(member).read()))
    dropped = set(names)
    while True:
        needed = {name for module, imported in imports.items() if module not in dropped
                  for name in imported & dropped}
        if not needed:
            break
        dropped -= needed
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as kept:
        for member in members:
            if top(member) in dropped:
                continue
            kept.addfile(member, source.extractfile(member) if member.isfile() else None)
    return out.getvalue()


def compress(source, out):
    with open(source, "rb") as file:
        data = file.read()
    compressor = zstandard.ZstdCompressor(level=19, threads=-1)
    part = max(1, -(-len(data) // FRAMES))
    with open(out, "wb") as file:
        for start in range(0, max(len(data), 1), part):
            file.write(compressor.compress(data[start:start + part]))
        file.write(struct.pack("<II", DIGEST_FRAME, 32) + hashlib.sha256(data).digest())


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    {"stdlib": main, "compress": compress}[command](*args)
