"""``python -m dashboard``: the dashboard as a process of its own (see ``dashboard.launch``)."""

from dashboard.launch import main

main()
