"""Hostile text helpers: cleaning, link validation, script-safe JSON, anchors."""

import json

import pytest

from assurance.render.fragments import long_text
from assurance.render.safe import anchor_id, clean_text, safe_url, script_json, short_digest


def test_clean_text_shows_controls_bidi_and_surrogates_as_escapes():
    assert clean_text("a\x00b\x1bc\u202ed\ud800e\tf\ng") == "a\\x00b\\x1bc\\u202ed\\ud800e\tf\ng"
    assert clean_text(b"\xff\xfe") == "\\xff\\xfe"
    assert clean_text({"b": 1, "a": [None]}) == '{"a": [null], "b": 1}'
    clean_text("\ud800").encode("utf-8")  # always encodable


def test_long_text_cuts_and_keeps_the_whole_text_escaped():
    assert str(long_text("a<b", 5)) == "a&lt;b"
    cut = str(long_text("<" * 10, 3))
    assert cut.startswith('<span class="long">&lt;&lt;&lt;… <button') and "show all 10 characters" in cut
    assert "&lt;" * 10 in cut and "<<" not in cut


@pytest.mark.parametrize("url", [
    "javascript:alert(1)", "JaVaScRiPt:alert(1)", " https://example.org", "https://exa mple.org",
    "data:text/html,<script>", "file:///etc/passwd", "/relative/path", "//example.org/x",
    "https://user:pw@example.org/", "https://example.org:99999/", "http://", "https://\x00example.org",
    "vbscript:x", 42, None, "https://example.org/" + "a" * 3000,
])
def test_safe_url_rejects_everything_but_plain_http_links(url):
    assert safe_url(url) is None


def test_safe_url_keeps_http_links():
    assert safe_url("HTTPS://example.org/a?b=1#c") == "https://example.org/a?b=1#c"
    assert safe_url("http://127.0.0.1:8080/x") == "http://127.0.0.1:8080/x"


def test_script_json_cannot_close_the_script_element_and_round_trips():
    value = {"x": "</script><script>alert(1)</script><!-- & \u2028 \u2029 \ud800"}
    text = str(script_json(value))
    for needle in ("<", ">", "&", "\u2028", "\u2029"):
        assert needle not in text
    decoded = json.loads(text)
    assert decoded["x"].startswith("</script><script>alert(1)")


def test_anchor_id_is_injective_and_fragment_safe():
    keys = ["G1", "G_1", "G 1", "G/1", "g1", "G1\u202e", "_20", "ä", ""]
    anchors = [anchor_id("n", k) for k in keys]
    assert len(set(anchors)) == len(keys)
    assert all(a.replace("-", "").replace("_", "").replace(".", "").isalnum() for a in anchors[:-1])


def test_short_digest():
    assert short_digest("sha256:" + "ab" * 32) == "abababababab"
    assert short_digest("") == ""
