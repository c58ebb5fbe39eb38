"""Request text that can name nothing and that the database cannot be asked about, refused before any view.

- A control character in the path (a NUL above all, which PostgreSQL refuses in any query): no name or id the
  site stores holds one (uploads and ingestion refuse them), so the path is a 404. A NUL in a prompt id's
  segment was a 500.
- A NUL in a query parameter (a filter, a search, an export's options): a 400 naming the parameter. Each view
  that passed its value to a query was a 500. Other control characters are left to the views: a tab may be
  searched for."""
from django.http import Http404
from django.shortcuts import render

from webapp.api import error
from webapp.plain_text import control_character


class UnaskableTextMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if control_character(request.path):
            raise Http404("no page has a control character in its path")  # handler404: JSON under /api/
        for name, values in request.GET.lists():
            if "\x00" in name or any("\x00" in value for value in values):
                return refusal(request, name.replace("\x00", "\\x00"), f"the parameter {name!r} holds a NUL character")
        return self.get_response(request)


def refusal(request, field: str, message: str):
    if request.path.startswith("/api/"):
        return error(message, 400, field=field)
    return render(request, "400.html", {"reason": message}, status=400)
