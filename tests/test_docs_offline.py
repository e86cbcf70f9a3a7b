"""/docs is served by memdir itself: the page names only this server's assets, each asset is
Swagger UI's own file from the package, and the policy forbids anything from elsewhere."""

from __future__ import annotations

import re
from pathlib import Path

from starlette.testclient import TestClient

import memdir
from memdir import OWNER
from memdir.api import create_app
from memdir.settings import Settings


def test_docs_page_and_assets_are_local(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'memdir.db'}"
    svc = memdir.open(db, create=True)
    svc.create_store(OWNER, "default")
    with TestClient(create_app(Settings(db=db), svc)) as client:
        page = client.get("/docs")
        assert page.status_code == 200
        csp = page.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert sources and all(s.startswith("/") for s in sources), sources
        assert "<script>" not in page.text  # no inline script: every script has a src
        for source in sources:
            answer = client.get(source)
            assert answer.status_code == 200, source
        bundle = client.get("/docs/assets/swagger-ui-bundle.js")
        assert bundle.headers["content-type"].startswith("text/javascript")
        assert len(bundle.content) > 500_000  # Swagger UI itself, not a stub
        assert "Apache License" in client.get("/docs/assets/LICENSE").text
        assert client.get("/docs/assets/..%2Fcore.py").status_code == 404
        assert client.get("/docs/assets/index.html").status_code == 404
    svc.db.close()
