"""EvoPolicyGym's Crafter family: the ``crafter`` Benchmark (``tasks``), Crafter made
deterministic across processes (``world``), the Crafter score (``scoring``), video frames
(``render``) and a rule-based baseline program (``baselines/rules``)."""
