from kafka_lineage_devtools.bench import histogram_quantile

INF = float("inf")


def test_quantile_is_the_upper_bound_of_the_bucket_holding_it() -> None:
    before = {0.1: 0.0, 0.5: 0.0, 1.0: 0.0, INF: 0.0}
    after = {0.1: 50.0, 0.5: 98.0, 1.0: 100.0, INF: 100.0}
    assert histogram_quantile(before, after, 0.5) == 0.1
    assert histogram_quantile(before, after, 0.99) == 1.0


def test_only_observations_between_the_snapshots_count() -> None:
    before = {0.1: 1000.0, 1.0: 1000.0, INF: 1000.0}  # a backlog phase, all fast
    after = {0.1: 1000.0, 1.0: 1010.0, INF: 1010.0}  # the measured phase: 10 observations, all ≤ 1 s
    assert histogram_quantile(before, after, 0.5) == 1.0


def test_no_observations_is_none() -> None:
    assert histogram_quantile({}, {0.1: 0.0, INF: 0.0}, 0.99) is None
    assert histogram_quantile({}, {}, 0.5) is None
