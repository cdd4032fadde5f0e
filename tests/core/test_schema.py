"""/api/v1/schema/ is a valid OpenAPI 3 document and the committed docs/openapi/v1.yaml is current."""
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from django.conf import settings
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiYamlRenderer
from drf_spectacular.validation import validate_schema


@pytest.mark.django_db
def test_schema_endpoint_serves_valid_openapi3(client):
    resp = client.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi")
    assert resp.status_code == 200
    doc = yaml.safe_load(resp.content)
    assert doc["openapi"].startswith("3.")
    validate_schema(doc)  # raises on an invalid document
    assert "/api/v1/operations/{id}/" in doc["paths"]


def test_committed_schema_is_current():
    generated = OpenApiYamlRenderer().render(SchemaGenerator().get_schema(request=None, public=True),
                                             renderer_context={}).decode()
    committed = (Path(settings.BASE_DIR) / "docs" / "openapi" / "v1.yaml").read_text()
    assert yaml.safe_load(committed) == yaml.safe_load(generated), \
        "docs/openapi/v1.yaml is stale: run `make schema` and commit it"


class _Assets(HTMLParser):
    """The URLs a page loads: `src` of scripts and images, `href` of links."""

    def __init__(self):
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        wanted = {"script": "src", "img": "src", "link": "href"}.get(tag)
        self.urls += [value for name, value in attrs if name == wanted and value]


@pytest.mark.django_db
def test_docs_page_loads_only_same_origin_assets_and_they_are_served(client):
    """The interactive docs work offline: Swagger UI comes from drf-spectacular-sidecar under /static/ (served
    by the product, WhiteNoise), never from a CDN; every file the page loads answers 200."""
    page = client.get("/api/v1/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assert not re.findall(r"https?://", html)  # no other origin (no CDN, no validator badge)
    assert '"validatorUrl": null' in html
    parser = _Assets()
    parser.feed(html)
    assert {url.rsplit("/", 1)[-1] for url in parser.urls} == {
        "favicon-32x32.png", "swagger-ui.css", "swagger-ui-bundle.js", "swagger-ui-standalone-preset.js"}
    for url in parser.urls:
        assert url.startswith("/static/drf_spectacular_sidecar/swagger-ui-dist/"), url
        asset = client.get(url)
        assert asset.status_code == 200, url
        assert int(asset["Content-Length"]) > 0
    js = client.get(next(url for url in parser.urls if url.endswith("swagger-ui-bundle.js")))
    assert js["Content-Type"].startswith(("text/javascript", "application/javascript"))


def test_every_operation_documents_its_problem_responses():
    doc = SchemaGenerator().get_schema(request=None, public=True)
    problem = doc["components"]["schemas"]["Problem"]
    assert {"type", "title", "status", "detail", "code", "request_id"} <= set(problem["required"])
    assert doc["components"]["responses"]["Problem401"]["content"]["application/problem+json"]["schema"] == {
        "$ref": "#/components/schemas/Problem"}
    checked = 0
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            checked += 1
            assert {"400", "401", "403"} <= set(op["responses"]), (method, path)
            if "{" in path:
                assert "404" in op["responses"], (method, path)
    assert checked > 100
    # an endpoint's own description of a status is kept (the 202 and the 400 that names period_too_early of POST
    # /invoice-runs stay, nothing replaced by the generic ones); a status it does not describe gets the generic one
    run = doc["paths"]["/api/v1/invoice-runs/"]["post"]["responses"]
    assert "202" in run and "period_too_early" in run["400"]["description"]
    assert run["400"]["content"]["application/problem+json"]["schema"] == {"$ref": "#/components/schemas/Problem"}
    assert run["401"] == {"$ref": "#/components/responses/Problem401"}


def test_the_schema_states_what_the_code_enforces():
    """page_size 1-500 on every list, strict JSON bodies, the errors member's real shape, 404/409 on bodies, and
    the committed file passes a strict OpenAPI validator."""
    from openapi_spec_validator import validate
    from openapi_spec_validator.readers import read_from_filename

    doc = SchemaGenerator().get_schema(request=None, public=True)
    sizes = [p["schema"] for item in doc["paths"].values() for op in item.values() if isinstance(op, dict)
             for p in op.get("parameters", []) if p.get("name") == "page_size"]
    assert len(sizes) > 30 and all(s == {"type": "integer", "minimum": 1, "maximum": 500} for s in sizes)
    assert doc["components"]["schemas"]["ProjectCreateInputRequest"]["additionalProperties"] is False
    items = doc["components"]["schemas"]["Problem"]["properties"]["errors"]["additionalProperties"]["items"]
    assert {"type": "object"} in items["anyOf"]
    create = doc["paths"]["/api/v1/projects/"]["post"]
    assert {"404", "409"} <= set(create["responses"])
    assert "multipart/form-data" not in create["requestBody"]["content"]
    spec, _ = read_from_filename(str(Path(__file__).resolve().parents[2] / "docs/openapi/v1.yaml"))
    validate(spec)
