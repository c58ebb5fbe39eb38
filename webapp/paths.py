"""Paths that can name nothing: a control character (a NUL above all, which PostgreSQL refuses in any query) in
a request's path. No name or id the site stores holds one (uploads and ingestion refuse them), so such a path is
a 404, answered before any view queries the database with it (a NUL in a prompt id's segment was a 500)."""
from django.http import Http404

from webapp.plain_text import control_character


class ControlCharacterPathMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if control_character(request.path):
            raise Http404("no page has a control character in its path")  # handler404: JSON under /api/
        return self.get_response(request)
