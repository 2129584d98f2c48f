"""Tests for __NAME__: plain CPython, no component needed (python3 -m unittest)."""

import unittest

import app  # noqa: F401 (registers the tools)
from toolhost_plugin import ToolError, call


class GreetTest(unittest.TestCase):
    def test_greets_by_name(self):
        self.assertEqual(app.greet("Ada"), app.Greeting(greeting="Hello, Ada!"))

    def test_answers_through_the_tool_list_as_the_host_calls_it(self):
        answer = call("__NAME__", {"name": "Ada"})
        self.assertEqual(answer.structured, {"greeting": "Hello, Ada!"})
        with self.assertRaises(ToolError) as error:
            call("__NAME__", {"name": " "})
        self.assertEqual(error.exception.code, "EMPTY_NAME")


if __name__ == "__main__":
    unittest.main()
