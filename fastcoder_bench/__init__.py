"""Benchmarks of FastCoder: one room above the product packages (which import nothing from it).

One module per benchmark: :mod:`.suite` (`fastcoder bench`: AR, PLD, REST, FastCoder side
by side), :mod:`.replay` (typing replay in the server), :mod:`.edit` (edit by instruction),
:mod:`.retrieval` (D_c retrieval latency), :mod:`.index` (workspace indexing),
:mod:`.scale` (retrieval at 100M tokens), :mod:`.sources` (D_c / D_d choices).
"""
