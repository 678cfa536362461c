"""What the test modules share: stand-in servers, synthetic stores and Runs, fixtures
and the checks several files make. No test module imports another; they import these."""
