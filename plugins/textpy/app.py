"""textpy: text utilities, a toolhost plugin written in Python.

Two tools on the helper library (sdk/python/toolhost_plugin.py):
``word_stats`` answers with structured data (a dataclass, so an output
schema), ``slugify`` with text, and a business error for text that has
nothing to slugify. Build it from the repository root with

    make plugins/textpy.wasm

which runs

    target/toolchains/python/bin/componentize-py -d wit -w full \\
        componentize -p plugins/textpy -p sdk/python app -o plugins/textpy.wasm
"""

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import Literal

from toolhost_plugin import ToolError, Tools, prompt, resource, tool  # noqa: F401 (Tools is the export)


@dataclass
class WordCount:
    """A word and how often it occurs."""

    word: str
    count: int


@dataclass
class WordStats:
    """Counts for a text.

    Attributes:
        words: Number of words
        characters: Number of characters, spaces included
        lines: Number of lines
        top_words: The most frequent words (lowercased), most frequent first
    """

    words: int
    characters: int
    lines: int
    top_words: list[WordCount]


WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
# Compiled at build time, into the component's snapshot: a pattern first
# compiled inside a call would be compiled again in every call's fresh
# instance.
SLUG_PART = re.compile(r"[a-z0-9]+")


@tool(title="Word statistics", read_only=True, idempotent=True, open_world=False)
def word_stats(text: str, top: int = 3) -> WordStats:
    """Counts the words, characters and lines of a text and finds its most frequent words.

    Args:
        text: The text to analyse
        top: How many of the most frequent words to list (0 for none)
    """
    if top < 0:
        raise ToolError("INVALID_ARGUMENTS", "top must not be negative", {"top": top})
    words = WORD.findall(text)
    counts = Counter(word.lower() for word in words)
    # A stable sort keeps first-seen order among equal counts. (Not
    # Counter.most_common(n): it imports heapq when called, and a component
    # has only the modules imported at build time.)
    ranked = sorted(counts.items(), key=lambda item: -item[1])[:top]
    return WordStats(
        words=len(words),
        characters=len(text),
        lines=len(text.splitlines()),
        top_words=[WordCount(word, count) for word, count in ranked],
    )


@tool(title="Slugify", read_only=True, idempotent=True, open_world=False)
def slugify(text: str, separator: Literal["-", "_"] = "-", max_length: int | None = None) -> str:
    """Turns a text into a URL slug: lowercase ASCII letters and digits joined by a separator.

    Args:
        text: The text to turn into a slug, for example a title
        separator: What joins the words
        max_length: Cut the slug to at most this many characters, at a word boundary when possible
    """
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    parts = SLUG_PART.findall(ascii_text.lower())
    if not parts:
        raise ToolError("NOTHING_TO_SLUGIFY", "the text has no letters or digits", details={"text": text})
    slug = separator.join(parts)
    if max_length is not None and len(slug) > max_length:
        if max_length < 1:
            raise ToolError("INVALID_ARGUMENTS", "max_length must be at least 1", {"max_length": max_length})
        cut = slug[:max_length]
        boundary = cut.rfind(separator)
        slug = cut[:boundary] if boundary > 0 and slug[max_length] != separator else cut
        slug = slug.rstrip(separator)
    return slug


# Contract 0.2.0: a resource template and a prompt, typed functions too.

@resource("text://slug/{text}", mime_type="text/plain")
def slug_of(text: str) -> str:
    """The slug of a text (as a URL part), with dashes."""
    return slugify(text)


@prompt(title="Summarize", complete={"style": lambda typed: [
    s for s in ("bullet points", "one sentence", "plain words") if s.startswith(typed)]})
def summarize(text: str, style: str = "one sentence") -> str:
    """Asks the model to summarize a text.

    Args:
        text: The text to summarize
        style: How the summary reads
    """
    return f"Summarize this text in {style}:\n\n{text}"
