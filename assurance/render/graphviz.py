"""Run Graphviz ``dot`` and make its SVG safe to inline in the report.

``dot`` may be missing; callers get :class:`DotMissingError` with the fix. The SVG is parsed
with defusedxml and rebuilt from an allow-list of elements and attributes, so nothing in
it can run script or fetch anything, whatever the labels held.
"""

from __future__ import annotations

import shutil
import subprocess
from xml.etree.ElementTree import Element, tostring

from defusedxml.ElementTree import fromstring

__all__ = ["DotMissingError", "DotFailedError", "find_dot", "run_dot", "sanitize_svg", "INSTALL_HINT"]

INSTALL_HINT = "install Graphviz: apt-get install graphviz (or your platform's graphviz package)"
_SVG_NS = "http://www.w3.org/2000/svg"
_ALLOWED_TAGS = {"svg", "g", "title", "path", "polygon", "polyline", "ellipse", "circle", "rect",
                 "line", "text", "tspan"}
_ALLOWED_ATTRS = {"width", "height", "viewBox", "transform", "class", "fill", "stroke",
                  "stroke-width", "stroke-dasharray", "stroke-opacity", "fill-opacity", "points", "d",
                  "cx", "cy", "rx", "ry", "r", "x", "y", "x1", "y1", "x2", "y2", "text-anchor",
                  "font-family", "font-size", "font-weight", "font-style", "opacity"}


class DotMissingError(RuntimeError):
    """The Graphviz ``dot`` program is not installed."""


class DotFailedError(RuntimeError):
    """``dot`` ran but failed."""


def find_dot() -> str | None:
    """Path of the ``dot`` program, or ``None`` when Graphviz is not installed."""
    return shutil.which("dot")


def run_dot(dot_text: str, fmt: str, *, timeout_s: float = 60.0) -> bytes:
    """Lay out ``dot_text`` and return it in ``fmt`` ("svg" or "png")."""
    if fmt not in ("svg", "png"):
        raise ValueError(f"unsupported format {fmt!r}")
    exe = find_dot()
    if exe is None:
        raise DotMissingError(f"Graphviz 'dot' was not found on PATH; {INSTALL_HINT}")
    proc = subprocess.run([exe, f"-T{fmt}"], input=dot_text.encode("utf-8"), capture_output=True,
                          timeout=timeout_s, check=False)
    if proc.returncode != 0:
        raise DotFailedError(f"dot failed (exit {proc.returncode}): "
                             f"{proc.stderr.decode('utf-8', 'replace').strip()[:500]}")
    return proc.stdout


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


_XLINK_TITLE = "{http://www.w3.org/1999/xlink}title"


def _copy(src: Element) -> Element | None:
    tag = _local(src.tag)
    if tag == "a":
        # Graphviz wraps a node or edge that has a tooltip in <a xlink:title=…>. Keep what it
        # draws, turn the tooltip into a <title> and drop the link itself.
        dst = Element("g")
        if src.get(_XLINK_TITLE):
            title = Element("title")
            title.text = src.get(_XLINK_TITLE)
            dst.append(title)
    elif tag in _ALLOWED_TAGS:
        dst = Element(tag, {k: v for k, v in sorted(src.attrib.items()) if k in _ALLOWED_ATTRS})
        dst.text = src.text
    else:
        return None
    for child in src:
        kept = _copy(child)
        if kept is not None:
            kept.tail = child.tail
            dst.append(kept)
    return dst


def sanitize_svg(svg: bytes) -> str:
    """Graphviz SVG reduced to drawing elements, ready to inline in HTML (no links, no script)."""
    root = fromstring(svg)
    clean = _copy(root)
    if clean is None:
        raise DotFailedError("dot did not produce an SVG document")
    clean.set("xmlns", _SVG_NS)
    clean.set("role", "img")
    return tostring(clean, encoding="unicode", short_empty_elements=True)
