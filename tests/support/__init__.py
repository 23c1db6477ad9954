"""Support code the tests share, imported as `support.<name>` (`tests/` is on `sys.path`)."""
