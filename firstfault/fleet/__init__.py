"""Fleet memory: verdicts kept across jobs, so an operator can ask what one verdict cannot answer.

One failed job is a sample of one. The questions that follow are about history: has this node
failed before, is this signature new, which hosts should be drained for good. This package sits
beside the pipeline and calls it (``firstfault.analyze``); it never changes a verdict.

* ``incident``   the typed Incident record built from a verdict's JSON (the versioned contract);
* ``store``      an embedded DuckDB store with a fixed SQL schema, Parquet export;
* ``backends``   the same store on PostgreSQL, and ``open_store`` choosing by the target;
* ``poisson``    the Poisson tail and the multiple-testing threshold the lemon test uses;
* ``reputation`` per host / GPU / link statistics, lemon nodes, "seen before", noise signatures;
* ``batch``      thousands of bundles through the pipeline, in a local process pool or on Ray;
* ``report``     the fleet report (terminal text and HTML with inline SVG plots).
"""
