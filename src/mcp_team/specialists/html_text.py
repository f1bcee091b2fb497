"""HTML to readable text, for `fetch_url`: the visible text of a page and its title.

Script, style and similar elements are dropped, block elements become line breaks, and whitespace is
collapsed outside `<pre>`. Only the standard library's `HTMLParser`: it survives unclosed and broken markup.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

_SKIP = frozenset({"script", "style", "noscript", "template", "svg", "math", "canvas", "iframe", "object"})
_PARAGRAPH = frozenset(
    {
        "article", "aside", "blockquote", "details", "div", "dl", "fieldset", "figure", "footer", "form", "h1", "h2",
        "h3", "h4", "h5", "h6", "header", "hr", "main", "nav", "ol", "p", "pre", "section", "table", "ul",
    }
)  # fmt: skip
_LINE = frozenset({"address", "br", "caption", "dd", "dt", "figcaption", "li", "summary", "tr"})


class _TextExtractor(HTMLParser):
    """Collects visible text; block elements become line breaks (merged: the widest break wins)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str | int] = []  # text, or a break of 1 (new line) or 2 (blank line) newlines
        self.title: list[str] = []
        self._skip_depth = 0
        self._pre_depth = 0
        self._in_title = False

    def _break(self, newlines: int) -> None:
        if self.parts and isinstance(self.parts[-1], int):
            self.parts[-1] = max(self.parts[-1], newlines)
        else:
            self.parts.append(newlines)

    def _block(self, tag: str) -> None:
        if tag in _PARAGRAPH:
            self._break(2)
        elif tag in _LINE:
            self._break(1)
        elif tag in ("td", "th"):
            self.parts.append(" ")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title" and not self._skip_depth:
            self._in_title = True
        elif tag in _SKIP:
            self._skip_depth += 1
        elif tag == "pre":
            self._pre_depth += 1
        self._block(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._block(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in _SKIP and self._skip_depth:
            self._skip_depth -= 1
        elif tag == "pre" and self._pre_depth:
            self._pre_depth -= 1
        self._block(tag)

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title.append(data)
            return
        if self._skip_depth:
            return
        if not self._pre_depth:
            data = re.sub(r"\s+", " ", data)
            last = self.parts[-1] if self.parts else 0
            if isinstance(last, int) or last.endswith(" "):
                data = data.lstrip()
        if data:
            self.parts.append(data)

    def text(self) -> str:
        joined = "".join("\n" * part if isinstance(part, int) else part for part in self.parts)
        lines = "\n".join(line.rstrip() for line in joined.split("\n"))
        return re.sub(r"\n{3,}", "\n\n", lines).strip("\n")


def html_to_text(html: str) -> tuple[str, str]:
    """(title, visible text) of an HTML document: no script/style, whitespace collapsed outside <pre>."""
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    return re.sub(r"\s+", " ", "".join(parser.title)).strip(), parser.text()
