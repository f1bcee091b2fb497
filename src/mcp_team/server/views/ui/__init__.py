"""The run view's page: `view.html` with its stylesheet and scripts (files beside this module) inlined, so
it is one self-contained document that makes no request of its own (an MCP App frame may not).

`page(config)` fills the page's config block: `mode` ("app" in an MCP App frame, "http" on the HTTP
server), `runId` (a run, or None for the list) and `traceUrl` (a link template with `{trace_id}`, or None).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from importlib.resources import files

_STYLESHEET = re.compile(r'<link rel="stylesheet" href="([\w.-]+\.css)">')
_SCRIPT = re.compile(r'<script src="([\w.-]+\.js)"></script>')
_CONFIG = re.compile(r'(<script id="config" type="application/json">)(.*?)(</script>)', re.S)


def _read(name: str) -> str:
    return files(__name__).joinpath(name).read_text(encoding="utf-8")


def _inlined(name: str) -> str:
    text = _read(name)
    if "</script" in text.lower() or "</style" in text.lower():
        raise ValueError(f"{name} must not contain '</script' or '</style': it is inlined into the page")
    return text


@functools.cache
def _template() -> str:
    html = _STYLESHEET.sub(lambda m: f"<style>\n{_inlined(m[1])}</style>", _read("view.html"))
    return _SCRIPT.sub(lambda m: f"<script>\n{_inlined(m[1])}</script>", html)


def page(config: Mapping[str, object]) -> str:
    """The view as one HTML document, with `config` as its settings."""
    # JSON inside <script>: "<" escaped so no value can close the element.
    data = json.dumps(dict(config)).replace("<", "\\u003c")
    return _CONFIG.sub(lambda m: m[1] + data + m[3], _template(), count=1)
