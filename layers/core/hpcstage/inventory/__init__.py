"""The listing engine: work-stealing key ranges, the lister, Parquet output, statistics and report."""
