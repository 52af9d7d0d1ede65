from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reference_server.catalog import Alias, ModelCatalog
from reference_server.engine.base import ModelCard
from reference_server.errors import InvalidRequestError, NotFoundError


def card(model_id: str) -> ModelCard:
    return ModelCard(model_id, model_id.upper(), datetime(2025, 2, 7, tzinfo=UTC), 8192, 8192)


CATALOG = ModelCatalog([card(f"m{i}") for i in range(5)], [Alias.parse("claude-*=m2")])


def ids(page) -> list[str]:
    return [info.id for info in page.data]


def test_alias_resolves_and_unknown_is_404():
    assert CATALOG.resolve("claude-opus-4-6").id == "m2"
    assert CATALOG.info("claude-opus-4-6").id == "m2"
    with pytest.raises(NotFoundError, match=r"^model: gpt$"):
        CATALOG.resolve("gpt")


@pytest.mark.parametrize("spec", ["nope", "=m1", "x="])
def test_bad_alias_specs(spec):
    with pytest.raises(ValueError, match="PATTERN=MODEL"):
        Alias.parse(spec)


def test_alias_must_point_at_a_served_model():
    with pytest.raises(ValueError, match="not served"):
        ModelCatalog([card("a")], [Alias.parse("claude-*=b")])


def test_forward_pagination_walks_every_model_once():
    first = CATALOG.page(after_id=None, before_id=None, limit=2)
    assert (ids(first), first.has_more, first.first_id, first.last_id) == (
        ["m0", "m1"],
        True,
        "m0",
        "m1",
    )
    second = CATALOG.page(after_id=first.last_id, before_id=None, limit=2)
    assert (ids(second), second.has_more) == (["m2", "m3"], True)
    last = CATALOG.page(after_id=second.last_id, before_id=None, limit=2)
    assert (ids(last), last.has_more) == (["m4"], False)


def test_backward_pagination():
    page = CATALOG.page(after_id=None, before_id="m3", limit=2)
    assert (ids(page), page.has_more) == (["m1", "m2"], True)
    page = CATALOG.page(after_id=None, before_id="m1", limit=2)
    assert (ids(page), page.has_more) == (["m0"], False)


def test_empty_page_after_the_last_model():
    page = CATALOG.page(after_id="m4", before_id=None, limit=20)
    assert (page.data, page.has_more, page.first_id, page.last_id) == ([], False, None, None)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"after_id": None, "before_id": None, "limit": 0},
        {"after_id": None, "before_id": None, "limit": 1001},
        {"after_id": "m1", "before_id": "m3", "limit": 2},
        {"after_id": "zzz", "before_id": None, "limit": 2},
    ],
)
def test_bad_page_requests(kwargs):
    with pytest.raises(InvalidRequestError):
        CATALOG.page(**kwargs)
