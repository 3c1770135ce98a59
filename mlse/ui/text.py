"""Showing user text in the app: one rule for markdown, one for HTML. Every tab escapes through here.

**Markdown** (:func:`md_escape`): sentences, model names and error messages are shown *literally* inside
``gr.Markdown`` (which renders HTML too), on one line:

0. on a public deployment, server folders are named instead of spelled out (:func:`mlse.public_mode.hide_server_paths`);
1. control characters go by :mod:`mlse.text.control_chars`'s rule (joiners and variation selectors stay);
2. every run of whitespace, line breaks included, becomes one space (a table cell, a status line);
3. HTML is escaped (``<``, ``>``, ``&``); quotes stay (an entity's ``#`` would be backslashed and show);
4. characters that make markup anywhere in a line are backslashed: ``\\ ` * _ { } [ ] # | ~``;
5. characters that make markup only in one place are backslashed there: a link target's parentheses right after
   ``]``, and a line-start marker (``-``, ``+``, ``=``, ``1.``, ``1)``); elsewhere they stay ("en-de", "3.8").

A code span takes :func:`md_code` instead; **HTML** (plotly labels, ``gr.HTML``) takes :func:`html_text`.
"""

from __future__ import annotations

import html
import re

from mlse.public_mode import hide_server_paths
from mlse.text.control_chars import strip_controls

_INLINE = re.compile(r"([\\`*_{}\[\]#|~])")
_LINK_TARGET = re.compile(r"(\\\])\(([^()]*)\)")  # an escaped "]" then "(...)"
_LINE_START = re.compile(r"^(\d+(?=[.)])|[-+=])")


def md_escape(text) -> str:
    """``text`` shown literally inside markdown, on one line (the rule in the module docstring)."""
    one_line = " ".join(strip_controls(hide_server_paths(str(text)))[0].split())
    escaped = _INLINE.sub(r"\\\1", html.escape(one_line, quote=False))
    escaped = _LINK_TARGET.sub(r"\1\\(\2\\)", escaped)
    return _LINE_START.sub(lambda m: m.group(1) + "\\" if m.group(1)[0].isdigit() else "\\" + m.group(1), escaped)


def md_code(text) -> str:
    """``text`` for the inside of a markdown code span, on one line: HTML escaped (the app's markdown renders HTML),
    backticks (which would end the span) made quotes, nothing backslashed (backslashes show literally there)."""
    shown = strip_controls(hide_server_paths(str(text)))[0]
    return html.escape(" ".join(shown.replace("`", "'").split()), quote=False)


def html_text(text) -> str:
    """``text`` for an HTML context: a plotly legend or hover label, a ``gr.HTML`` block (HTML-escaped)."""
    return html.escape(str(text))
