"""``python -m turkflow``: the ``turkflow`` command where the console script is not on PATH."""

from turkflow.cli.main import main

main(prog_name="turkflow")
