"""The service a local client talks to (see :mod:`memdir.sdk._local`).

Kept apart so that importing the SDK imports no service: only opening a client on a
database (``db=URL``) loads it, with the database itself.
"""

from __future__ import annotations

import hmac
import secrets

from memdir.core.errors import NotFound, Unauthenticated
from memdir.core.model import OWNER, Principal
from memdir.service import MemoryService

__all__ = ["LocalService"]


class LocalService(MemoryService):
    """The service, accepting one extra bearer secret that stands for a chosen principal."""

    _secret: str = ""
    _acting: str = "owner"

    def act_as(self, principal_id: str) -> str:
        """Make a fresh secret stand for ``principal_id`` (checked now); return the secret."""
        self.resolve(principal_id)
        self._acting = principal_id
        self._secret = "local_" + secrets.token_urlsafe(32)
        return self._secret

    def authenticate(self, token: str) -> Principal:
        if self._secret and hmac.compare_digest(token.encode(), self._secret.encode()):
            if self._acting == OWNER.id:
                return OWNER
            try:
                return self.resolve(self._acting)
            except NotFound:
                raise Unauthenticated(
                    f"principal {self._acting} no longer exists; open the client as another "
                    "principal",
                    principal=self._acting,
                ) from None
        return super().authenticate(token)
