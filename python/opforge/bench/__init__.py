"""``opforge bench``: opforge's speed as ratios to the machine's limits and to
the frameworks' built-ins, all measured in one run.

Run it as ``opforge bench`` or ``python -m opforge bench`` (``--help``).

Modules: ``limits`` (copy bandwidth and FMA peak, with the native loops of
``opforge._probe``), ``frameworks`` (opforge and each framework's built-ins),
``transformer`` (the transformer section's ops: inputs and float64 checks),
``worker`` (one process per implementation), ``measure`` (best-of timing,
progress lines), ``report`` (ratios, JSON, text table), ``plot`` (PNG),
``runner`` (options and the whole run), ``machine`` (CPU and versions).
None of them is part of opforge's API.
"""
