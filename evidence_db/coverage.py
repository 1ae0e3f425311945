"""Which stored rows the hash chain covers: ``seq`` from 1 to the chain head's, and no other.

Every reader of chained tables filters with :func:`in_chain`, so a row inserted outside bitcase
at a position the chain never visits (``seq`` 0 or negative, or beyond the head) is never read,
even on a store whose ``seq >= 1`` constraint was dropped. ``bitcase audit verify`` names such rows.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, select

from evidence_db.models import MAIN_CHAIN, ChainHead

__all__ = ["in_chain"]


def in_chain(seq: Any) -> ColumnElement[bool]:
    """``seq BETWEEN 1 AND <head seq>`` for a chained table's ``seq`` column."""
    head = select(ChainHead.seq).where(ChainHead.name == MAIN_CHAIN).scalar_subquery()
    return (seq >= 1) & (seq <= head)
