"""Side-by-side benchmarks for kubewire (issue 6).

Each benchmark runs kubewire and its reference in one run, interleaved, and reports the median
ratio with its min-max. Servers, readers and load generators are separate processes on
127.0.0.1. ``python -m bench`` runs them all and rewrites ``bench/RESULTS.md``.
"""
