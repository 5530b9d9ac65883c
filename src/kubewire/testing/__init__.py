"""The testing toolkit, public API: ``kubewire.Server`` (a real server in process, in memory,
for tests), the pytest plugin, faults on demand, the request record, and trace record/replay.

It stands on top of the house: it may import the server, storage, client and the shared core;
nothing in those imports it.
"""
