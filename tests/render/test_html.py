"""The HTML report: self-contained, hostile evidence inert, overrides, one file written."""

import html
import json
import re
from dataclasses import replace
from html.parser import HTMLParser

import pytest

from assurance.render.html import RenderOptions, render_report_html, write_report
from tests.render.conftest import D1, D2, HOSTILE, make_model


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.scripts, self.urls, self.handlers, self.ids = [], [], [], [], []
        self._in_script = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for name, value in attrs:
            if name.startswith("on"):
                self.handlers.append((tag, name, value))
            if name in ("href", "src", "action", "xlink:href", "formaction", "srcset"):
                self.urls.append((tag, name, value))
            if name == "id":
                self.ids.append(value)
        if tag == "script":
            self._in_script = dict(attrs)
            self.scripts.append([dict(attrs), ""])

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = None

    def handle_data(self, data):
        if self._in_script is not None:
            self.scripts[-1][1] += data


@pytest.fixture(scope="module")
def hostile_html():
    return render_report_html(make_model(hostile=True), RenderOptions(with_diagram=False))


def _parse(html):
    parser = _Collect()
    parser.feed(html)
    parser.close()
    return parser


def test_hostile_text_renders_inert(hostile_html):
    doc = _parse(hostile_html)
    assert sorted(str(s[0].get("type")) for s in doc.scripts) == ["None", "application/json", "application/json"]
    assert doc.handlers == []
    assert "img" not in doc.tags and "iframe" not in doc.tags
    bad = [u for u in doc.urls if not (u[2].startswith("#") or u[2].startswith("https://example.org/"))]
    assert bad == []
    assert ("a", "href", "https://example.org/run/1") in doc.urls  # a valid http(s) link stays a link
    assert "{{ 7*7 }}" in hostile_html and "{% if 1 %}" in hostile_html  # shown, never evaluated
    assert "\x00" not in hostile_html and "\u202e" not in hostile_html and "\\u202e" in hostile_html
    hostile_html.encode("utf-8")  # lone surrogates were escaped


def test_long_text_is_cut_with_the_full_text_available(hostile_html):
    assert "show all 20" in hostile_html  # the preview says how long the whole text is
    assert "L" * 20_000 in hostile_html  # and the whole text is there, in a collapsed block


def test_data_block_round_trips_and_cannot_break_out(hostile_html):
    doc = _parse(hostile_html)
    blocks = {attrs.get("id") or attrs.get("class"): text for attrs, text in doc.scripts}
    data = json.loads(blocks["report-data"])
    assert data["title"].startswith("</script><script>")
    assert data["scopes"][0]["node_count"] == 8
    assert data["scopes"][0]["verdicts"][0] == {"node": "G1", "status": "supported-under-trust", "anchor": "n-G1"}
    index = json.loads(blocks["index-data"])
    rows = [dict(zip(index["columns"], row)) for row in index["rows"]]
    hostile = next(r for r in rows if r["status"] == "fail")
    assert hostile["id"].startswith("</script><script>") and len(hostile["summary"]) > 20_000


def test_self_contained_with_a_strict_policy(hostile_html):
    csp = html.unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', hostile_html).group(1))
    assert "default-src 'none'" in csp and "script-src 'sha256-" in csp and "unsafe-inline" not in csp.split(";")[3]
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", hostile_html.replace('href="https://example.org/run/1"', ""))
    assert "@import" not in hostile_html and "url(" not in hostile_html


def test_report_content(model):
    text = render_report_html(model, RenderOptions(with_diagram=False))
    assert "Supported under trust" in text
    for heading in ("Trusted base", "Argument", "Kernel proofs", "Runtime checks",
                    "Comparison suites", "Evidence index", "Legend", "What the diagram shows"):
        assert heading in text
    assert "Needs attention" not in text and "Nothing needs attention" in text  # nothing failed, stale or missing
    assert 'id="n-G1"' in text and 'href="#n-Sn-kernels"' in text
    assert "BM=64,BN=64" in text and "1.25" in text  # kernel proof configuration and time
    assert "expired" in text and "no rationale given" in text  # flagged trusted item


def test_sections_appear_only_when_the_case_has_something_for_them(model, hostile_model):
    assert "Needs attention" in render_report_html(hostile_model, RenderOptions(with_diagram=False))
    scope = model.scopes[0]
    tests_only = replace(scope, nodes=tuple(n for n in scope.nodes if n.node_id in ("G1", "C1", "S1", "Sn-compare")),
                         trusted_base=(), evidence=tuple(i for i in scope.evidence if i.category == "test_result"))
    text = render_report_html(replace(model, scopes=(tests_only,)), RenderOptions(with_diagram=False))
    assert "Comparison suites" in text and "Evidence by category" in text
    for gone in ("Kernel proofs", "kernel-proofs", "Runtime checks", "No kernel proofs", "Trusted base", "Needs attention"):
        assert gone not in text, gone
    nothing = replace(tests_only, evidence=(), nodes=tuple(replace(n, categories=()) for n in tests_only.nodes))
    text = render_report_html(replace(model, scopes=(nothing,)), RenderOptions(with_diagram=False))
    assert "Evidence by category" not in text and "Argument" in text


def test_each_deployment_gets_its_own_section_and_anchors():
    text = render_report_html(make_model(digests=(D1, D2)), RenderOptions(with_diagram=False))
    assert 'id="d11111111-n-G1"' in text and 'id="d22222222-n-G1"' in text
    assert text.count('class="verdict ') == 2


def test_write_report_writes_only_report_html(tmp_path):
    out = tmp_path / "out"
    path = write_report(make_model(hostile=True), out, RenderOptions(with_diagram=False))
    assert path == out / "report.html"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["out", "report.html"]


def test_user_templates_override_and_extend_the_originals(tmp_path):
    (tmp_path / "report.html").write_text(
        '{% extends "default:report.html" %}{% block title %}Custom {{ super() }}{% endblock %}', encoding="utf-8")
    (tmp_path / "_legend.html").write_text("<p>my legend</p>", encoding="utf-8")
    text = render_report_html(make_model(), RenderOptions(template_dir=tmp_path, with_diagram=False))
    assert "<title>Custom bitcase assurance report</title>" in text
    assert "<p>my legend</p>" in text and "Audit review states" not in text


def test_missing_template_dir_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        RenderOptions(template_dir=tmp_path / "nope")


def test_the_same_model_renders_the_same_bytes(model):
    options = RenderOptions(with_diagram=False)
    assert render_report_html(model, options) == render_report_html(model, options)


def test_hostile_constant_is_really_hostile():
    # Guards the guard: the payload must contain what the assertions above look for.
    assert "<script>" in HOSTILE and "onerror" in HOSTILE and "javascript:" in HOSTILE and "{{" in HOSTILE
