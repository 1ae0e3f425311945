"""Render a :class:`ReportModel` to one self-contained HTML file.

CSS, JavaScript and the diagram SVG are inlined; a Content-Security-Policy allows only the
report's own script (by hash) and forbids every fetch, so the file opens from ``file://``
and makes no network request of any kind. The only file written is ``out_dir/report.html``
(through a temporary file in the same directory, renamed into place).
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from pathlib import Path

from markupsafe import Markup

from evidence_db.atomic import write_atomic
from assurance.render.context import index_data, report_context
from assurance.render.diagram import dot_source
from assurance.render.environment import make_environment, read_asset
from assurance.render.graphviz import INSTALL_HINT, DotFailedError, DotMissingError, run_dot, sanitize_svg
from assurance.render.model import ReportModel
from assurance.render.safe import script_json

__all__ = ["RenderOptions", "render_report_html", "write_report", "REPORT_FILENAME"]

REPORT_FILENAME = "report.html"


@dataclass(frozen=True, slots=True)
class RenderOptions:
    """How to render: an optional user template directory and whether to draw diagrams."""

    template_dir: Path | None = None
    with_diagram: bool = True

    def __post_init__(self) -> None:
        if self.template_dir is not None and not Path(self.template_dir).is_dir():
            raise ValueError(f"template directory {self.template_dir} does not exist")


def _csp(script_text: str) -> str:
    digest = base64.b64encode(hashlib.sha256(script_text.encode("utf-8")).digest()).decode("ascii")
    return ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
            f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'")


def _add_diagrams(context: dict, model: ReportModel, with_diagram: bool) -> None:
    for scope_ctx, scope in zip(context["scopes"], model.scopes):
        scope_ctx["diagram_svg"] = None
        scope_ctx["diagram_dot"] = ""
        if not with_diagram:
            scope_ctx["diagram_note"] = "diagrams were turned off for this report."
            continue
        dot_text = dot_source(scope)
        try:
            scope_ctx["diagram_svg"] = Markup(sanitize_svg(run_dot(dot_text, "svg")))  # noqa: S704
        except DotMissingError:
            scope_ctx["diagram_note"] = f"Graphviz 'dot' was not found when it was built; {INSTALL_HINT}."
            scope_ctx["diagram_dot"] = dot_text
        except DotFailedError as exc:
            scope_ctx["diagram_note"] = str(exc)
            scope_ctx["diagram_dot"] = dot_text


def render_report_html(model: ReportModel, options: RenderOptions = RenderOptions()) -> str:
    """The report for ``model`` as one HTML document."""
    env = make_environment(options.template_dir)
    context = report_context(model)
    _add_diagrams(context, model, options.with_diagram)
    script_text = read_asset(env, "report.js")
    css_text = read_asset(env, "report.css")
    if "</script" in script_text.lower() or "</style" in css_text.lower():
        raise ValueError("report.js and report.css must not contain a closing </script or </style")
    context.update(
        inline_css=Markup(css_text),  # noqa: S704 - our own asset, never evidence
        inline_js=Markup(script_text),  # noqa: S704 - our own asset, never evidence
        csp=_csp(script_text),
        data_json=script_json(context["data"]),
    )
    for scope_ctx in context["scopes"]:
        scope_ctx["index_json"] = script_json(index_data(scope_ctx))
    return env.get_template("report.html").render(context)


def write_report(model: ReportModel, out_dir: Path, options: RenderOptions = RenderOptions()) -> Path:
    """Render ``model`` into ``out_dir/report.html`` atomically and return that path."""
    html = render_report_html(model, options)
    return write_atomic(Path(out_dir) / REPORT_FILENAME, html.encode("utf-8", errors="strict"))
