#!/usr/bin/env python3
"""Trace context across the official MCP Python SDK (2.x) and tidewire, over stdio.

The SDK injects W3C trace context into every request's `_meta` and extracts it on the server; with
only the OpenTelemetry API installed (no SDK), its spans are non-recording but carry the context of
their parent, so a parent set here travels.

Usage:
    otel_peer.py client TRACE_ID SPAN_ID -- COMMAND ARGS...
        Runs COMMAND as a stdio MCP server, and calls its `echo` tool inside a parent span
        context with TRACE_ID (32 hex digits) and SPAN_ID (16): the server should see TRACE_ID.
        Prints the echoed text.
    otel_peer.py server
        A stdio MCP server with one tool, `trace_id`, returning the trace id of the span its
        handler runs in (32 hex digits; zeros when there is none).
Logs go to stderr; stdout is the MCP wire (server) or the result (client).
"""

from __future__ import annotations

import os
import sys
import warnings

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server import MCPServer
from opentelemetry import context, trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

warnings.filterwarnings("ignore")


def serve() -> None:
    server = MCPServer("otel-peer", version="1.0.0")

    @server.tool(description="The trace id of the span this handler runs in.", structured_output=False)
    async def trace_id() -> str:
        return format(trace.get_current_span().get_span_context().trace_id, "032x")

    server.run("stdio")


async def call(trace_id: str, span_id: str, argv: list[str]) -> None:
    parent = SpanContext(
        trace_id=int(trace_id, 16),
        span_id=int(span_id, 16),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    token = context.attach(trace.set_span_in_context(NonRecordingSpan(parent)))
    try:
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
        with anyio.fail_after(30):
            async with Client(stdio_client(params)) as client:
                result = await client.call_tool("echo", {"text": "traced from Python"})
                print(result.content[0].text)
    finally:
        context.detach(token)


def main() -> None:
    if sys.argv[1:2] == ["server"]:
        serve()
    elif sys.argv[1:2] == ["client"] and len(sys.argv) > 5 and sys.argv[4] == "--":
        anyio.run(call, sys.argv[2], sys.argv[3], sys.argv[5:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
