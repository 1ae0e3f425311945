"""Float32 bits of JSON logprobs: exactness, ULP distance and the servers' sentinels.

Servers print float32 logprobs widened to double, so the number parsed from JSON should equal a
float32 exactly; one that does not was rounded or computed in another type, and is flagged.
Sentinels stand for "no value": vLLM clamps -inf to -9999.0, some servers send float32's lowest
value or -Infinity. Two sentinels compare equal to each other and never to a number.
"""

from __future__ import annotations

import math
import struct

__all__ = ["FLOAT32_LOWEST", "SENTINELS", "is_float32", "is_sentinel", "ulp_distance", "json_safe"]

FLOAT32_LOWEST = -3.4028234663852886e38
SENTINELS = (-9999.0, FLOAT32_LOWEST)


def is_float32(value: float) -> bool:
    """Whether the double ``value`` is exactly representable as a float32 (infinities are).

    >>> is_float32(-0.6931471824645996), is_float32(-0.6931472), is_float32(float("-inf"))
    (True, False, True)
    """
    if math.isnan(value) or math.isinf(value):
        return True
    try:
        return struct.unpack("<f", struct.pack("<f", value))[0] == value
    except OverflowError:
        return False


def is_sentinel(value: float) -> bool:
    """Whether ``value`` is a server's stand-in for minus infinity.

    >>> is_sentinel(-9999.0), is_sentinel(float("-inf")), is_sentinel(-9.5)
    (True, True, False)
    """
    return value in SENTINELS or value == float("-inf") or value <= FLOAT32_LOWEST


def _ordered(value: float) -> int:
    """The float32 nearest ``value`` as an integer that orders like the floats (-0 == +0)."""
    (bits,) = struct.unpack("<i", struct.pack("<f", value))
    return bits if bits >= 0 else -(bits & 0x7FFFFFFF)


def ulp_distance(a: float, b: float) -> int:
    """Float32 units in the last place between ``a`` and ``b`` (each rounded to float32 first).

    >>> ulp_distance(1.0, 1.0000001192092896), ulp_distance(-0.0, 0.0), ulp_distance(-1e-45, 1e-45)
    (1, 0, 2)
    """
    return abs(_ordered(a) - _ordered(b))


def json_safe(value: float) -> float | str:
    """``value`` for an evidence record: canonical JSON has no spelling for infinities or NaN."""
    return value if math.isfinite(value) else repr(value)
