"""What Salon's tests and benchmarks run against on 127.0.0.1: loopback fakes of the
services Salon talks to (Discord's REST API and gateway, the LLM vendors' APIs with their
prompt-cache billing, the integrations' vendors, MCP servers, IRC), a clock the test moves,
and throwaway real databases (``databases``).

A package of its own beside ``tests/`` and ``bench/`` so that both use the same fakes
without the benchmarks importing test code, and outside ``src/`` so that nothing of it is
installed with Salon or falls under its import contracts."""
