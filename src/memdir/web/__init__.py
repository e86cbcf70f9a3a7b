"""The web UI: server-rendered pages over the service (see ``docs/web.md``).

Mount :func:`create_web_app` next to REST and MCP (``memdir serve`` mounts it at ``/ui``).
"""

from memdir.web.app import create_web_app

__all__ = ["create_web_app"]
