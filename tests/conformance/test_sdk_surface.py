"""What the installed SDK's types carry is read from the SDK itself, and what the spec lacks
is named: a new SDK release shows what the catalogue cannot cover yet."""

from __future__ import annotations

from conformance.cli import version_line
from conformance.reporting.coverage import universe
from conformance.reporting.sdk_surface import sdk_keys, sdk_only, spec_tool_types, surface_diff, tool_types


def test_the_sdk_types_read_as_coverage_keys():
    keys = sdk_keys()
    for key in (
        "request:model",
        "request:max_tokens",
        "count_request:messages",
        "response:stop_sequence",
        "response:usage.cache_read_input_tokens",
        "block:text",
        "block:tool_use",
        "block:document",  # a request block: ContentBlockParam
        "event:message_start",
        "delta:input_json_delta",
        "stop_reason:end_turn",
    ):
        assert key in keys, key
    assert "request:temperature" not in keys  # SDK 2.x types no sampling arguments
    assert {"web_search_20250305", "web_fetch_20250910", "bash_20250124"} <= set(tool_types())


def test_what_the_spec_lacks_is_named_with_the_sdk_type_that_has_it():
    known = set(universe())
    assert "request:speed" in known
    assert sdk_only(known - {"request:speed", "event:message_stop"}) == {
        **sdk_only(known),
        "event:message_stop": "RawMessageStreamEvent",
        "request:speed": "MessageCreateParams",
    }
    assert "web_search_20250305" in spec_tool_types()


def test_plumbline_version_says_what_the_sdk_adds():
    diff = surface_diff()
    assert diff is not None  # a checkout: spec/ is here
    lines = version_line().splitlines()
    assert lines[0].startswith("plumbline ")
    assert lines[1] == diff.line()
    assert lines[1].startswith(f"anthropic SDK {diff.sdk}")
