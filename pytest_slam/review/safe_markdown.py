"""A small, safe Markdown subset for answers: everything is escaped first, then formatted.

Supported: fenced code blocks (kept verbatim as code), inline code, ``**bold**``, ``*italic*``,
headings, bullet and numbered lists, paragraphs. No links, images or raw HTML: an answer holding
``<script>`` is shown as text, never run. Models write this much Markdown; a full renderer would
be a dependency and a way to smuggle markup into the page.
"""

from __future__ import annotations

import re
from html import escape

_FENCE = re.compile(r"^```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)(?:^```[ \t]*$|\Z)", re.M | re.S)
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
_BULLET = re.compile(r"^\s*[-*+]\s+(.*)$")
_NUMBERED = re.compile(r"^\s*\d{1,3}[.)]\s+(.*)$")
_CODE = re.compile(r"`([^`\n]+)`")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_ITALIC = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])")


def render(text: str) -> str:
    """HTML for an answer; only tags this function writes can appear in it."""
    out: list[str] = []
    pos = 0
    for match in _FENCE.finditer(text):
        out.extend(_blocks(text[pos : match.start()]))
        lang = escape(match.group(1))
        cls = f' class="lang-{lang}"' if lang else ""
        out.append(f"<pre><code{cls}>{escape(match.group(2).rstrip(chr(10)))}</code></pre>")
        pos = match.end()
    out.extend(_blocks(text[pos:]))
    return "\n".join(out)


def inline(line: str) -> str:
    """Escape a line, then format inline code, bold and italic (never inside code)."""
    parts = _CODE.split(line)
    html = []
    for index, part in enumerate(parts):
        if index % 2:
            html.append(f"<code>{escape(part)}</code>")
        else:
            part = _BOLD.sub(r"<strong>\1</strong>", escape(part, quote=False))
            html.append(_ITALIC.sub(r"<em>\1</em>", part))
    return "".join(html)


def _blocks(text: str) -> list[str]:
    """Headings, lists and paragraphs of text outside code fences."""
    out: list[str] = []
    para: list[str] = []
    items: list[str] = []
    kind = ""

    def close() -> None:
        nonlocal kind
        if para:
            out.append("<p>" + "<br>".join(inline(x) for x in para) + "</p>")
            para.clear()
        if items:
            out.append(f"<{kind}>" + "".join(f"<li>{inline(x)}</li>" for x in items) + f"</{kind}>")
            items.clear()
        kind = ""

    for line in text.splitlines():
        heading = _HEADING.match(line)
        item = _BULLET.match(line) or _NUMBERED.match(line)
        if not line.strip() or heading:
            close()
            if heading:
                level = min(len(heading.group(1)) + 2, 6)  # below the page's own headings
                out.append(f"<h{level}>{inline(heading.group(2))}</h{level}>")
        elif item:
            new_kind = "ul" if _BULLET.match(line) else "ol"
            if para or (kind and kind != new_kind):
                close()
            kind = new_kind
            items.append(item.group(1))
        elif items and line.startswith((" ", "\t")):
            items[-1] += " " + line.strip()
        else:
            if items:
                close()
            para.append(line)
    close()
    return out
