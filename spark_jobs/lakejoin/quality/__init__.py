"""Data quality: Great Expectations checks of a batch, the user's suites, Data Docs, and the
reports (files, pages, plots). Layer 3: it reads the batch log through `delta`."""
