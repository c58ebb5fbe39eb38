"""Error pages keep the site's navigation, and every page has a favicon."""
import pytest
from django.conf import settings

pytestmark = pytest.mark.django_db


def test_a_missing_page_is_the_sites_page_with_its_navigation_and_the_path_escaped(signed_in):
    response = signed_in.get("/runs/999999/<b>x</b>/nowhere/")
    html = response.content.decode()
    assert response.status_code == 404 and 'id="not-found"' in html
    assert 'href="/prompt-sets/"' in html and 'href="/runs/new/"' in html  # the navigation
    assert "<b>x</b>" not in html


def test_a_malformed_request_is_the_sites_page_with_its_navigation(signed_in, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 10  # more fields than Django reads: a 400 (TooManyFieldsSent)
    response = signed_in.post("/runs/new/", {f"field{n}": "x" for n in range(20)})
    html = response.content.decode()
    assert response.status_code == 400 and 'id="bad-request"' in html and 'href="/prompt-sets/"' in html


def test_a_request_with_a_host_django_refuses_still_gets_the_sites_page(signed_in):
    # refused before sign-in is read: the page, without the signed-in navigation
    response = signed_in.get("/", HTTP_HOST="bad host name")
    html = response.content.decode()
    assert response.status_code == 400 and 'id="bad-request"' in html and 'class="brand"' in html


def test_the_server_error_page_renders_without_a_request(client, user):
    from django.template import loader

    html = loader.get_template("500.html").render()  # as django.views.defaults.server_error renders it
    assert 'id="server-error"' in html and 'class="brand"' in html


def test_pages_link_the_favicon_and_browsers_asking_for_favicon_ico_are_sent_to_it(signed_in):
    page = signed_in.get("/").content.decode()
    assert '<link rel="icon" type="image/svg+xml" href="/static/favicon.svg">' in page
    assert (settings.BASE_DIR / "static" / "favicon.svg").read_text().startswith("<svg")
    response = signed_in.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == "/static/favicon.svg"
