"""Seeds: every random draw of a run derives from its parts, so that the same
inputs give the same draws on every machine."""

from __future__ import annotations

import hashlib
import json


def derive_seed(*parts) -> int:
    """A 32-bit seed from any JSON-able parts (stable across runs and hosts).

    A run's seed is ``derive_seed(campaign seed, experiment, variant,
    repetition)``; the background traffic derives its own from its entry's
    ``seed`` and the run's."""
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).digest()
    return int.from_bytes(digest[:4], "big")
