"""The CLI's spelled-out choices equal the constants of the layers that define them."""

from assurance.cli import _choices


def test_choices_match_their_sources():
    from assurance.pipeline.options import STAGES
    from engine.compare.protocol import SUITES
    from kernels.shapes import PRESETS
    from probing.backend import APIS
    from probing.protocol import SCENARIOS

    assert _choices.STAGES == STAGES
    assert _choices.SUITES == ("all", *SUITES)
    assert _choices.PRESETS == tuple(PRESETS)
    assert _choices.APIS == APIS
    assert _choices.SCENARIOS == tuple(s.name for s in SCENARIOS)
