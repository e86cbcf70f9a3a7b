"""The REST surface: FastAPI over the service, under ``/v1`` (see ``docs/rest.md``).

``create_app(settings, service=None)`` builds the ASGI app; ``memdir serve`` runs it.
"""

from __future__ import annotations

from memdir.api.app import app_from_env, create_app

__all__ = ["app_from_env", "create_app"]
