"""Answers as Markdown, safely: escaped first, so markup in an answer is only ever text."""

from __future__ import annotations

from pytest_slam.review.safe_markdown import render


def test_code_blocks_stay_code_and_html_stays_text() -> None:
    text = "Run:\n\n```python\nif a < b:\n    print('<script>')\n```\nDone <script>x()</script>"
    assert render(text) == (
        "<p>Run:</p>\n"
        '<pre><code class="lang-python">if a &lt; b:\n    print(&#x27;&lt;script&gt;&#x27;)</code></pre>\n'
        "<p>Done &lt;script&gt;x()&lt;/script&gt;</p>"
    )


def test_the_small_subset() -> None:
    text = "## Steps\nUse **bold**, *em* and `<b>`.\n\n- one\n- two\n\n1. first\n2) second"
    assert render(text).split("\n") == [
        "<h4>Steps</h4>",
        "<p>Use <strong>bold</strong>, <em>em</em> and <code>&lt;b&gt;</code>.</p>",
        "<ul><li>one</li><li>two</li></ul>",
        "<ol><li>first</li><li>second</li></ol>",
    ]


def test_no_link_image_or_attribute_can_be_made() -> None:
    text = '[x](javascript:alert(1)) ![i](http://e/x.png) <a href="x" onclick="y">a</a> 2*3*4'
    html = render(text)
    assert "<a" not in html and "<img" not in html  # only the tags render() writes
    assert html == (
        '<p>[x](javascript:alert(1)) ![i](http://e/x.png) &lt;a href="x" onclick="y"&gt;a&lt;/a&gt; '
        "2*3*4</p>"
    )


def test_an_unclosed_fence_runs_to_the_end_as_code() -> None:
    assert render("```\n<i>x</i>") == "<pre><code>&lt;i&gt;x&lt;/i&gt;</code></pre>"
