"""``/docs``: the browsable API reference (Swagger UI), served entirely by memdir.

FastAPI's default page loads Swagger UI from a CDN and starts it with an inline script, so
offline it is blank and under a strict Content-Security-Policy it cannot run. Here the page,
its stylesheet and scripts come from the ``swagger-ui-py`` package (Apache-2.0; it ships
Swagger UI 5's own files with their licence, served at ``/docs/assets/LICENSE``), and the
start-up code is a static script of our own: the page's policy allows scripts, styles and
requests from this server only, no inline code and no ``eval``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, Response

__all__ = ["DOCS_CSP", "install_docs"]

#: The policy of every ``/docs`` response: nothing from elsewhere, nothing inline.
DOCS_CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

#: The only files served under ``/docs/assets/`` (and their types).
ASSETS: Final = {
    "swagger-ui.css": "text/css",
    "swagger-ui-bundle.js": "text/javascript",
    "favicon-32x32.png": "image/png",
    "LICENSE": "text/plain",
}

_PAGE: Final = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>memdir API</title>
<link rel="icon" type="image/png" href="{base}/docs/assets/favicon-32x32.png">
<link rel="stylesheet" href="{base}/docs/assets/swagger-ui.css">
</head>
<body>
<div id="swagger-ui" data-openapi="{base}/openapi.json"></div>
<script src="{base}/docs/assets/swagger-ui-bundle.js"></script>
<script src="{base}/docs/start.js"></script>
</body>
</html>
"""

_START: Final = """\
(function () {
  var node = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: node.getAttribute("data-openapi"),
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
})();
"""


def _assets() -> Path:
    import swagger_ui

    return Path(swagger_ui.__file__).parent / "static"


def _headers() -> dict[str, str]:
    return {
        "content-security-policy": DOCS_CSP,
        "x-content-type-options": "nosniff",
        "x-frame-options": "DENY",
        "referrer-policy": "no-referrer",
    }


def install_docs(app: FastAPI) -> None:
    """Serve ``/docs`` (the app must be built with ``docs_url=None``)."""

    async def docs(request: Request) -> HTMLResponse:
        base = request.scope.get("root_path", "").rstrip("/")
        return HTMLResponse(_PAGE.format(base=base), headers=_headers())

    async def start() -> Response:
        return Response(_START, media_type="text/javascript", headers=_headers())

    async def asset(name: str) -> FileResponse:
        if name not in ASSETS:
            raise HTTPException(404, f"no asset {name[:60]!r}; /docs serves {', '.join(ASSETS)}")
        headers = {**_headers(), "cache-control": "public, max-age=86400"}
        return FileResponse(_assets() / name, media_type=ASSETS[name], headers=headers)

    app.add_api_route("/docs", docs, include_in_schema=False)
    app.add_api_route("/docs/start.js", start, include_in_schema=False)
    app.add_api_route("/docs/assets/{name}", asset, include_in_schema=False)
