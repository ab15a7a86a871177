"""HTML of the report: one self-contained page (inline CSS, base64 PNG images, no script).

Every number that comes from the CLI's JSON summary is rendered by :func:`fmt` and carries
``data-key="<dotted path in the summary>"`` (list items use their index, e.g.
``stats.after.nmad`` or ``steps.0.learned.shift_x_``), so it can be checked against the
JSON. Numbers computed by the report itself use keys starting with ``report.``, and values
read from the fitted coregistration object keys starting with ``coreg.``.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # annotations only
    from xdem.typing import JSONDict

__all__ = ["fmt", "fmt_float", "SIGNIFICANT", "render_value", "table", "section", "document", "img", "key_value_rows"]

#: Significant figures of every floating-point number shown (integer digits are never rounded away).
SIGNIFICANT = 4

_CSS = """
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:0;color:#1b1b1b;background:#fafafa}
header{background:#1f3b57;color:#fff;padding:18px 32px}
header h1{margin:0 0 4px 0;font-size:24px}
header p{margin:2px 0;font-size:13px;color:#d8e2ec}
nav{padding:8px 32px;background:#e9eef3;font-size:13px}
nav a{margin-right:14px;color:#1f3b57}
main{padding:8px 32px 40px 32px;max-width:1600px}
section{background:#fff;border:1px solid #dde3e8;border-radius:6px;padding:12px 20px;margin:16px 0}
h2{font-size:18px;margin:4px 0 10px 0;color:#1f3b57}
h3{font-size:15px;margin:12px 0 6px 0}
table{border-collapse:collapse;font-size:13px;margin:6px 0 10px 0}
th,td{border:1px solid #d5dbe0;padding:3px 9px;text-align:right;vertical-align:top}
th{background:#f0f3f6}
td.l,th.l{text-align:left}
img{max-width:100%;height:auto;display:block;margin:6px 0}
p.note{font-size:12px;color:#555;margin:4px 0}
code{font-size:12px}
"""


def fmt_float(value: float, *, sig: int = SIGNIFICANT) -> str:
    """Text of a float with ``sig`` significant figures, never "-0".

    Trailing zeros are significant: they are dropped only when the value is exact at this
    precision (``2.5`` -> ``"2.5"``, ``-29.9996`` -> ``"-30.00"``). Integer digits are kept
    (``487654.3`` -> ``"487654"``: a coordinate is not rounded to ``4.877e+05``); magnitudes
    below ``1e-4`` use scientific notation; a value that is zero (or ``-0.0``) is ``"0"``.

    Examples
    --------
    >>> [fmt_float(v) for v in (0.012345, -0.0, 2.5, 1234.56, 487654.3, -3.00264, 9.99996, 1.2344e-7, 1e-5)]
    ['0.01235', '0', '2.5', '1235', '487654', '-3.003', '10.00', '1.234e-07', '1e-05']
    """
    v = float(value)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0.0:
        return "0"
    rounded = float(f"{v:.{sig - 1}e}")  # sig significant figures (9.99996 -> 10.00)
    a = abs(rounded)
    if a >= 10 ** (sig - 1):
        text = f"{v:.0f}"
    elif a >= 1e-4:
        text = f"{rounded:.{sig - 1 - math.floor(math.log10(a))}f}"
        if rounded == v and "." in text:  # exact at this precision: no zeros that claim more
            text = text.rstrip("0").rstrip(".")
    else:
        mantissa, exp = f"{rounded:.{sig - 1}e}".split("e")
        text = f"{mantissa.rstrip('0').rstrip('.') if rounded == v else mantissa}e{exp}"
    return "0" if float(text) == 0.0 else text


def fmt(value: object) -> str:
    """Text of a value: floats by :func:`fmt_float` (:data:`SIGNIFICANT` significant figures,
    never "-0"), ints as ints, None as "—".

    Examples
    --------
    >>> fmt(0.012345), fmt(3), fmt(float("nan")), fmt(True), fmt(-0.00001), fmt(-0.0), fmt(-0.00001234)
    ('0.01235', '3', 'NaN', 'true', '-1e-05', '0', '-1.234e-05')
    """
    if value is None:
        return "—"
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return fmt_float(float(value))
    return str(value)


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, bool, int, float, np.generic))


def _attr(key: str | None) -> str:
    return f' data-key="{html.escape(key, quote=True)}"' if key is not None else ""


def render_value(value: object, key: str | None = None, *, max_items: int = 24) -> str:
    """HTML of a value; every scalar is wrapped in ``<span data-key=...>`` when ``key`` is set.

    Lists are rendered item by item (keys ``key.0``, ``key.1`` ...), nested dicts as
    ``name: value`` pairs; long lists are summarised.
    """
    if _is_scalar(value):
        return f"<span{_attr(key)}>{html.escape(fmt(value))}</span>"
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, dict):
        parts = [
            f"{html.escape(str(k))}: {render_value(v, None if key is None else f'{key}.{k}', max_items=max_items)}"
            for k, v in value.items()
        ]
        return "; ".join(parts) if parts else "{}"
    if isinstance(value, (list, tuple)):
        if len(value) > max_items:
            return f"<i>list of {len(value)} values</i>"
        items = [render_value(v, None if key is None else f"{key}.{i}", max_items=max_items) for i, v in enumerate(value)]
        if value and all(isinstance(v, (list, tuple)) for v in value):
            return "<br>".join(items)
        return "[" + ", ".join(items) + "]"
    return html.escape(str(value))


def cell(value: object, key: str | None = None, *, cls: str = "") -> str:
    """``<td>`` of one value; a scalar gets ``data-key`` on the cell itself."""
    c = f' class="{cls}"' if cls else ""
    if _is_scalar(value):
        return f"<td{c}{_attr(key)}>{html.escape(fmt(value))}</td>"
    return f"<td{c}>{render_value(value, key)}</td>"


def table(header: Sequence[str], rows: Iterable[Sequence[str]], *, caption: str | None = None, cls: str = "") -> str:
    """A table from a header and rows of ready-made cells (strings starting with ``<td``/``<th``)."""
    head = "".join(f'<th class="l">{html.escape(h)}</th>' if i == 0 else f"<th>{html.escape(h)}</th>"
                   for i, h in enumerate(header))
    body = "".join(f"<tr>{''.join(r)}</tr>" for r in rows)
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    c = f' class="{cls}"' if cls else ""
    return f"<table{c}>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def label_cell(text: str) -> str:
    """Left-aligned ``<th>`` row label."""
    return f'<th class="l">{html.escape(text)}</th>'


def key_value_rows(
    doc: JSONDict, prefix: str | None, *, skip: Sequence[str] = (), labels: dict[str, str] | None = None
) -> list[list[str]]:
    """Rows ``[name, value]`` of a dict; nested dicts are flattened with dotted names.

    ``labels`` maps a (dotted) name to the label shown, e.g. to say what a count counts.
    """
    rows: list[list[str]] = []
    for k, v in doc.items():
        if k in skip:
            continue
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict) and v and len(v) <= 40:
            for r in key_value_rows(v, key):
                name = f"{k}.{_strip_th(r[0])}"
                rows.append([label_cell((labels or {}).get(name, name)), r[1]])
        else:
            rows.append([label_cell((labels or {}).get(str(k), str(k))), cell(v, key, cls="l")])
    return rows


def _strip_th(th: str) -> str:
    return html.unescape(th.split(">", 1)[1].rsplit("<", 1)[0])


def img(b64: str, alt: str) -> str:
    """Inline PNG image."""
    return f'<img alt="{html.escape(alt, quote=True)}" src="data:image/png;base64,{b64}">'


def note(text: str) -> str:
    """A small explanatory paragraph (escaped)."""
    return f'<p class="note">{html.escape(text)}</p>'


def section(sid: str, title: str, body: str) -> str:
    """A ``<section id=...>`` with a heading."""
    return f'<section id="{html.escape(sid, quote=True)}"><h2>{html.escape(title)}</h2>{body}</section>'


def document(title: str, subtitle_lines: Sequence[str], sections: Sequence[tuple[str, str, str]]) -> str:
    """The whole page: ``sections`` are ``(id, title, body_html)``."""
    nav = "".join(f'<a href="#{html.escape(s[0], quote=True)}">{html.escape(s[1])}</a>' for s in sections)
    subs = "".join(f"<p>{html.escape(s)}</p>" for s in subtitle_lines)
    body = "".join(section(*s) for s in sections)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        f"<header><h1>{html.escape(title)}</h1>{subs}</header>\n<nav>{nav}</nav>\n<main>\n{body}\n</main>\n"
        "</body>\n</html>\n"
    )
