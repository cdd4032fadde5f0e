"""The product serves the web console at / (apps.core.console) without shadowing its own routes.

The build is a tiny fixture written into a temporary CONSOLE_DIST_DIR, so these tests need no node toolchain."""
import pytest
from django.test import Client

INDEX = "<!doctype html><title>gpucloud console</title><div id=root></div>"


@pytest.fixture
def dist(tmp_path, settings):
    (tmp_path / "assets").mkdir()
    (tmp_path / "index.html").write_text(INDEX)
    (tmp_path / "assets" / "index-abc123.js").write_text("console.log('hi')")
    (tmp_path / "favicon.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
    settings.CONSOLE_DIST_DIR = str(tmp_path)
    return tmp_path


def _body(response) -> str:
    return b"".join(response.streaming_content).decode() if response.streaming else response.content.decode()


@pytest.mark.parametrize("path", ["/", "/instances", "/instances/0190a3b4-0000-7000-8000-000000000001",
                                  "/ssh-keys", "/sign-in?next=/instances"])
def test_client_routes_get_index_html_uncached(dist, path):
    response = Client().get(path)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert response["Cache-Control"] == "no-cache"
    assert "gpucloud console" in _body(response)


def test_hashed_assets_are_cached_for_a_year(dist):
    response = Client().get("/assets/index-abc123.js")
    assert response.status_code == 200
    assert response["Cache-Control"] == "public, max-age=31536000, immutable"
    assert "javascript" in response["Content-Type"]
    assert _body(response) == "console.log('hi')"


def test_other_build_files_are_served_with_a_short_cache(dist):
    response = Client().get("/favicon.svg")
    assert response.status_code == 200
    assert response["Cache-Control"] == "public, max-age=3600"
    assert response["Content-Type"] == "image/svg+xml"


def test_a_missing_file_is_a_404_problem_not_the_index(dist):
    response = Client().get("/assets/index-gone.js")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "not_found"


def test_a_path_outside_the_build_is_refused(dist):
    (dist.parent / "secret.txt").write_text("no")
    response = Client().get("/..%2Fsecret.txt")
    assert response.status_code == 404
    assert "no" != _body(response)


def test_writes_to_console_paths_are_405(dist):
    response = Client().post("/instances", data={})
    assert response.status_code == 405


@pytest.mark.django_db
@pytest.mark.parametrize("path,status,ctype", [
    ("/api/v1/nothing-here/", 404, "application/problem+json"),
    ("/api/v1/", 404, "application/problem+json"),
    ("/api/v1/instances", 401, "application/problem+json"),
    ("/api", 404, "application/problem+json"),
    ("/healthz", 200, "application/json"),
    ("/admin", 404, "application/problem+json"),
    ("/admin/", 404, "application/problem+json"),
    ("/oidc/authenticate/", 404, "application/problem+json"),
    ("/static/x.css", 404, "application/problem+json"),
])
def test_the_products_own_routes_are_not_shadowed(dist, path, status, ctype):
    response = Client().get(path)
    assert response.status_code == status, path
    assert response["Content-Type"].startswith(ctype)


def test_without_a_build_the_console_says_how_to_build_it(settings, tmp_path):
    settings.CONSOLE_DIST_DIR = str(tmp_path / "nothing")
    response = Client().get("/instances")
    assert response.status_code == 503
    assert response.json()["code"] == "console_not_built"
    assert "make console" in response.json()["detail"]
