"""`python -m stenographer`: without arguments or with options first, the MCP server (as
`omega-stenographer-mcp`: `--http`, `--sse`, `--host`, `--port`); with a command first,
the `stenographer` command. `--help` and `--version` alone describe the command."""

import sys

ABOUT_THE_COMMAND = ("-h", "--help", "--version")

args = sys.argv[1:]
if not args or (args[0].startswith("-") and args[0] not in ABOUT_THE_COMMAND):
    from stenographer.serve_cli import main

    main()
else:
    from stenographer.cli import main as cli_main

    cli_main()
