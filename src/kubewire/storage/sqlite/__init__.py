"""The embedded SQLite backend of the ``Store`` contract: one database file in WAL mode.

``store`` is ``SQLiteStore`` (reads on a small thread pool, the change feed, watches from the
change log); ``writer`` group-commits on the only writing connection, in a thread or in a child
process (``writer_process`` on the server's side, ``writer_child`` in the child); ``schema``
creates and opens the database, ``reads`` holds the queries, ``compaction`` trims the change
log; ``revision_record`` and ``repair`` detect and repair a lost write-ahead log. It imports
storage's contract (``base``) and the shared core only. Other backends (etcd, in memory) are
packages beside this one.
"""
