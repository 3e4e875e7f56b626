"""The report's one templating layer: Jinja2 with autoescaping, and its small parts.

Every piece of the HTML report (``report.build``, ``sections/``) and of the
reproduction page is rendered from a Jinja2 template: text is escaped
unless it is ``Markup`` (a rendered template), so a variant named
``<b>`` or a reason quoting a shell line cannot break the page.  The
templates are strings next to the code that fills them: a section's
markup and its logic are read together, and nothing has to be shipped as
package data.  The attribute quotes (``class='l'``) and the absence of
whitespace between cells are the pages' long-standing format, which tests
and downstream scripts (``split("<h2", ...)``) rely on.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from pathlib import Path

import jinja2
from markupsafe import Markup

__all__ = ["Markup", "figure", "join", "render", "span", "table"]

_ENV = jinja2.Environment(
    autoescape=True,
    undefined=jinja2.StrictUndefined,  # a misspelled variable is an error, not ""
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=False,
)


@cache
def _template(source: str) -> jinja2.Template:
    return _ENV.from_string(source)


def render(source: str, **values) -> Markup:
    """``source`` (a Jinja2 template) rendered with ``values``, escaped, as Markup."""
    return Markup(_template(source).render(**values))


def join(parts: Iterable[Markup | str | None], sep: str = "") -> Markup:
    """Rendered parts one after the other (None left out; plain text escaped)."""
    return Markup(sep).join(p for p in parts if p is not None)


def span(cls: str, text) -> Markup:
    """``<span class='cls'>text</span>``, the text escaped."""
    return render("<span class='{{ cls }}'>{{ text }}</span>", cls=cls, text=text)


_TABLE = (
    "<table>"
    "{% if headers|select|list %}<tr>"
    "{% for h in headers %}<th class='{{ 'l' if loop.index0 < left else '' }}'>{{ h }}</th>"
    "{% endfor %}</tr>{% endif %}"
    "{% for row in rows %}<tr{% if classes[loop.index0] %} class='{{ classes[loop.index0] }}'"
    "{% endif %}>{% for cell in row %}<td class='{{ 'l' if loop.index0 < left else '' }}'>"
    "{{ cell }}</td>{% endfor %}</tr>{% endfor %}</table>"
)


def table(
    headers: Sequence,
    rows: Sequence[Sequence],
    left: int = 1,
    row_class: Callable[[int], str] | None = None,
) -> Markup:
    """A table: the first ``left`` columns left-aligned (labels), the others right
    (numbers); ``row_class(i)`` gives row i a class (e.g. ``first`` of a group).
    Headers and cells are escaped unless they are Markup."""
    classes = [row_class(i) if row_class else "" for i in range(len(rows))]
    return render(_TABLE, headers=headers, rows=rows, left=left, classes=classes)


_FIGURE = (
    "<div class='fig'><img alt='{{ caption }}' src='data:image/png;base64,{{ data }}'>"
    "<div class='cap'>{{ caption }} &middot; <a href='{{ rel }}'>PDF</a></div></div>"
)


def figure(png: Path, caption: str, pdf: Path, base: Path) -> Markup:
    """A PNG embedded in the page (self-contained) with its caption and a link to
    its PDF, relative to the page's directory ``base`` when below it."""
    data = base64.b64encode(Path(png).read_bytes()).decode()
    try:
        rel = Path(pdf).relative_to(base)
    except ValueError:
        rel = Path(pdf)
    return render(_FIGURE, caption=caption, data=data, rel=str(rel))
