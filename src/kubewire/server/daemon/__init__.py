"""The server as a process of the system, for the command line: ``lock`` keeps one server (or
repair) per data directory, ``background`` starts a server detached and waits until it is
ready, and stops it; ``kubeconfig_merge`` adds its context to the user's kubeconfig;
``workers`` reserves the port of ``serve --workers N`` and keeps its N processes running;
``open_files`` raises the open-file limit as a Go program does.

Imports no other room: what it knows of a server is its data directory, its command line and
the kubeconfig it writes.
"""
