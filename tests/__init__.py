"""The test suite: pytest imports its modules as ``tests.test_x``; shared helpers are
``tests.support``."""
