"""Open WebUI's own ExternalDocumentLoader against an ocrq API: the real other side of PUT /process.

Usage (open-webui installs torch and more, 7.4 GB and about 5 minutes here, so it lives in a venv of its own):

    python3 -m venv /tmp/owui && /tmp/owui/bin/pip install open-webui==0.12.4 langchain-core
    /tmp/owui/bin/python bench/openwebui_loader.py --url http://127.0.0.1:8000 --key "$KEY" FILE...

It runs Open WebUI's loader class as Open WebUI's Loader builds it (retrieval/loaders/main.py: file_path, url,
api_key, mime_type, headers, metadata) on each FILE and prints, a JSON line each, the LangChain Documents it
made: their count, page_content lengths and metadata. Open WebUI's modules want a data and a static folder at
import; temporary ones are made here. tests/openwebui/test_external_loader.py runs this script when OCRQ_OPEN_WEBUI_PYTHON
names such a Python.
"""

from __future__ import annotations

import argparse
import json
import mimetypes
import os
import sys
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="owui-"))
    for folder in ("front/static", "data", "static"):
        (scratch / folder).mkdir(parents=True)
    os.environ.setdefault("WEBUI_SECRET_KEY", "bench-only")
    os.environ.setdefault("DATA_DIR", str(scratch / "data"))
    os.environ.setdefault("FRONTEND_BUILD_DIR", str(scratch / "front"))
    os.environ.setdefault("STATIC_DIR", str(scratch / "static"))
    from open_webui.retrieval.loaders.external_document import ExternalDocumentLoader

    for path in args.files:
        mime = mimetypes.guess_type(path.name)[0]
        loader = ExternalDocumentLoader(file_path=str(path), url=args.url, api_key=args.key, mime_type=mime,
                                        headers={}, metadata={"file_name": path.name, "file_content_type": mime})
        try:
            docs = loader.load()
        except Exception as exc:  # the loader raises Exception("Error loading document: ...")
            print(json.dumps({"file": path.name, "error": str(exc)}), flush=True)
            continue
        print(json.dumps({"file": path.name, "documents": len(docs),
                          "page_content": [d.page_content for d in docs],
                          "metadata": [d.metadata for d in docs]}, ensure_ascii=False), flush=True)


if __name__ == "__main__":
    sys.exit(main())
