"""graph_catalog: every graph and who runs it (``stenographer graphs``).

The request carries the definitions (plain data, nothing compiled) and the shell's
tool and command maps → one stage builds the table: per graph its stages in
definition order, its edges (a conditional edge as ``from``, ``condition`` and
``routes``) and the tools and commands that run it, with the text rendering. Runs
without a run context: it reads no store.
"""

from graphs.definition import channels, linear

DEFINITION = linear(
    "graph_catalog",
    channels("request", "reply"),
    table="graph_catalog",
)
