"""The command line behind ``modelprov.cli``: the subcommands and their handlers, flags
derived from the passes' options, the demo, progress lines and quieted libraries."""
