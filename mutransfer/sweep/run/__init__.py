"""Running a sweep on Ray: the driver (`run`, `dry_run`), the runner (one Tuner per phase),
the trainable on the workers, Tune's callbacks and loggers, the cluster session, job
submission and the progress line."""
