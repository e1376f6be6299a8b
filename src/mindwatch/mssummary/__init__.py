"""MindSpore's own summary files (``SummaryCollector`` / ``SummaryRecord``, ``*_MS``),
read without MindSpore: their records (:mod:`.format`) and their computation graph as a
TensorBoard ``GraphDef`` (:mod:`.graph`). ``mindwatch convert`` turns them into
TensorBoard runs (:mod:`mindwatch.tools.convert.summaries`)."""
