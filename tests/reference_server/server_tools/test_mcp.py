"""The MCP connector over HTTP with the scripted engine, against a real MCP server on loopback:
tools listed and offered by configuration, called when the model calls them, mcp_tool_use and
mcp_tool_result blocks, the token passed through, history read back, and the address guard."""

from __future__ import annotations

import pytest

from reference_server.engine.base import ToolCall
from reference_server.engine.toolformat import render_call

from .mcp_server import mcp_server
from .test_app_server_tools import calling, client_for, refused, types

BETA = {"anthropic-beta": "mcp-client-2025-11-20"}
OLD_BETA = {"anthropic-beta": "mcp-client-2025-04-04"}


def body(servers, tools=None, **changes):
    return {
        "model": "scripted",
        "max_tokens": 600,
        "messages": [{"role": "user", "content": "Tide at Brest?"}],
        "mcp_servers": servers,
        **({"tools": tools} if tools is not None else {}),
        **changes,
    }


def server(site, **changes):
    return {"type": "url", "url": site.url, "name": "tides", "authorization_token": "secret-token", **changes}


def test_an_mcp_tool_is_listed_called_and_answered():
    with mcp_server() as site:
        client, engine = client_for(
            calling(ToolCall("x", "tide", {"harbour": "brest"})), allow_private_mcp=True
        )
        with client:
            toolset = {"type": "mcp_toolset", "mcp_server_name": "tides"}
            response = client.post("/v1/messages", json=body([server(site)], [toolset]), headers=BETA)
            assert response.status_code == 200, response.text
            message = response.json()
            assert types(message) == ["mcp_tool_use", "mcp_tool_result", "text"]
            use, result, _ = message["content"]
            assert (use["name"], use["server_name"], use["input"]) == ("tide", "tides", {"harbour": "brest"})
            assert use["id"].startswith("mcptoolu_")
            assert result == {
                "type": "mcp_tool_result",
                "tool_use_id": use["id"],
                "is_error": False,
                "content": [{"type": "text", "text": "High tide at brest: 4.2 m"}],
            }
            assert site.calls == [{"harbour": "brest"}]
            assert {"Bearer secret-token"} == set(site.authorizations)
            assert {tool.name for tool in engine.requests[0].tools} == {"tide", "wind"}
            assert "High tide at brest" in engine.requests[1].turns[-1].text
            history = {
                **body([server(site)], [toolset]),
                "messages": [
                    {"role": "user", "content": "Tide at Brest?"},
                    {"role": "assistant", "content": message["content"]},
                    {"role": "user", "content": "Thanks"},
                ],
            }
            assert client.post("/v1/messages", json=history, headers=BETA).status_code == 200


@pytest.mark.parametrize(
    ("beta", "servers", "tools", "offered"),
    [
        (
            BETA,
            lambda s: [server(s)],
            [{"type": "mcp_toolset", "mcp_server_name": "tides", "configs": {"wind": {"enabled": False}}}],
            {"tide"},
        ),
        (
            BETA,
            lambda s: [server(s)],
            [
                {
                    "type": "mcp_toolset",
                    "mcp_server_name": "tides",
                    "default_config": {"enabled": False},
                    "configs": {"wind": {"enabled": True}},
                }
            ],
            {"wind"},
        ),
        (BETA, lambda s: [server(s)], [], set()),
        (OLD_BETA, lambda s: [server(s, tool_configuration={"allowed_tools": ["wind"]})], None, {"wind"}),
        (OLD_BETA, lambda s: [server(s, tool_configuration={"enabled": False})], None, set()),
    ],
)
def test_which_tools_are_offered(beta, servers, tools, offered):
    with mcp_server() as site:
        client, engine = client_for("Fine.", allow_private_mcp=True)
        with client:
            response = client.post("/v1/messages", json=body(servers(site), tools), headers=beta)
            assert response.status_code == 200, response.text
        assert {tool.name for tool in engine.requests[0].tools} == offered


def test_mcp_servers_are_checked():
    with mcp_server() as site:
        guarded, _ = client_for("Fine.")
        with guarded:  # loopback refused by default, before any request reaches it
            refused(
                guarded.post("/v1/messages", json=body([server(site)]), headers=OLD_BETA), "private or local"
            )
            assert site.authorizations == []
        client, _ = client_for("Fine.", allow_private_mcp=True)
        with client:
            refused(client.post("/v1/messages", json=body([server(site)])), "beta header")
            unknown = [{"type": "mcp_toolset", "mcp_server_name": "nope"}]
            refused(client.post("/v1/messages", json=body([server(site)], unknown), headers=BETA), "nope")
            gone = server(site, url=site.url.replace("/mcp", "/missing"))
            refused(
                client.post("/v1/messages", json=body([gone]), headers=OLD_BETA),
                f"could not list the tools of MCP server 'tides': 127.0.0.1:{site.port} answered HTTP 404",
            )


def test_a_failing_call_is_an_error_result_not_an_http_error():
    with mcp_server() as site:
        call = render_call(ToolCall("x", "tide", {"harbor": 3}))  # wrong argument: the server says so
        client, _ = client_for(
            lambda r: "Done." if any(t.role == "tool" for t in r.turns) else call, allow_private_mcp=True
        )
        with client:
            toolset = {"type": "mcp_toolset", "mcp_server_name": "tides"}
            message = client.post("/v1/messages", json=body([server(site)], [toolset]), headers=BETA).json()
        result = message["content"][1]
        assert result["type"] == "mcp_tool_result"
        assert result["is_error"] is True
