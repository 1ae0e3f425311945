"""The Jinja2 environment for reports, set up as datasette does.

Autoescape is on for every template. Templates resolve first in an optional user template
directory, then in the package's ``templates/``; ``default:NAME`` always names the packaged
original, so an override can ``{% extends "default:report.html" %}`` and change one block.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

import templates as _package_templates
from assurance.render import safe
from assurance.render.fragments import badge, long_text
from assurance.render.rows import kv, review_badge, status_tokens, tree_row

__all__ = ["PACKAGE_TEMPLATE_DIR", "make_environment", "read_asset"]

PACKAGE_TEMPLATE_DIR = Path(_package_templates.__file__).resolve().parent


def _finalize(value: Any) -> Any:
    """Every ``{{ … }}`` output passes here before escaping: strings lose control characters."""
    if isinstance(value, Markup) or isinstance(value, (bool, int, float)):
        return value
    return safe.clean_text(value)


def make_environment(template_dir: Path | None = None) -> jinja2.Environment:
    """An autoescaping environment over ``template_dir`` (optional) then the package templates."""
    package_loader = jinja2.FileSystemLoader(PACKAGE_TEMPLATE_DIR)
    loaders: list[jinja2.BaseLoader] = []
    if template_dir is not None:
        if not Path(template_dir).is_dir():
            raise FileNotFoundError(f"template directory {template_dir} does not exist")
        loaders.append(jinja2.FileSystemLoader(Path(template_dir)))
    loaders.append(package_loader)
    loaders.append(jinja2.PrefixLoader({"default": package_loader}, delimiter=":"))
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=_finalize,
    )
    env.filters["short"] = safe.short_digest
    env.globals["long"] = long_text
    env.globals["badge"] = badge
    env.globals["status_tokens"] = status_tokens
    env.globals["tree_row"] = tree_row
    env.globals["review_badge"] = review_badge
    env.globals["kv"] = kv
    return env


def read_asset(env: jinja2.Environment, name: str) -> str:
    """The raw text of a static asset (CSS, JS) through the same override lookup as templates.

    Assets are inlined verbatim, not rendered: script and style text never passes through
    Jinja, so braces in them mean nothing.
    """
    assert env.loader is not None
    source, _filename, _uptodate = env.loader.get_source(env, name)
    return source
