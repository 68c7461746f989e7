"""The workload advisor: query log, workload analyzer, cost model, benefit, trigger.

Thesis (Tufă 2019) ch. 3 and Fig. 3.1: every scan is recorded in the table's
query log (:mod:`.querylog`); the analyzer (:mod:`.analyzer`) reads a window
of it and chooses clustering features; candidate layouts are evaluated on a
sample with virtual files (:mod:`.estimate`); the cost model (:mod:`.costmodel`)
prices the rewrite and the queries, and the benefit (:mod:`.benefit`) decides
whether a rewrite pays. The pure modules never import pyspark; the parts that
sample a table or rewrite it run Spark jobs through the layers below.
"""
