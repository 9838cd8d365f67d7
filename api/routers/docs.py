"""/docs (Swagger UI) and /redoc with their assets served from here, so they work without a network.

The assets come from the fastapi-offline wheel, which ships Swagger UI's and ReDoc's bundles.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles

from api.routers.web import STATIC

ASSETS_URL = "/docs-assets"
OAUTH2_REDIRECT_URL = "/docs/oauth2-redirect"

router = APIRouter(include_in_schema=False)


def assets() -> StaticFiles:
    return StaticFiles(directory=str(files("fastapi_offline") / "static"))


@router.get("/docs")
def swagger_ui(request: Request) -> HTMLResponse:
    root = request.scope.get("root_path", "")
    return get_swagger_ui_html(
        openapi_url=f"{root}{request.app.openapi_url}", title=f"{request.app.title} API",
        swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js", swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
        swagger_favicon_url=f"{root}/favicon.ico", oauth2_redirect_url=f"{root}{OAUTH2_REDIRECT_URL}")


@router.get(OAUTH2_REDIRECT_URL)
def swagger_ui_redirect() -> HTMLResponse:
    return get_swagger_ui_oauth2_redirect_html()


@router.get("/redoc")
def redoc(request: Request) -> HTMLResponse:
    root = request.scope.get("root_path", "")
    return get_redoc_html(openapi_url=f"{root}{request.app.openapi_url}", title=f"{request.app.title} API",
                          redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
                          redoc_favicon_url=f"{root}/favicon.ico", with_google_fonts=False)


@router.get("/favicon.ico")
def favicon() -> FileResponse:
    return FileResponse(STATIC / "favicon.ico", media_type="image/x-icon",
                        headers={"Cache-Control": "public, max-age=86400"})
