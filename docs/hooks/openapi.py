"""MkDocs hook: the app's OpenAPI document, made from the code at build time, as api/openapi.json in the site."""

from __future__ import annotations

import json

from mkdocs.structure.files import File


def on_files(files, config):
    from api.app import create_app
    from common.settings import Settings

    schema = create_app(Settings()).openapi()
    files.append(File.generated(config, "api/openapi.json", content=json.dumps(schema, indent=2) + "\n"))
    return files
