"""What `make runtimes` packs for the binary to embed, zstd-compressed.

    python pack.py stdlib COMPONENTIZE_PY_MODULE OUT.tar.zst OUT-modules.txt
    python pack.py compress IN OUT.zst

`stdlib` writes the Python runtime's standard library beside it, for
toolhost to hand the runtime read-only. componentize-py carries
CPython's standard library (the same version its runtime is built from) as
a zstd-compressed tar inside its native module; only what the runtime
imports as it is built ends up in the runtime's snapshot. This finds that
tar, checks it is the standard library of the runtime's CPython, and writes
it out zstd-compressed, with the list of its top-level modules.
`compress` compresses one file (a runtime component).
"""

import io
import sys
import tarfile

import zstandard

MAGIC = b"\x28\xb5\x2f\xfd"


def frames(data):
    start = data.find(MAGIC)
    while start != -1:
        yield start
        start = data.find(MAGIC, start + 1)


def main(module, out, listing):
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
        file.write(zstandard.ZstdCompressor(level=19).compress(tar_bytes))
    top = sorted({name.split("/")[0].removesuffix(".py") for name in names
                  if name.endswith(".py") and "-" not in name.split("/")[0]})
    with open(listing, "w") as file:
        file.write("\n".join(top) + "\n")


def compress(source, out):
    with open(source, "rb") as file:
        data = file.read()
    with open(out, "wb") as file:
        file.write(zstandard.ZstdCompressor(level=19, threads=-1).compress(data))


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    {"stdlib": main, "compress": compress}[command](*args)
