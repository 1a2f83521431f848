"""`triforge demo`."""

from __future__ import annotations


def demo() -> None:
    """Run the offline scripted demo."""
