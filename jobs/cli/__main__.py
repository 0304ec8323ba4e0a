"""`python -m jobs.cli`: the same command line as the `tts-jobs` script."""

from jobs.cli.main import main

main()
