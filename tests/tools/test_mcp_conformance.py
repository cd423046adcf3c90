"""The official MCP conformance suite's scenarios for what Salon offers: its client scenarios
against the hub, its server scenarios against `salon tools serve --http` (see
tests/tools/mcp_conformance.py; scripts/test installs node 22 and the suite where it can)."""

from __future__ import annotations

import pytest

from tests.tools import mcp_conformance

pytestmark = pytest.mark.skipif(
    mcp_conformance.unavailable() is not None, reason=mcp_conformance.unavailable() or ""
)


@pytest.mark.parametrize("scenario", mcp_conformance.CLIENT_SCENARIOS)
def test_client_scenario_against_the_hub(scenario: str) -> None:
    outcome = mcp_conformance.run_client(scenario)
    assert outcome.failures == ()
    assert outcome.passed, f"{scenario}: no checks ran"


def test_server_scenarios_against_salon_tools_serve_http() -> None:
    outcomes = mcp_conformance.run_server()
    assert {o.scenario: o.failures for o in outcomes} == dict.fromkeys(
        mcp_conformance.SERVER_SCENARIOS, ()
    )
    assert all(o.passed for o in outcomes)
