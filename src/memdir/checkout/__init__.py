"""Memory as a real directory: checkout, sync with CAS, watch, and git export.

``checkout``/``sync`` (:mod:`memdir.checkout.sync`) work through an SDK client, so the same code
serves an embedded database and ``memdir serve``; ``watch`` (:mod:`memdir.checkout.watch`)
re-syncs when local files settle or the change feed moves; ``export_git``
(:mod:`memdir.checkout.gitexport`) writes the store's history as a git repository. See
``docs/checkout.md``.
"""

from __future__ import annotations

from memdir.checkout.state import STATE_FILE, THEIRS
from memdir.checkout.sync import CheckoutReport, SyncReport, checkout, sync

__all__ = ["STATE_FILE", "THEIRS", "CheckoutReport", "SyncReport", "checkout", "sync"]
