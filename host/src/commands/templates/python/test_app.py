"""Tests for __NAME__: plain CPython, no component needed (python3 -m unittest)."""

import unittest

import app  # noqa: F401 (registers the tools)
from toolhost_plugin import ToolError, call, get_prompt


class GreetTest(unittest.TestCase):
    def test_greets_by_name(self):
        self.assertEqual(app.greet("Ada"), app.Greeting(greeting="Hello, Ada!"))

    def test_answers_through_the_tool_list_as_the_host_calls_it(self):
        answer = call("__NAME__", {"name": "Ada"})
        self.assertEqual(answer.structured, {"greeting": "Hello, Ada!"})
        with self.assertRaises(ToolError) as error:
            call("__NAME__", {"name": " "})
        self.assertEqual(error.exception.code, "EMPTY_NAME")

    def test_the_prompt_asks_for_a_greeting(self):
        [message] = get_prompt("__NAME___prompt", {"name": "Ada"})
        self.assertEqual(message.role, "user")
        self.assertIn("Ada", message.block.fields["text"])


if __name__ == "__main__":
    unittest.main()
