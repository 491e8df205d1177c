import pytest

from kafka_lineage.graph.node_ids import BadNodeId, NodeId, parse_node_id


@pytest.mark.parametrize(("value", "expected"), [
    ("dataset:food_delivery:public.delivery_7_days", NodeId("dataset", "food_delivery", "public.delivery_7_days")),
    ("dataset:postgres://db:5432:shop.public.orders", NodeId("dataset", "postgres://db:5432", "shop.public.orders")),
    ("dataset:s3://lake:mart/orders", NodeId("dataset", "s3://lake", "mart/orders")),
    ("job:airflow:etl.orders", NodeId("job", "airflow", "etl.orders")),
    ("dataset:ns:a:b", NodeId("dataset", "ns", "a:b")),  # the last part takes the rest
    ("datasetField:kafka://broker:9092:orders:customer.id",
     NodeId("datasetField", "kafka://broker:9092", "orders", "customer.id")),
])
def test_marquez_node_ids_are_read_as_marquez_reads_them(value: str, expected: NodeId) -> None:
    assert parse_node_id(value) == expected
    assert str(expected) == value


@pytest.mark.parametrize("value", ["", "dataset", "dataset:", "dataset:ns", "dataset:ns:", "table:ns:name",
                                   "datasetField:ns:name", "dataset:ns:name#3f2a", "run:6f1c"])
def test_malformed_node_ids_are_refused_with_the_forms(value: str) -> None:
    with pytest.raises(BadNodeId, match="nodeId"):
        parse_node_id(value)


def test_only_the_kinds_asked_for() -> None:
    with pytest.raises(BadNodeId, match="datasetField:"):
        parse_node_id("job:ns:name", kinds=("dataset", "datasetField"))
