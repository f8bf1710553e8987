"""``python -m localkg`` runs the command line."""
from localkg.cli import main

main()
