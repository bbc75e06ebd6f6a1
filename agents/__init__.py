"""Agent drivers that reproduce published KGQA methods as MCP clients of a kg-mcp server.

Each driver is a control loop over a `Model` (kg_mcp.agents.models) and a `KGClient` (kg_mcp.agents.kg_client);
it never touches a store directly, so the same driver runs on a local dump, on Wikidata, or on a
team's HTTP server. Every run writes a JSON-lines trace (kg_mcp.agents.trace).
"""
