"""`python -m stenographer`: the stdio MCP server without arguments, else the CLI."""

import sys

if len(sys.argv) > 1:
    from stenographer.cli import main as cli_main

    cli_main()
else:
    from stenographer.server import main

    main()
