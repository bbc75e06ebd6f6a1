from kg_mcp.cli import main

main()
