"""Searchable PDF results: the job's pages with their recognised text as an invisible layer."""

from .assemble import build_pdf
from .pages import job_pdf, layer_of
from .text_layer import Line, PageLayer

__all__ = ["Line", "PageLayer", "build_pdf", "job_pdf", "layer_of"]
