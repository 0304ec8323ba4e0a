"""The command line: `main` registers every command; one module per group of commands, and how
the CLI shows output and progress. Nothing here imports storage/ or the engine."""
